package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
)

// TestFlagErrors checks that a bad command line prints the error, a
// suggestion when one is close, and one line pointing at --help, not the
// whole usage (issue 16 items 9 and 11).
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"stream", "--batch_size", "8"}, []string{"lrstream stream: unknown flag --batch_size; did you mean --batch-size?", "Run 'lrstream stream --help' for usage."}},
		{[]string{"stream", "--epoch", "2"}, []string{"did you mean --epochs?"}},
		{[]string{"stream", "--zzzzzz"}, []string{"unknown flag --zzzzzz\n"}},
		{[]string{"stream", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"prerender"}, []string{"lrstream prerender: --out is required"}},
		{[]string{"gen"}, []string{"lrstream gen: --out is required"}},
		{[]string{"serve"}, []string{"lrstream serve: --socket is required"}},
		{[]string{"inspect", "--Recipe", "x"}, []string{"did you mean --recipe?"}},
		{[]string{"recipe", "check", "--bogus", "x"}, []string{"lrstream recipe check: unknown flag --bogus"}},
	} {
		_, errb, code := runCmd(t, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errb, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errb, w)
			}
		}
		if n := strings.Count(errb, "\n"); n > 2 || strings.Contains(errb, "flags:") {
			t.Errorf("%v: %d lines of stderr (the usage?): %q", tc.args, n, errb)
		}
	}
}

// TestRecipeOptional: a dataset without --recipe streams without
// rendering (header mode "none", no messages) and the stream's summary
// says nothing of a missing recipe; the demo dataset keeps its demo recipe
// by default.
func TestRecipeOptional(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		mode       string
		recipe     string
		messageKey bool
	}{
		{[]string{"--dataset", shared(t, "datasets", "real", "SamueleSandrini__record-test")}, "none", "", false},
		{[]string{"--recipe", "none"}, "none", "", false},
		{nil, "fallback", "demo-recipe.yaml", true},
	} {
		out, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl", "--batch-size", "4"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, errb)
		}
		if strings.Contains(errb, "--recipe") {
			t.Errorf("%v: stderr mentions --recipe: %q", tc.args, errb)
		}
		lines := strings.SplitN(out, "\n", 3)
		var h struct{ Mode, Recipe string }
		if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.Mode != tc.mode || h.Recipe != tc.recipe {
			t.Errorf("%v: header mode %q recipe %q (%v), want %q %q", tc.args, h.Mode, h.Recipe, err, tc.mode, tc.recipe)
		}
		if has := strings.Contains(lines[1], `"messages":`); has != tc.messageKey {
			t.Errorf("%v: first batch has messages: %t, want %t", tc.args, has, tc.messageKey)
		}
	}
}

// TestHelpDefaults checks that no help line shows two defaults or a
// sentinel default (issue 16 item 11).
func TestHelpDefaults(t *testing.T) {
	for _, cmd := range []string{"stream", "serve", "prerender", "inspect", "gen", "bench"} {
		_, errb, code := runCmd(t, cmd, "-h")
		if code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
		for _, line := range strings.Split(errb, "\n") {
			if strings.Count(line, "default") > 1 && strings.Contains(line, "(default ") {
				t.Errorf("%s -h: two defaults: %q", cmd, line)
			}
			if strings.Contains(line, "(default -1)") {
				t.Errorf("%s -h: sentinel default: %q", cmd, line)
			}
		}
	}
}

