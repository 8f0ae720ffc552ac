package schema

import "encoding/json"

// Row is one language annotation row, as LeRobot decodes it from either
// language column. Persistent rows carry a timestamp; event rows take the
// timestamp of the frame they sit on and have HasTimestamp false.
//
// Nullable string fields use pointers: nil is JSON null.
type Row struct {
	Role    string
	Content *string
	Style   *string
	// Timestamp is the persistent row's timestamp after LeRobot's float32
	// cast, widened exactly to float64.
	Timestamp    float64
	HasTimestamp bool
	Camera       *string
	// ToolCalls is the row's tool_calls value as JSON text: nil for null,
	// otherwise a JSON array whose elements are JSON objects (struct-typed
	// parquet elements keep every unified field, absent ones as null).
	ToolCalls json.RawMessage
}

// Str returns a pointer to s; a convenience for building rows.
func Str(s string) *string { return &s }
