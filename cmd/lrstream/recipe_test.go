package main

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedRecipes returns ../shared/recipes next to the module root.
func sharedRecipes(t *testing.T) string { return testkit.Shared(t, "recipes") }

func TestRecipeCheckRealRecipes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sharedRecipes(t), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("no shared recipes (%v)", err)
	}
	for _, f := range files {
		e, out, errb := genEnv()
		if code := run(context.Background(), e, []string{"recipe", "check", f}); code != 0 {
			t.Errorf("%s: exit %d: %s", f, code, errb)
			continue
		}
		s := out.String()
		for _, want := range []string{"active_at", "subtask", "ok"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: output lacks %q:\n%s", f, want, s)
			}
		}
	}
	// The blend with routed VQA components shows probabilities and routes.
	e, out, _ := genEnv()
	run(context.Background(), e, []string{"recipe", "check", filepath.Join(sharedRecipes(t), "subtask_mem_vqa_speech.yaml")})
	for _, want := range []string{"blend of 6 components", "high_level_subtask", "25.00%", "7.50%", "vqa (wins", "nth_prev(style=memory, offset=1)", "reads language_events"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRecipeCheckRejectsBroken(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct{ body, want string }{
		"no_stream.yaml": {"messages:\n  - {role: user, content: hi}\n", "is missing a stream"},
		"weight.yaml": {"blend:\n  a: {weight: 0, messages: [{role: user, content: x, stream: low_level}]}\n",
			"Blend component 'a' must have a positive weight"},
		"unknown_binding.yaml": {"messages:\n  - {role: assistant, content: '${nope}', stream: high_level, target: true}\n",
			"references unknown binding(s): ['nope']"},
		"bad_resolver.yaml": {"bindings: {x: 'latest(style=plan)'}\nmessages:\n  - {role: assistant, content: '${x}', stream: high_level, target: true}\n",
			"Unknown language resolver: 'latest'"},
		"list.yaml":   {"- 1\n- 2\n", "mapping at the top level"},
		"syntax.yaml": {"messages: [\n", "parse"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		e, _, errb := genEnv()
		code := run(context.Background(), e, []string{"recipe", "check", p})
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", name, code)
		}
		if !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "invalid recipe") {
			t.Errorf("%s: stderr %q lacks %q", name, errb, c.want)
		}
	}
	// Missing file, usage errors.
	e, _, errb := genEnv()
	if code := run(context.Background(), e, []string{"recipe", "check", filepath.Join(dir, "absent.yaml")}); code != 1 || !strings.Contains(errb.String(), "absent.yaml") {
		t.Errorf("absent: exit %d %q", code, errb)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"recipe"}, "usage: lrstream recipe check"},
		{[]string{"recipe", "check"}, "no recipe FILE given"},
		{[]string{"recipe", "lint", "x"}, `unknown subcommand "lint"`},
	} {
		e, _, errb := genEnv()
		if code := run(context.Background(), e, tc.args); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, want 2; stderr %q lacks %q", tc.args, code, errb, tc.want)
		}
	}
}

