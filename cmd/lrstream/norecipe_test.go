package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/sink"
)

// renderedColumns are the batch columns only a recipe produces.
var renderedColumns = []string{"message_streams", "messages", "target_message_indices"}

// TestStreamWithoutRecipe streams datasets without a recipe (a --dataset
// without --recipe, or --recipe none) and with one in --mode fallback,
// with the same other flags: without a recipe the header has mode "none"
// and no recipe, every frame is kept (as many samples as with the recipe
// in fallback), no batch carries a rendered column, and every other
// column (index, episode, frame, timestamp, task, numeric features,
// delta-timestamp features, camera frames) is identical, batch for batch.
func TestStreamWithoutRecipe(t *testing.T) {
	demo := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	conf := shared(t, "conformance", "datasets", "pub_sorted_three_cams")
	anyRecipe := shared(t, "recipes", "subtask_mem_vqa_speech.yaml")
	for _, tc := range []struct {
		name    string
		without []string // the flags without a recipe
		recipe  string   // the recipe of the run to compare with
		flags   []string // flags of both runs
		cameras int      // camera columns expected
	}{
		{"demo --recipe none", []string{"--recipe", "none"}, demo, nil, 2}, // the demo's cameras
		{"demo shuffled", []string{"--recipe", "none"}, demo, []string{"--cameras", "none", "--shuffle", "--seed", "4", "--epochs", "1"}, 0},
		{"demo partitioned", []string{"--recipe", "none"}, demo, []string{"--cameras", "none", "--shuffle", "--order", "partitioned", "--partitions", "3", "--seed", "2", "--epochs", "2"}, 0},
		{"demo delta timestamps", []string{"--recipe", "none"}, demo, []string{"--cameras", "none", "--delta-timestamps", "action=0:4/10,observation.state=-1/10,0"}, 0},
		{"conformance dataset", []string{"--dataset", conf}, anyRecipe, []string{"--cameras", "none", "--keep-language"}, 0},
		{"conformance dataset shuffled", []string{"--dataset", conf}, anyRecipe, []string{"--cameras", "none", "--shuffle", "--seed", "1", "--epochs", "2"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWithoutRecipe(t, tc.without, tc.recipe, tc.flags, tc.cameras)
		})
	}
	t.Run("cameras", func(t *testing.T) {
		ds := cameraDataset(t)
		checkWithoutRecipe(t, []string{"--dataset", ds}, demo, []string{"--cameras", "all", "--resize", "8x12"}, 2)
	})
}