func TestTidyError(t *testing.T) {
	for _, tc := range []struct{ cmd, in, want string }{
		{"prerender", "prerender: mkdir /x: denied", "mkdir /x: denied"},
		{"verify", "verify: verify: read index: gone", "read index: gone"},
		{"stream", `dataset "/tmp/x": no such local directory, and not a Hub dataset id: dataset "/tmp/x": want ORG/NAME`, `dataset "/tmp/x": no such local directory, and not a Hub dataset id: want ORG/NAME`},
		{"stream", "episode 3: frame 2: boom", "episode 3: frame 2: boom"},
		{"stream", "plain", "plain"},
		// A repetition inside a segment is not stutter: the directory stays.
		{"stream", "../d: f.parquet row group 0: materialize v.mp4 in ../d: stat /w/d/v.mp4: no such file", "../d: f.parquet row group 0: materialize v.mp4 in ../d: stat /w/d/v.mp4: no such file"},
		{"stream", "../d: x in ../d: y: ../d: z", "../d: x in ../d: y: z"},
	} {
		if got := tidyError(tc.cmd, errors.New(tc.in)); got != tc.want {
			t.Errorf("tidyError(%q, %q) = %q, want %q", tc.cmd, tc.in, got, tc.want)
		}
	}
	// Wrapped errors tidy the same way.
	if got := tidyError("x", fmt.Errorf("x: %w", errors.New("y"))); got != "y" {
		t.Errorf("wrapped: %q", got)
	}
}

