package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/lrstream/lrstream/schema"
)

// RowsFromJSON converts a JSON list of language rows, as LeRobot's
// render_sample receives them (e.g. in the conformance vectors), into
// schema rows, with upstream's tolerance and errors:
//
//   - null or an empty input is an empty list; null rows are skipped;
//   - a row that is not an object fails with "Language rows must be
//     dictionaries, got <type>.";
//   - content that is not a string or null is rendered with Python's str()
//     (5 -> "5", true -> "True");
//   - missing keys read as null, extra keys are ignored, a style, camera or
//     role that is not a string never matches a selector;
//   - tool_calls is kept as raw JSON whatever its shape;
//   - with persistent set, timestamps are read as given (render_sample
//     compares the values it receives; LeRobot's dataset loader is what
//     casts to float32, see CastTimestamps); a missing timestamp leaves
//     HasTimestamp false (resolving such a row fails, like upstream's
//     KeyError).
func RowsFromJSON(data []byte, persistent bool) ([]schema.Row, error) {
	if len(data) == 0 {
		return nil, nil
	}
	v, err := decodeJSONOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("language rows: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		// upstream iterates `rows or []`: a falsy value is no rows, a
		// string or mapping yields strings, anything else is not iterable.
		if !truthy(v) {
			return nil, nil
		}
		switch v.(type) {
		case string, *dict:
			return nil, fmt.Errorf("Language rows must be dictionaries, got str.")
		}
		return nil, fmt.Errorf("language rows: '%s' object is not iterable", pyTypeName(v))
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("language rows: %w", err)
	}
	rows := make([]schema.Row, 0, len(list))
	for i, el := range list {
		if el == nil {
			continue
		}
		d, ok := el.(*dict)
		if !ok {
			return nil, fmt.Errorf("Language rows must be dictionaries, got %s.", pyTypeName(el))
		}
		row, err := rowFromDict(d, raws, i, persistent)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// rowFromDict converts language row i, decoded as d (raws[i] as JSON): role,
// content, style, camera, timestamp (persistent rows only) and tool_calls
// (raw JSON).
func rowFromDict(d *dict, raws []json.RawMessage, i int, persistent bool) (schema.Row, error) {
	var row schema.Row
	if r, ok := d.get("role"); ok {
		row.Role, _ = r.(string)
	}
	if c, ok := d.get("content"); ok && c != nil {
		if _, isStr := c.(string); !isStr && !truthy(c) {
			row.Content = falsyContent(pyStr(c))
		} else {
			s := pyStr(c)
			row.Content = &s
		}
	}
	if s, ok := d.get("style"); ok {
		if str, ok := s.(string); ok {
			row.Style = &str
		}
	}
	if c, ok := d.get("camera"); ok {
		if str, ok := c.(string); ok {
			row.Camera = &str
		}
	}
	if ts, ok := d.get("timestamp"); ok && ts != nil && persistent {
		f, ok := numeric(ts)
		if !ok {
			if s, isStr := ts.(string); isStr {
				if pf, err := strconv.ParseFloat(pyStrip(s), 64); err == nil {
					f, ok = pf, true
				}
			}
		}
		if !ok {
			return row, fmt.Errorf("language row %d: timestamp %s is not a number", i, pyRepr(ts))
		}
		row.Timestamp = f
		row.HasTimestamp = true
	}
	if _, ok := d.get("tool_calls"); ok {
		tc, err := rawField(raws[i], "tool_calls")
		if err != nil {
			return row, fmt.Errorf("language row %d: %w", i, err)
		}
		if string(tc) != "null" {
			row.ToolCalls = tc
		}
	}
	return row, nil
}

// CastTimestamps rounds every persistent timestamp to float32 and widens
// it back, as LeRobot's dataset loader does (language_persistent stores
// float32). Rows read from parquet already hold such values.
func CastTimestamps(rows []schema.Row) {
	for i := range rows {
		if rows[i].HasTimestamp && !math.IsNaN(rows[i].Timestamp) {
			rows[i].Timestamp = float64(float32(rows[i].Timestamp))
		}
	}
}

// rawField returns the raw JSON of key in a JSON object (last occurrence,
// like Python's json.loads).
func rawField(obj json.RawMessage, key string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	v, ok := m[key]
	if !ok {
		return nil, errors.New("missing " + key)
	}
	return append(json.RawMessage(nil), v...), nil
}

// falsyContents are the str() forms of falsy non-string contents (0,
// False, [], ...). Rows carrying such content point into this array, so
// the task_aug pick can tell them from the truthy strings "0", "False",
// ... as upstream's `if chosen:` does.
var falsyContents = [...]string{"0", "0.0", "-0.0", "False", "[]", "{}"}

func falsyContent(s string) *string {
	for i := range falsyContents {
		if falsyContents[i] == s {
			return &falsyContents[i]
		}
	}
	return &s
}

// isFalsyContent reports content that Python would find falsy.
func isFalsyContent(p *string) bool {
	if p == nil || *p == "" {
		return true
	}
	for i := range falsyContents {
		if p == &falsyContents[i] {
			return true
		}
	}
	return false
}