// checkWithoutRecipe runs stream with the flags without, and again with
// --recipe recipe (--dataset kept), both with flags, and compares them.
func checkWithoutRecipe(t *testing.T, without []string, recipe string, flags []string, cameras int) {
	t.Helper()
	base := append([]string{"stream", "--batch-size", "16", "-q"}, flags...)
	with := append([]string{"--recipe", recipe, "--mode", "fallback"}, without...)
	if i := slices.Index(with, "none"); i > 0 && with[i-1] == "--recipe" {
		with = slices.Delete(with, i-1, i+1)
	}
	run := func(args []string) *sink.Stream {
		t.Helper()
		out, errb, code := runCmd(t, append(slices.Clone(base), args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		st, err := sink.Decode(strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	got, want := run(without), run(with)
	h := got.Header
	if h.Mode != sink.ModeNoRecipe || h.Recipe != "" || h.RecipeSHA256 != "" || len(h.Components) != 0 {
		t.Errorf("header: recipe %q (sha256 %q), mode %q, components %v; want no recipe, mode %q", h.Recipe, h.RecipeSHA256, h.Mode, h.Components, sink.ModeNoRecipe)
	}
	var opts map[string]any
	if err := json.Unmarshal(h.Options, &opts); err != nil || opts["mode"] != sink.ModeNoRecipe {
		t.Errorf("header options %s: want mode %q", h.Options, sink.ModeNoRecipe)
	}
	if !reflect.DeepEqual(h.Features, want.Header.Features) || !reflect.DeepEqual(h.Cameras, want.Header.Cameras) {
		t.Errorf("features %v cameras %v, with the recipe %v %v", h.Features, h.Cameras, want.Header.Features, want.Header.Cameras)
	}
	if n := len(cameraColumns(h)); n != cameras {
		t.Errorf("%d camera columns, want %d", n, cameras)
	}
	e, we := got.End, want.End
	if e.Frames == 0 || e.Samples != we.Samples || e.Frames != we.Frames || e.Passthrough != e.Frames || e.Rendered != 0 || we.Rendered != we.Frames {
		t.Errorf("end %+v, with the recipe %+v: want every frame kept without messages", e, we)
	}
	if len(got.Batches) != len(want.Batches) {
		t.Fatalf("%d batches, with the recipe %d", len(got.Batches), len(want.Batches))
	}
	for i, b := range got.Batches {
		var keep []sink.Field
		for _, f := range want.Batches[i].Columns {
			if !slices.Contains(renderedColumns, f.Name) {
				keep = append(keep, f)
			}
		}
		if len(keep) != len(want.Batches[i].Columns)-len(renderedColumns) {
			t.Fatalf("batch %d with the recipe lacks rendered columns", i)
		}
		for _, f := range b.Columns {
			if slices.Contains(renderedColumns, f.Name) {
				t.Fatalf("batch %d carries %s without a recipe", i, f.Name)
			}
		}
		if !reflect.DeepEqual(b.Columns, keep) || b.Size != want.Batches[i].Size {
			t.Fatalf("batch %d differs from the with-recipe batch without its rendered columns", i)
		}
	}
}

// TestNoRecipeErrors: what needs a recipe says so; a --recipe that does
// not exist still fails; commands that do not need one run without.
func TestNoRecipeErrors(t *testing.T) {
	conf := shared(t, "conformance", "datasets", "pub_sorted_three_cams")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		args []string
		want string // "" for success
	}{
		{[]string{"stream", "--recipe", "none", "--mode", "drop"}, "--mode drop needs a --recipe"},
		{[]string{"stream", "--dataset", conf, "--mode", "drop"}, "--mode drop needs a --recipe"},
		{[]string{"inspect", "--dataset", conf, "--mode", "drop"}, "--mode drop needs a --recipe"},
		{[]string{"prerender", "--out", filepath.Join(t.TempDir(), "p"), "--dataset", conf, "--mode", "drop"}, "--mode drop needs a --recipe"},
		{[]string{"stream", "--dataset", conf, "--recipe", missing}, "missing.yaml: no such file"},
		{[]string{"stream", "--recipe", missing}, "missing.yaml: no such file"},
		{[]string{"stream", "--recipe", "none", "--mode", "weird"}, "unknown mode"},
		{[]string{"stream", "--dataset", conf, "--mode", "fallback", "--cameras", "none", "--episodes", "0"}, ""},
		{[]string{"stream", "--dataset", conf, "--no-task-aug", "--on-error", "skip", "--cameras", "none", "--episodes", "0", "--batch-size", "1"}, ""},
	} {
		args := tc.args
		if args[0] != "inspect" {
			args = append(args, "-q")
		}
		out, errb, code := runCmd(t, args...)
		if tc.want == "" {
			if code != 0 {
				t.Errorf("%v: exit %d: %s", tc.args, code, errb)
			}
			continue
		}
		if code == 0 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, errb, tc.want)
		}
		if tc.args[0] == "stream" {
			var se *sink.StreamError
			if _, err := sink.Decode(strings.NewReader(out)); !errors.As(err, &se) || !strings.Contains(se.Message, tc.want) {
				t.Errorf("%v: stdout is not the in-band error: %v", tc.args, err)
			}
		}
	}
}

// TestInspectWithoutRecipe: inspect shows frames and tasks and says that
// nothing is rendered; --jsonl gives every frame as passthrough.
func TestInspectWithoutRecipe(t *testing.T) {
	conf := shared(t, "conformance", "datasets", "pub_sorted_three_cams")
	out, errb, code := runCmd(t, "inspect", "--dataset", conf, "--cameras", "none", "--show", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"── index 0  episode 0  frame 0  t=0.000  passthrough\n   task \"", "  episode 1  frame 0 ",
		"no recipe (nothing rendered: every frame kept without messages)", ", dropped 0, passthrough "} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "recipe  ") || strings.Contains(out, "mode fallback") {
		t.Errorf("inspect names a recipe or mode:\n%s", out)
	}
	out, errb, code = runCmd(t, "inspect", "--recipe", "none", "--jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range lines {
		var f struct {
			Index    int64  `json:"index"`
			Outcome  string `json:"outcome"`
			Rendered any    `json:"rendered"`
		}
		if err := json.Unmarshal([]byte(l), &f); err != nil || f.Outcome != "passthrough" || f.Rendered != nil || f.Index != int64(i) {
			t.Fatalf("line %d %q: want passthrough of index %d without a render (%v)", i, l, i, err)
		}
	}
	if len(lines) != 1175 {
		t.Fatalf("%d lines, want the demo's 1175 frames", len(lines))
	}
}

// TestPrerenderWithoutRecipe: prerender without a recipe writes shards
// that replay as the live stream, and verify passes.
func TestPrerenderWithoutRecipe(t *testing.T) {
	conf := shared(t, "conformance", "datasets", "pub_sorted_three_cams")
	dir := filepath.Join(t.TempDir(), "pr")
	flags := []string{"--dataset", conf, "--cameras", "none", "--batch-size", "8"}
	if _, errb, code := runCmd(t, append([]string{"prerender", "--out", dir, "-q"}, flags...)...); code != 0 {
		t.Fatalf("prerender: %s", errb)
	}
	replay, errb, code := runCmd(t, "stream", "--from", dir)
	if code != 0 {
		t.Fatalf("stream --from: %s", errb)
	}
	live, errb, code := runCmd(t, append([]string{"stream", "-q"}, flags...)...)
	if code != 0 {
		t.Fatalf("stream: %s", errb)
	}
	if live != replay || headerOf(t, live).Mode != sink.ModeNoRecipe {
		t.Fatalf("replay (%d bytes) differs from the live stream (%d bytes), or its mode is not none", len(replay), len(live))
	}
	out, errb, code := runCmd(t, "verify", dir)
	if code != 0 || !strings.Contains(out, "no recipe (no messages)") {
		t.Fatalf("verify: exit %d, %s%s", code, out, errb)
	}
}
