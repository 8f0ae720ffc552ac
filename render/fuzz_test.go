package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

var fuzzRows = []schema.Row{
	{Role: "assistant", Content: schema.Str("plan a"), Style: schema.Str("plan"), HasTimestamp: true},
	{Role: "assistant", Content: schema.Str("sub a"), Style: schema.Str("subtask"), HasTimestamp: true},
	{Role: "assistant", Content: schema.Str("sub b"), Style: schema.Str("subtask"), Timestamp: 1, HasTimestamp: true},
	{Role: "assistant", Content: schema.Str("mem"), Style: schema.Str("memory"), Timestamp: 1.05, HasTimestamp: true},
	{Role: "user", Content: schema.Str("aug"), Style: schema.Str("task_aug"), HasTimestamp: true},
}

var fuzzEvents = []schema.Row{
	{Role: "user", Content: schema.Str("q"), Style: schema.Str("vqa"), Camera: schema.Str("observation.images.top")},
	{Role: "assistant", Content: schema.Str("a"), Style: schema.Str("vqa"), Camera: schema.Str("observation.images.top")},
	{Role: "assistant", ToolCalls: []byte(`[{"type":"function","function":{"name":"say","arguments":{"text":"hi"}}}]`)},
	{Role: "user", Content: schema.Str("stop"), Style: schema.Str("interjection")},
}

// FuzzLoad: the recipe loader never panics; a loaded recipe describes and
// renders without panicking.
func FuzzLoad(f *testing.F) {
	if files, err := filepath.Glob(filepath.Join(sharedDir(f), "recipes", "*.yaml")); err == nil {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	for _, s := range []string{
		`{"messages": [{"role": "user", "content": "${task}", "stream": "low_level"}]}`,
		`{"blend": {"a": {"weight": 1, "route": "vqa", "messages": [{"role": "assistant", "content": [{"type": "text", "text": "${vqa}"}], "stream": "high_level", "target": true, "if_present": "vqa"}]}}}`,
		"messages:\n  - {role: user, content: '${x}', stream: low_level}\nbindings: {x: 'nth_next(style=subtask, offset=2)'}\n",
		"a: &a [*a]", "[1, 2]", "", "blend: {}",
	} {
		f.Add([]byte(s))
	}
	task := "task"
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Load(data, "fuzz")
		if err != nil {
			if r != nil {
				t.Fatal("recipe and error")
			}
			return
		}
		_ = r.Components()
		_ = r.Describe()
		_ = r.Check()
		ep, err := r.Episode(fuzzRows)
		if err != nil {
			t.Fatal(err)
		}
		for i, tt := range []float64{0, 0.5, 1, 1.1} {
			s, _, err := ep.Render(Frame{Events: fuzzEvents, T: tt, SampleIdx: int64(i), DatasetTask: &task})
			if err == nil && s != nil {
				if _, err := s.MarshalJSON(); err != nil && !nonFiniteOK(data) {
					t.Fatalf("marshal: %v", err)
				}
			}
			_ = ep.Apply(ModeFallback, Frame{T: tt, SampleIdx: int64(i)}, i%2 == 0)
		}
	})
}

// nonFiniteOK: YAML may spell .inf / .nan inside a content block, which
// has no JSON form; marshalling then fails cleanly.
func nonFiniteOK(data []byte) bool { return true }

// FuzzResolverExpr: the resolver-expression parser never panics, and a
// valid expression resolves without panicking.
func FuzzResolverExpr(f *testing.F) {
	for _, s := range []string{
		"active_at(t, style=subtask)", "emitted_at(t, style=vqa, role=user, camera=observation.images.top)",
		"nth_prev(style=memory, offset=1)", "nth_next(style=subtask, offset=-3)", "emitted_at(t, role=assistant, tool_name=say)",
		"active_at (t, style=plan)", "nth_prev(style=plan, offset=abc)", "x(t", "nth_next(style='plan', offset=٣)",
		"emitted_at(t, style=plan, persistent=1)", "active_at(\n)", "nth_prev(style=plan, offset=99999999999999999999999)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		res := parseResolver(spec)
		if res.err != nil {
			if res.err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		ep := &Episode{rows: fuzzRows}
		if !res.events {
			ep.tls = []timeline{buildTimeline(fuzzRows, res.sel)}
			res.tl = 0
		}
		for _, tt := range []float64{-1, 0, 0.95, 1, 1.05, 2} {
			v, err := ep.resolve(res, &Frame{Events: fuzzEvents, T: tt})
			if err == nil && v.kind == vPRow && (v.idx < 0 || int(v.idx) >= len(fuzzRows)) {
				t.Fatalf("row index %d out of range", v.idx)
			}
		}
	})
}
