package render

import (
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

func TestDigestMatchesPython(t *testing.T) {
	ep, err := mustLoad(t, `{"messages": [{"role": "user", "content": "x", "stream": "low_level"}]}`).Episode(nil)
	if err != nil {
		t.Fatal(err)
	}
	// hashlib.blake2b(s.encode(), digest_size=8), big-endian.
	for _, c := range []struct {
		prefix string
		idx    int64
		want   uint64
	}{
		{"", 0, 9523843951405948789},
		{"", 1, 17797172410793473910},
		{"", -5, 9586478171092243270},
		{"", math.MaxInt64, 14040218526631633209},
		{"task_aug:", 7, 11294492758288425347},
		{"vqa:", 42, 2132585856575303452},
	} {
		if got := ep.digest(c.prefix, c.idx); got != c.want {
			t.Errorf("digest(%q, %d) = %d, want %d", c.prefix, c.idx, got, c.want)
		}
	}
}

func TestPythonFormatting(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e-5: "1e-05", 123456789012345678: "1.2345678901234568e+17",
		0.0001: "0.0001", math.Copysign(0, -1): "-0.0", 1.5e300: "1.5e+300", 100: "100.0", 1e15: "1000000000000000.0",
		12345.678: "12345.678", math.Inf(-1): "-inf",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
	for s, want := range map[string]string{
		`a'b`: `"a'b"`, `a"b'c`: `'a"b\'c'`, "\x00\t\u00a0é\u200b😀": `'\x00\t\xa0é\u200b😀'`,
	} {
		if got := schema.PyQuote(s); got != want {
			t.Errorf("PyQuote(%q) = %s, want %s", s, got, want)
		}
	}
	if got := pyRepr([]any{"a", int64(1), nil, true, 2.5, &dict{keys: []any{"k"}, vals: []any{"v"}}}); got != `['a', 1, None, True, 2.5, {'k': 'v'}]` {
		t.Errorf("pyRepr list = %s", got)
	}
}

func TestPyInt(t *testing.T) {
	for s, want := range map[string]int{"1": 1, "+2": 2, "-3": -3, " 4 ": 4, "1_0": 10, "٣": 3, "007": 7, "99999999999999999999": maxOffset} {
		if got, err := pyInt(s); err != nil || got != want {
			t.Errorf("pyInt(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "abc", "1.5", "_1", "1_", "1__0", "+", "0x10"} {
		if _, err := pyInt(s); err == nil || !strings.Contains(err.Error(), "invalid literal for int() with base 10") {
			t.Errorf("pyInt(%q): err %v", s, err)
		}
	}
}

func TestResolverErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"active_at (t, style=plan)":               "Invalid resolver expression: 'active_at (t, style=plan)'",
		"active_at(t, plan)":                      "Invalid resolver argument: 'plan'",
		"latest(t)":                               "Unknown language resolver: 'latest'",
		"active_at(t, style=vqa)":                 "active_at cannot be used with event-only style 'vqa'.",
		"nth_next(t)":                             "nth_next requires a persistent style.",
		"nth_prev(style=plan, offset=0)":          "nth_prev offset must be non-zero.",
		"emitted_at(t, style=foo)":                "Unknown language style: 'foo'",
		"active_at(t, style=plan, offset=1)":      "unexpected keyword argument 'offset'",
		"nth_prev(style=plan, offset=x)":          "invalid literal for int() with base 10: 'x'",
		"emitted_at(t, style=plan, events=1)":     "multiple values for keyword argument 'events'",
		"active_at(t,\n style=plan)":              "Invalid resolver expression",
		"emitted_at(t, style='plan', t_arg=1)":    "",
		" nth_next( style = \"subtask\" , t ) \n": "",
	} {
		r := parseResolver(spec)
		switch {
		case want == "" && r.err != nil:
			t.Errorf("%q: unexpected error %v", spec, r.err)
		case want != "" && (r.err == nil || !strings.Contains(r.err.Error(), want)):
			t.Errorf("%q: error %v, want %q", spec, r.err, want)
		}
	}
}

// TestTimelineMatchesLiteral cross-checks the binary-search resolvers
// against upstream's literal scans on random timelines.
func TestTimelineMatchesLiteral(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	grid := []float64{0, 0.1, 0.2, 0.30000001192092896, 1, 1.1, 1.2000000476837158, math.Copysign(0, -1), 2, 2.05}
	for iter := 0; iter < 3000; iter++ {
		var rows []schema.Row
		for i := rng.Intn(8); i > 0; i-- {
			rows = append(rows, schema.Row{Role: []string{"user", "assistant"}[rng.Intn(2)], Content: schema.Str("c"),
				Style: schema.Str([]string{"plan", "subtask"}[rng.Intn(2)]), Timestamp: grid[rng.Intn(len(grid))], HasTimestamp: true})
		}
		sel := selector{style: schema.Str("plan")}
		if rng.Intn(2) == 0 {
			sel.role = schema.Str("assistant")
		}
		tl := buildTimeline(rows, sel)
		ep := &Episode{rows: rows, tls: []timeline{tl}}
		tt := grid[rng.Intn(len(grid))] + []float64{0, 1e-9, -1e-9, 0.1, -0.1}[rng.Intn(5)]
		for _, kind := range []resolverKind{kindActiveAt, kindEmittedAt, kindNthPrev, kindNthNext} {
			res := &resolver{kind: kind, sel: sel, offset: []int{1, 2, -1, -2, 3}[rng.Intn(5)]}
			fast, ferr := ep.resolve(res, &Frame{T: tt})
			slow, serr := ep.resolveSlow(res, &ep.tls[0], tt)
			if fast != slow || (ferr == nil) != (serr == nil) {
				t.Fatalf("%v offset %d t=%v rows=%+v: fast %v/%v slow %v/%v", kind, res.offset, tt, rows, fast, ferr, slow, serr)
			}
		}
	}
}

func mustLoad(t *testing.T, src string) *Recipe {
	t.Helper()
	r, err := Load([]byte(src), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadErrorsNameComponentAndTurn(t *testing.T) {
	_, err := Load([]byte("blend:\n  ok: {weight: 1, messages: [{role: user, content: x, stream: low_level}]}\n  bad:\n    weight: 1\n    messages:\n      - {role: user, content: x, stream: low_level}\n      - {role: robot, content: y, stream: low_level}\n"), "r.yaml")
	if err == nil || !strings.Contains(err.Error(), "recipe r.yaml: blend component 'bad': turn 2: Unsupported message role: 'robot'") {
		t.Fatalf("err = %v", err)
	}
}

func TestYAMLQuirks(t *testing.T) {
	// YAML 1.1 booleans: `target: no` is false, as in PyYAML.
	_, err := Load([]byte("messages:\n  - {role: assistant, content: x, stream: high_level, target: no}\n"), "q")
	if err == nil || !strings.Contains(err.Error(), "at least one supervised turn") {
		t.Errorf("target: no: %v", err)
	}
	// 1e-3 is a number here (PyYAML would load the string "1e-3").
	r := mustLoad(t, "blend:\n  a: {weight: 1e-3, messages: [{role: user, content: a, stream: low_level}]}\n  b: {weight: 1, messages: [{role: user, content: b, stream: low_level}]}\n")
	if d := r.Describe(); d[0].Weight != 0.001 {
		t.Errorf("weight = %v", d[0].Weight)
	}
	// A quoted "1e-3" is a string and fails like upstream.
	if _, err := Load([]byte(`{"blend": {"a": {"weight": "1e-3", "messages": [{"role": "user", "content": "a", "stream": "low_level"}]}}}`), "q"); err == nil {
		t.Error("string weight accepted")
	}
}

func TestRenderCacheIsExact(t *testing.T) {
	r := mustLoad(t, `{"messages": [{"role": "user", "content": "${task}: ${subtask}", "stream": "low_level"}]}`)
	rows := []schema.Row{
		{Role: "assistant", Content: schema.Str("a"), Style: schema.Str("subtask"), Timestamp: 0, HasTimestamp: true},
		{Role: "assistant", Content: schema.Str("b"), Style: schema.Str("subtask"), Timestamp: 1, HasTimestamp: true},
		{Role: "user", Content: schema.Str("aug1"), Style: schema.Str("task_aug"), HasTimestamp: true},
		{Role: "user", Content: schema.Str("aug2"), Style: schema.Str("task_aug"), HasTimestamp: true},
	}
	ep, err := r.Episode(rows)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := r.Episode(rows)
	for i := 0; i < 40; i++ {
		f := Frame{T: float64(i) / 20, SampleIdx: int64(i)}
		s1, _, err1 := ep.Render(f)
		fresh.cache = make([]cacheEntry, len(fresh.cache))
		for j := range fresh.cache {
			fresh.cache[j].vals = make([]value, len(r.comps[j].slots))
		}
		s2, _, err2 := fresh.Render(f)
		b1, _ := json.Marshal(s1)
		b2, _ := json.Marshal(s2)
		if err1 != nil || err2 != nil || string(b1) != string(b2) {
			t.Fatalf("frame %d: cached %s (%v) vs fresh %s (%v)", i, b1, err1, b2, err2)
		}
	}
}

func TestApplyModes(t *testing.T) {
	r := mustLoad(t, `{"messages": [{"role": "assistant", "content": "${subtask}", "stream": "high_level", "target": true, "if_present": "subtask"}]}`)
	ep, _ := r.Episode(nil)
	task := "do it"
	empty := ""
	cases := []struct {
		mode    Mode
		f       Frame
		lang    bool
		outcome Outcome
		fb      bool
	}{
		{ModeDrop, Frame{DatasetTask: &task}, false, Passthrough, false},
		{ModeFallback, Frame{DatasetTask: &task}, false, Rendered, true},
		{ModeFallback, Frame{Task: &empty}, false, Passthrough, false},
		{ModeDrop, Frame{DatasetTask: &task}, true, Dropped, false},
		{ModeFallback, Frame{Task: &task}, true, Rendered, true},
		{ModeFallback, Frame{}, true, Dropped, false},
	}
	for i, c := range cases {
		res := ep.Apply(c.mode, c.f, c.lang)
		if res.Outcome != c.outcome || res.Fallback != c.fb {
			t.Errorf("case %d: %v fallback=%v, want %v fallback=%v", i, res.Outcome, res.Fallback, c.outcome, c.fb)
		}
	}
	if m, err := ParseMode("fallback"); err != nil || m != ModeFallback {
		t.Error("ParseMode")
	}
	if _, err := ParseMode("step"); err == nil {
		t.Error("ParseMode(step) accepted")
	}
}

// TestRecipeConcurrentEpisodes: one Recipe serves many goroutines.
func TestRecipeConcurrentEpisodes(t *testing.T) {
	r := mustLoad(t, `{"blend": {"a": {"weight": 1, "messages": [{"role": "user", "content": "${task} ${subtask}", "stream": "low_level"}]}, "b": {"weight": 2, "route": "vqa", "messages": [{"role": "assistant", "content": "${vqa}", "stream": "high_level", "target": true, "if_present": "vqa"}]}}}`)
	rows := []schema.Row{{Role: "assistant", Content: schema.Str("s"), Style: schema.Str("subtask"), HasTimestamp: true}}
	done := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			ep, _ := r.Episode(rows)
			var last string
			for i := 0; i < 200; i++ {
				s, _, err := ep.Render(Frame{T: 1, SampleIdx: int64(i)})
				if err != nil {
					done <- err.Error()
					return
				}
				b, _ := json.Marshal(s)
				last = string(b)
			}
			done <- last
		}()
	}
	first := <-done
	for g := 1; g < 8; g++ {
		if got := <-done; got != first {
			t.Fatalf("goroutines disagree: %s vs %s", got, first)
		}
	}
}
