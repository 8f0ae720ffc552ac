package render

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzRowsFromJSON feeds arbitrary language rows JSON (as LeRobot's
// render_sample receives it): an error, never a panic; accepted rows keep
// tool_calls as valid JSON, strings as valid UTF-8 when the input was, and
// never more rows than the list has elements.
func FuzzRowsFromJSON(f *testing.F) {
	for _, s := range []string{
		`[{"role":"assistant","content":"sub a","style":"subtask","timestamp":0.5,"camera":null,"tool_calls":null}]`,
		`[{"role":"user","content":"q","style":"vqa","camera":"observation.images.top"}]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"say","arguments":{"text":"hi"}}}]}]`,
		`[null, {"content": 5, "style": 7}, {"content": true}]`,
		`null`, `[]`, `{}`, `"x"`, `[1]`, `[{"timestamp": "0.5"}]`, `[{"timestamp": 1e400}]`, `[{`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, persistent bool) {
		rows, err := RowsFromJSON(data, persistent)
		if err != nil {
			return
		}
		var list []json.RawMessage
		if json.Unmarshal(data, &list) == nil && len(rows) > len(list) {
			t.Fatalf("%d rows from a %d-element list", len(rows), len(list))
		}
		valid := utf8.Valid(data)
		for _, r := range rows {
			if r.ToolCalls != nil && !json.Valid(r.ToolCalls) {
				t.Fatalf("tool_calls %q is not valid JSON", r.ToolCalls)
			}
			if valid && (!utf8.ValidString(r.Role) || (r.Content != nil && !utf8.ValidString(*r.Content))) {
				t.Fatalf("invalid UTF-8 from valid input: %+v", r)
			}
			if !persistent && r.HasTimestamp {
				t.Fatalf("event row with a timestamp: %+v", r)
			}
		}
	})
}
