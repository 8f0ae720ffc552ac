package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestColumnForStyle(t *testing.T) {
	for style, want := range map[string]Column{
		"subtask": PersistentColumn, "plan": PersistentColumn, "memory": PersistentColumn, "motion": PersistentColumn,
		"task_aug": PersistentColumn, "interjection": EventsColumn, "vqa": EventsColumn, "trace": EventsColumn,
	} {
		got, err := ColumnForStyle(Str(style))
		if err != nil || got != want {
			t.Errorf("%s: %v %v", style, got, err)
		}
	}
	if got, err := ColumnForStyle(nil); err != nil || got != EventsColumn {
		t.Errorf("nil style: %v %v", got, err)
	}
	_, err := ColumnForStyle(Str("foo"))
	if err == nil || err.Error() != "Unknown language style: 'foo'" || !errors.Is(err, ErrUnknownStyle) {
		t.Errorf("unknown style: %v", err)
	}
	if len(CoreStyles()) != 8 || !IsViewDependentStyle("vqa") || !IsViewDependentStyle("trace") || IsViewDependentStyle("motion") {
		t.Error("registry")
	}
}

func TestValidateCamera(t *testing.T) {
	cam := Str("observation.images.top")
	ok := [][2]*string{{Str("vqa"), cam}, {Str("trace"), cam}, {Str("motion"), nil}, {nil, nil}, {Str("subtask"), nil}}
	for _, c := range ok {
		if err := ValidateCamera(c[0], c[1]); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	bad := [][2]*string{{Str("vqa"), nil}, {Str("vqa"), Str("")}, {Str("motion"), cam}, {nil, cam}}
	for _, c := range bad {
		if err := ValidateCamera(c[0], c[1]); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
	if err := ValidateRow(&Row{Role: "user", Style: Str("vqa"), Camera: cam}, true); err == nil {
		t.Error("event style in the persistent column accepted")
	}
}

func TestTools(t *testing.T) {
	d := DefaultTools()
	if len(d) != 1 || d[0].Name != SayToolName || !strings.Contains(string(d[0].Parameters), `"required":["text"]`) {
		t.Fatalf("DefaultTools = %+v", d)
	}
	for _, info := range []string{`{}`, `{"tools": null}`, `{"tools": []}`} {
		tools, err := ParseTools([]byte(info))
		if err != nil || len(tools) != 1 || tools[0].Name != "say" {
			t.Errorf("%s: %v %v", info, tools, err)
		}
	}
	tools, err := ParseTools([]byte(`{"tools": [{"type": "function", "function": {"name": "record_observation", "description": "d", "parameters": {"type": "object"}}}]}`))
	if err != nil || len(tools) != 1 || tools[0].Name != "record_observation" {
		t.Fatalf("%v %v", tools, err)
	}
	if b, _ := json.Marshal(tools[0]); !strings.Contains(string(b), `"record_observation"`) {
		t.Errorf("marshal: %s", b)
	}
	for _, info := range []string{`{"tools": {}}`, `{"tools": [{"type": "function"}]}`, `{"tools": [{"type": "x", "function": {"name": "a"}}]}`,
		`{"tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]}`} {
		if _, err := ParseTools([]byte(info)); err == nil {
			t.Errorf("%s accepted", info)
		}
	}
}

func TestSampleJSON(t *testing.T) {
	s := Sample{
		Messages: []Message{
			{Role: "user", Kind: BlockContent, Blocks: []Map{{Keys: []string{"type", "feature", "n"}, Values: []any{"image", "observation.images.top", int64(3)}}}},
			{Role: "assistant", Kind: TextContent, Text: "a \"q\" <b>\n"},
			{Role: "assistant", ToolCalls: json.RawMessage(`[{"type":"function","function":{"name":"say","arguments":{"text":"hi"}}}]`)},
			{Role: "system", Kind: TextContent, Text: ""},
		},
		Streams: []string{"high_level", "high_level", "high_level", "low_level"},
	}
	b, err := s.MarshalJSON() // json.Marshal would additionally escape <, >, &
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":[{"type":"image","feature":"observation.images.top","n":3}]},{"role":"assistant","content":"a \"q\" <b>\n"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"say","arguments":{"text":"hi"}}}]},{"role":"system","content":""}],"message_streams":["high_level","high_level","high_level","low_level"],"target_message_indices":[]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(Map{Keys: []string{"x"}, Values: []any{struct{}{}}}); err == nil {
		t.Error("unsupported value accepted")
	}
}