// TestRecipeCheckWarnings checks what recipe check flags (issue 16 item
// 13): weights not summing to 1, numbers PyYAML reads as strings, cameras
// the dataset lacks, and errors with the component's YAML line.
func TestRecipeCheckWarnings(t *testing.T) {
	dir := t.TempDir()
	turns := `    messages:
      - {role: user, content: "${task}", stream: low_level}
      - {role: assistant, content: "x", stream: low_level, target: true}
`
	for _, tc := range []struct {
		name, yaml string
		code       int
		want, not  []string
	}{
		{"weights sum to 1", "blend:\n  a:\n    weight: 0.25\n" + turns + "  b:\n    weight: 0.75\n" + turns, 0,
			nil, []string{"warning"}},
		{"weights sum to 0.96", "blend:\n  a:\n    weight: 0.5\n" + turns + "  b:\n    weight: 0.46\n" + turns, 0,
			[]string{"warning: the weights of the weighted draw sum to 0.96, not 1"}, nil},
		{"PyYAML float", "blend:\n  a:\n    weight: 1e-3\n" + turns + "  b:\n    weight: 0.999\n" + turns, 0,
			[]string{"warning: line 3: weight: 1e-3 is a number in YAML 1.2 but a string to PyYAML", "(e.g. 0.001)"}, []string{"sum to"}},
		{"PyYAML-compatible exponent", "blend:\n  a:\n    weight: 1.0e-3\n" + turns + "  b:\n    weight: 0.999\n" + turns, 0,
			nil, []string{"warning"}},
		{"error with line", "blend:\n  a:\n    weight: 1.0\n" + turns + "  b:\n" + turns, 1,
			[]string{"line 7: ", "Blend component 'b' must define weight."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errb, code := runCmd(t, "recipe", "check", path)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, out, errb)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errb, w) {
					t.Errorf("output lacks %q:\n%s%s", w, out, errb)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out+errb, w) {
					t.Errorf("output has %q:\n%s%s", w, out, errb)
				}
			}
		})
	}

	// Cameras: a dataset with only a "top" camera lacks the front and
	// wrist cameras the shared VQA recipe selects.
	ds := filepath.Join(dir, "ds")
	if _, errb, code := runCmd(t, "gen", "-q", "--out", ds, "--cameras", "top", "--episodes", "2", "--min-frames", "10", "--max-frames", "20"); code != 0 {
		t.Fatal(errb)
	}
	out, errb, code := runCmd(t, "recipe", "check", "--dataset", ds, shared(t, "recipes", "subtask_mem_vqa_speech.yaml"))
	if code != 0 || !strings.Contains(out, "warning: camera observation.images.front, read by ask_vqa_top.vqa, ask_vqa_top.vqa_query, is not a feature of") ||
		!strings.Contains(out, "warning: camera observation.images.wrist") {
		t.Errorf("--dataset: exit %d:\n%s%s", code, out, errb)
	}
}

// TestRecipeCheckedAtStartup: stream, serve and prerender refuse at
// startup, before any header, the recipes `recipe check` refuses (a
// resolver or style typo used to fail at frame 0), with a "did you mean";
// a recipe on a dataset without language columns is warned about (issue
// 24 item 9).
func TestRecipeCheckedAtStartup(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	turn := `{role: user, content: "${task}", stream: high_level}`
	target := `{role: assistant, content: "${x}", stream: high_level, target: true, if_present: x}`
	recipes := []struct {
		path, want string
	}{
		{write("resolver.yaml", "messages:\n  - "+turn+"\n  - "+target+"\nbindings:\n  x: \"activ_at(t, style=subtask)\"\n"), "Unknown language resolver: 'activ_at' (did you mean 'active_at'?)"},
		{write("style.yaml", "messages:\n  - "+turn+"\n  - "+target+"\nbindings:\n  x: \"active_at(t, style=subtsk)\"\n"), "Unknown language style: 'subtsk' (did you mean 'subtask'?)"},
		{write("weight.yaml", "blend:\n  a:\n    weigth: 1.0\n    messages:\n      - "+turn+"\n"), "line 2: recipe weight.yaml: blend component 'a': TrainingRecipe.__init__() got an unexpected keyword argument 'weigth' (did you mean 'weight'?)"},
	}
	for _, r := range recipes {
		for _, cmd := range [][]string{
			{"stream", "--format", "jsonl"},
			{"serve", "--socket", filepath.Join(dir, "s.sock")},
			{"prerender", "--out", filepath.Join(dir, "pr")},
		} {
			out, errb, code := runCmd(t, append(cmd, "--recipe", r.path)...)
			if code != 1 || !strings.Contains(errb, r.want) || !strings.Contains(errb, "--recipe "+r.path) {
				t.Errorf("%s %s: exit %d, stderr %q lacks %q", cmd[0], filepath.Base(r.path), code, errb, r.want)
			}
			if strings.Contains(out, `"type":"header"`) {
				t.Errorf("%s %s: a header before the error", cmd[0], filepath.Base(r.path))
			}
		}
	}
	demoRecipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"no language columns", []string{"--dataset", shared(t, "datasets", "real", "SamueleSandrini__record-test"), "--recipe", demoRecipe}, true},
		{"no language columns, drop", []string{"--dataset", shared(t, "datasets", "real", "SamueleSandrini__record-test"), "--recipe", demoRecipe, "--mode", "drop"}, true},
		{"no language, no recipe", []string{"--dataset", shared(t, "datasets", "real", "SamueleSandrini__record-test")}, false},
		{"language", []string{"--recipe", demoRecipe}, false},
	} {
		_, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl", "-q"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errb)
		}
		if got := strings.Contains(errb, "has no language columns"); got != tc.warn {
			t.Errorf("%s: warning %t, want %t: %q", tc.name, got, tc.warn, errb)
		}
	}
}
