package render

import (
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// Shapes upstream accepts at load time and only rejects when a frame
// renders the component.
func TestLazyUpstreamErrors(t *testing.T) {
	task := "T"
	for _, c := range []struct{ src, want string }{
		{`{"bindings": ["x"], "messages": [{"role": "user", "content": "${x}", "stream": "low_level", "if_present": "x"}]}`, "not a mapping"},
		{`{"bindings": {"x": 5}, "messages": [{"role": "user", "content": "${x}", "stream": "low_level"}]}`, "has no attribute 'strip'"},
		{`{"bindings": {"x": "latest(t)"}, "messages": [{"role": "user", "content": "a", "stream": "low_level"}]}`, "Unknown language resolver"},
	} {
		r, err := Load([]byte(c.src), "lazy")
		if err != nil {
			t.Errorf("%s: load: %v", c.src, err)
			continue
		}
		if r.Check() == nil {
			t.Errorf("%s: Check found nothing", c.src)
		}
		ep, _ := r.Episode(nil)
		_, _, err = ep.Render(Frame{DatasetTask: &task})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: render error %v, want %q", c.src, err, c.want)
		}
	}
	// In a blend the error only shows when the component is drawn.
	r, err := Load([]byte(`{"blend": {"ok": {"weight": 1, "messages": [{"role": "user", "content": "a", "stream": "low_level"}]}, "bad": {"weight": 1e-9, "bindings": {"x": "nope"}, "messages": [{"role": "user", "content": "${x}", "stream": "low_level"}]}}}`), "lazy")
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := r.Episode([]schema.Row{})
	for i := int64(0); i < 50; i++ {
		if s, ci, err := ep.Render(Frame{SampleIdx: i}); err != nil || s == nil || ci != 0 {
			t.Fatalf("frame %d: %v %d %v", i, s, ci, err)
		}
	}
}

func TestRowsFromJSONOddities(t *testing.T) {
	rows, err := RowsFromJSON([]byte(`[null, {"role": "user", "content": 0, "style": "task_aug", "timestamp": 0.1, "extra": 1}, {"role": "user", "content": [1, "a"], "style": 3}]`), true)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%v %v", rows, err)
	}
	if *rows[0].Content != "0" || !isFalsyContent(rows[0].Content) || rows[0].Timestamp != 0.1 || !rows[0].HasTimestamp {
		t.Errorf("row 0 = %+v", rows[0])
	}
	if *rows[1].Content != "[1, 'a']" || rows[1].Style != nil || rows[1].HasTimestamp {
		t.Errorf("row 1 = %+v", rows[1])
	}
	for src, want := range map[string]string{`[1]`: "got int.", `["x"]`: "got str.", `[[]]`: "got list.", `"abc"`: "got str.", `5`: "not iterable"} {
		if _, err := RowsFromJSON([]byte(src), false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", src, err)
		}
	}
	for _, src := range []string{`null`, `[]`, `{}`, `""`, `0`, ``} {
		if rows, err := RowsFromJSON([]byte(src), false); err != nil || len(rows) != 0 {
			t.Errorf("%s: %v %v", src, rows, err)
		}
	}
	// A falsy task_aug pick falls back to the dataset task, like `if chosen:`.
	r := mustLoad(t, `{"messages": [{"role": "user", "content": "${task}", "stream": "low_level"}]}`)
	ep, _ := r.Episode(rows[:1])
	task := "canon"
	s, _, err := ep.Render(Frame{DatasetTask: &task})
	if err != nil || s.Messages[0].Text != "canon" {
		t.Errorf("falsy task_aug: %+v %v", s, err)
	}
}

func TestLoadJSONWithYAMLForbiddenCharacters(t *testing.T) {
	r := mustLoad(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\x7f\u0080b ${task}\", \"stream\": \"low_level\"}]}")
	ep, _ := r.Episode(nil)
	task := "T"
	s, _, err := ep.Render(Frame{Task: &task})
	if err != nil || s.Messages[0].Text != "a\x7f\u0080b T" {
		t.Fatalf("%+v %v", s, err)
	}
}
