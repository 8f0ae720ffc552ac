package schema

import "encoding/json"

// ContentKind says what a rendered message's content is.
type ContentKind uint8

const (
	// NoContent: the message has no "content" key (tool-call-only turn).
	NoContent ContentKind = iota
	// TextContent: content is the string Message.Text.
	TextContent
	// BlockContent: content is the list of multimodal blocks Message.Blocks.
	BlockContent
)

// Message is one HF-style chat message produced by rendering a recipe.
type Message struct {
	Role   string
	Kind   ContentKind
	Text   string
	Blocks []Map
	// ToolCalls is the JSON array copied from the row named by the turn's
	// tool_calls_from binding; nil when the message has no tool_calls key.
	ToolCalls json.RawMessage
}

// Sample is the rendered form of one frame: messages plus LeRobot's
// sidecars message_streams and target_message_indices.
type Sample struct {
	Messages []Message
	Streams  []string
	Targets  []int
}

// Map is an insertion-ordered JSON object. Its values are JSON values:
// nil, bool, int64, float64, string, []any or Map (json.Number for
// integers outside the int64 range).
type Map struct {
	Keys   []string
	Values []any
}

// Get returns the value stored under key and whether it is present.
func (m Map) Get(key string) (any, bool) {
	for i, k := range m.Keys {
		if k == key {
			return m.Values[i], true
		}
	}
	return nil, false
}