// TestTorchrunNotice checks that RANK/WORLD_SIZE sharding a stream is said
// on stderr (issue 16 item 3), and that flags win over the environment.
func TestTorchrunNotice(t *testing.T) {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "4"}
	e, _, errb := genEnv()
	e.getenv = func(k string) string { return env[k] }
	if code := run(t.Context(), e, []string{"stream", "--format", "jsonl"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "stream: rank 1 of 4 (from RANK=1 WORLD_SIZE=4)") {
		t.Errorf("stderr %q lacks the rank notice", errb)
	}
	e, _, errb = genEnv()
	e.getenv = func(k string) string { return env[k] }
	if code := run(t.Context(), e, []string{"stream", "--format", "jsonl", "--world-size", "1", "--rank", "0"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if strings.Contains(errb.String(), "rank") {
		t.Errorf("flags given, yet stderr %q", errb)
	}
}

// TestInterrupted checks that a cancelled run (Ctrl-C) says "interrupted"
// and exits 130, not "context canceled" with status 1 (issue 16 item 12).
func TestInterrupted(t *testing.T) {
	for _, args := range [][]string{
		{"stream", "--format", "jsonl"},
		{"prerender", "--out", t.TempDir()},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e, _, errb := genEnv()
		code := run(ctx, e, args)
		if code != 130 || !strings.Contains(errb.String(), "interrupted") || strings.Contains(errb.String(), "context canceled") {
			t.Errorf("%v: exit %d, stderr %q; want 130 and \"interrupted\"", args, code, errb)
		}
	}
}

// TestSummaryLine checks the one-line summary written when stderr is not
// a terminal (Slurm logs), and that -q silences it (issue 16 item 12).
func TestSummaryLine(t *testing.T) {
	// --cameras none: no note about the demo's absent video files.
	_, errb, code := runCmd(t, "stream", "--format", "jsonl", "--cameras", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.HasPrefix(errb, "stream: 1175/1175 frames (100.0%)") || strings.Count(errb, "\n") != 1 || strings.Contains(errb, "\r") {
		t.Errorf("summary %q", errb)
	}
	// (-q does not hide the demo's camera warning: --cameras none.)
	if _, errb, _ := runCmd(t, "stream", "--format", "jsonl", "--cameras", "none", "-q"); errb != "" {
		t.Errorf("-q: stderr %q", errb)
	}
}

// TestModeDefaultAndDropRefusal checks that the default mode is the task
// fallback (LeRobot main's RenderMessagesStep), that --mode drop is
// refused before the first batch on a selection it cannot batch (frames
// without language), and that inspect warns instead (issue 16 item 1).
func TestModeDefaultAndDropRefusal(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_documented_top_wrist")
	rec := shared(t, "recipes", "subtask.yaml")
	base := []string{"--dataset", ds, "--recipe", rec, "--on-error", "skip", "-q"}
	out, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl"}, base...)...)
	if code != 0 || out == "" {
		t.Fatalf("default mode: exit %d: %s", code, errb)
	}
	if !strings.Contains(out, `"mode":"fallback"`) {
		t.Errorf("default mode is not fallback: header %.300s", out)
	}
	for _, cmd := range [][]string{{"stream"}, {"prerender", "--out", t.TempDir()}} {
		out, errb, code = runCmd(t, append(append(cmd, "--mode", "drop"), base...)...)
		// Nothing streamed: at most a lone in-band error (no header).
		if code != 1 || strings.Contains(out, "header") || !strings.Contains(errb, "--mode drop cannot batch") ||
			!strings.Contains(errb, "182 of 1105 selected frames have no language (the first: index 57, episode 1)") {
			t.Errorf("%v --mode drop: exit %d, %d bytes out, stderr %q", cmd, code, len(out), errb)
		}
	}
	// Batches of one never mix rendered and passthrough frames: allowed.
	if out, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl", "--mode", "drop", "--batch-size", "1"}, base...)...); code != 0 || !strings.Contains(out, `"type":"end"`) {
		t.Errorf("--mode drop --batch-size 1: exit %d: %s", code, errb)
	}
	// The demo dataset has language on every frame: drop batches.
	if _, errb, code := runCmd(t, "stream", "--mode", "drop", "--format", "jsonl", "-q"); code != 0 {
		t.Errorf("demo --mode drop: exit %d: %s", code, errb)
	}
	_, errb, code = runCmd(t, "inspect", "--jsonl", "--mode", "drop", "--dataset", ds, "--recipe", rec)
	if code != 0 || !strings.Contains(errb, "warning: --mode drop cannot be batched on this selection: 182 frame(s) without language") {
		t.Errorf("inspect --mode drop: exit %d, stderr %q", code, errb)
	}
}

// TestInspectOnErrorFail checks that inspect reports render errors and,
// with an explicit --on-error fail, exits 1 (issue 16 item 5).
func TestInspectOnErrorFail(t *testing.T) {
	args := []string{"inspect", "--dataset", shared(t, "conformance", "datasets", "pub_documented_top_wrist"),
		"--recipe", shared(t, "recipes", "subtask_mem.yaml")}
	out, errb, code := runCmd(t, args...)
	if code != 0 || !strings.Contains(out, "Ambiguous resolver") {
		t.Fatalf("inspect: exit %d, stderr %q", code, errb)
	}
	out, errb, code = runCmd(t, append(args, "--on-error", "fail")...)
	if code != 1 || !strings.Contains(out, "Ambiguous resolver") || !strings.Contains(errb, "failed to render (--on-error fail)") {
		t.Errorf("inspect --on-error fail: exit %d, stderr %q", code, errb)
	}
}

// TestOnErrorSkipReport checks the grouped, bounded report of skipped
// frames and --max-errors (issue 16 item 5).
func TestOnErrorSkipReport(t *testing.T) {
	args := []string{"stream", "--format", "jsonl", "--on-error", "skip",
		"--dataset", shared(t, "conformance", "datasets", "pub_documented_top_wrist"),
		"--recipe", shared(t, "recipes", "subtask_mem.yaml")}
	_, errb, code := runCmd(t, args...)
	if code != 0 || !strings.Contains(errb, "skipped 2 frame(s) whose rendering failed, 1 distinct error(s):\n  2 × Ambiguous resolver") ||
		!strings.Contains(errb, "episode 8, index 398") {
		t.Errorf("skip: exit %d, stderr %q", code, errb)
	}
	if _, errb, code := runCmd(t, append(args, "--max-errors", "2")...); code != 0 {
		t.Errorf("--max-errors 2: exit %d: %s", code, errb)
	}
	_, errb, code = runCmd(t, append(args, "--max-errors", "1")...)
	if code != 1 || !strings.Contains(errb, "more than 1 frames failed to render (--max-errors 1)") {
		t.Errorf("--max-errors 1: exit %d, stderr %q", code, errb)
	}
	if _, _, code := runCmd(t, append(args, "--max-errors", "-1")...); code == 0 {
		t.Error("--max-errors -1 accepted")
	}
}

func TestNothingKept(t *testing.T) {
	for _, tc := range []struct {
		st   *pipeline.Stats
		fail bool
	}{
		{nil, false},
		{&pipeline.Stats{}, false},
		{&pipeline.Stats{Errors: 3, Dropped: 5}, true},
		{&pipeline.Stats{Errors: 3, Rendered: 1}, false},
		{&pipeline.Stats{Errors: 3, Passthrough: 1}, false},
	} {
		if err := nothingKept(tc.st); (err != nil) != tc.fail {
			t.Errorf("%+v: %v", tc.st, err)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCmd(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "lrstream ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	// The second line names the FFmpeg camera frames are decoded with.
	if ff, err := exec.LookPath("ffmpeg"); err == nil {
		if !strings.Contains(out, "\nffmpeg: "+ff+" (ffmpeg version ") {
			t.Errorf("--version does not name %s and its version: %q", ff, out)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-ffmpeg")
	t.Setenv("LRSTREAM_FFMPEG", missing)
	out, _, code = runCmd(t, "version")
	if code != 0 || !strings.Contains(out, "\nffmpeg: none: ") || !strings.Contains(out, "LRSTREAM_FFMPEG="+missing) {
		t.Errorf("version with LRSTREAM_FFMPEG=%s: exit %d, %q", missing, code, out)
	}
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		stamp string
		bi    *debug.BuildInfo
		want  string
	}{
		{"v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v9.9.9"},
		{"", nil, "devel"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, "devel-0123456789ab"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "devel-0123456789ab-dirty"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	} {
		if got := versionFrom(tc.stamp, tc.bi); got != tc.want {
			t.Errorf("versionFrom(%q, %+v) = %q, want %q", tc.stamp, tc.bi, got, tc.want)
		}
	}
}

// TestRevisionAndCacheFlags checks --revision and the --cache spelling
// (issue 16 item 10); none of these cases reaches the network.
func TestRevisionAndCacheFlags(t *testing.T) {
	local := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", "org/name@v1", "--revision", "v2", "--recipe", "r.yaml"}, "--revision v2 conflicts with --dataset org/name@v1"},
		{[]string{"--dataset", local, "--revision", "v2", "--recipe", "r.yaml"}, "is a local directory; revisions apply to Hub datasets"},
		{[]string{"--revision", "v2"}, "--revision v2 needs a Hub --dataset"},
		{[]string{"--dataset", "org/name", "--cache", "/tmp/hf", "--recipe", "r.yaml"}, "not a directory: pass the cache directory with --cache-dir"},
		{[]string{"--dataset", "org/name", "--download", "weird", "--recipe", "r.yaml"}, "--download"},
	} {
		_, errb, code := runCmd(t, append([]string{"stream", "-q"}, tc.args...)...)
		if code != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q lacks %q", tc.args, code, errb, tc.want)
		}
	}
}

// TestTrainEndCounts checks the end counts and the progress totals of the
// training iteration (issue 16 item 2; docs/wire-format.md, "end"): the
// issue's figures on the demo dataset under --mode drop (1175 frames, 840
// kept, 335 dropped per epoch).
func TestTrainEndCounts(t *testing.T) {
	type end struct {
		Frames, Rendered, Dropped, Samples, Batches int64
	}
	for _, tc := range []struct {
		args    []string
		want    end
		summary string
	}{
		{[]string{"--epochs", "2"}, end{2350, 1680, 670, 1680, 54}, "stream: 2350/2350 frames (100.0%)"},
		{[]string{"--epochs", "3"}, end{3525, 2520, 1005, 2520, 81}, "stream: 3525/3525 frames (100.0%)"},
		{[]string{"--shuffle"}, end{1175, 840, 335, 840, 27}, "stream: 1175/1175 frames (100.0%)"},
		{[]string{"--shuffle", "--epochs", "2", "--batch-size", "8"}, end{2350, 1680, 670, 1680, 210}, "stream: 2350/2350 frames (100.0%)"},
		// Two ranks: each its own share of the drops (positions mod 2);
		// 840 kept frames make 27 batches, 26 served evenly.
		{[]string{"--world-size", "2", "--rank", "0"}, end{566, 416, 150, 416, 13}, "stream: 566/566 frames (100.0%)"},
		{[]string{"--world-size", "2", "--rank", "1"}, end{601, 416, 185, 416, 13}, "stream: 601/601 frames (100.0%)"},
	} {
		out, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl", "--mode", "drop", "--cameras", "none"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errb)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var got end
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%v: end %+v, want %+v", tc.args, got, tc.want)
		}
		if !strings.HasPrefix(errb, tc.summary) {
			t.Errorf("%v: summary %q, want %q", tc.args, errb, tc.summary)
		}
	}
	// What the epochs leave out is stated: 840 kept frames make 27
	// batches of 32, of which 2 ranks serve 26: 8 frames.
	if _, errb, code := runCmd(t, "stream", "--format", "jsonl", "--mode", "drop", "--cameras", "none", "--world-size", "2", "--rank", "1"); code != 0 || !strings.Contains(errb, "stream: 8 frames not served by any consumer") {
		t.Errorf("2 ranks: exit %d, stderr %q: want the 8 unserved frames stated", code, errb)
	}
	// prerender records the same totals in index.json.
	dir := t.TempDir()
	if _, errb, code := runCmd(t, "prerender", "-q", "--out", dir, "--epochs", "2", "--mode", "drop"); code != 0 {
		t.Fatalf("prerender: exit %d: %s", code, errb)
	}
	x, err := prerender.ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if x.Totals.Frames != 2350 || x.Totals.Rendered != 1680 || x.Totals.Dropped != 670 || x.Totals.Samples != 1680 {
		t.Errorf("index totals %+v", x.Totals)
	}
}

// TestPrerenderHelpCameras checks that prerender's help, which promises
// stream's bytes, says that its --cameras default differs from stream's.
func TestPrerenderHelpCameras(t *testing.T) {
	_, errb, code := runCmd(t, "prerender", "-h")
	if code != 0 || !strings.Contains(errb, "--cameras defaults to none here (stream's\ndefault is auto)") {
		t.Errorf("prerender -h: exit %d, usage lacks the --cameras default: %q", code, errb)
	}
}

// TestPreviewForeverNote checks that an endless stream to a terminal says
// so (the preview is silent after its first batches: it looked hung).
func TestPreviewForeverNote(t *testing.T) {
	for _, c := range []struct {
		epochs int64
		note   bool
	}{{0, true}, {1, false}, {2, false}} {
		n := previewForeverNote(c.epochs)
		if (n != "") != c.note || (c.note && !strings.Contains(n, "--epochs 0 streams forever")) {
			t.Errorf("--epochs %d: note %q", c.epochs, n)
		}
	}
}

// TestLocalPathShapedLikeHubID: a --dataset that is not a local directory
// but shaped like ORG/NAME is looked up on the Hub; offline that fails at
// once, and the error says the local path does not exist (issue 24 item
// 10). A file is refused as not a directory.
func TestLocalPathShapedLikeHubID(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "http://" + l.Addr().String()
	}()
	for _, tc := range []struct {
		name string
		cmd  []string
		env  map[string]string
		want []string
	}{
		{"stream, Hub refused", []string{"stream", "--dataset", "mydata/robot1"}, map[string]string{"HF_ENDPOINT": refused},
			[]string{"dataset mydata/robot1 is not a local directory (no such file or directory), so it was looked up as a Hub dataset id", "connection refused"}},
		{"validate, offline", []string{"validate", "mydata/robot1"}, map[string]string{"HF_HUB_OFFLINE": "1"},
			[]string{"dataset mydata/robot1 is not a local directory (no such file or directory)", "HF_HUB_OFFLINE=1"}},
		{"a file", []string{"stream", "--dataset", file}, nil, []string{file + ": not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string {
				if k == "HF_HUB_CACHE" {
					return filepath.Join(dir, "cache")
				}
				return tc.env[k]
			}}
			start := time.Now()
			code := run(context.Background(), e, tc.cmd)
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v: the Hub lookup was retried", el)
			}
			if code != 1 {
				t.Errorf("exit %d", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
			}
		})
	}
}
