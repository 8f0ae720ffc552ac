package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/testkit"
	"github.com/lrstream/lrstream/sink"
)

// onlyError fails t unless stderr is the command's error "lrstream CMD:
// ..." alone, holding every want: nothing (a note, a progress or summary
// line) before or after it. (An error may span lines: a prerender
// directory's differences.)
func onlyError(t *testing.T, cmd, stderr string, want ...string) {
	t.Helper()
	prefix := "lrstream " + cmd + ": "
	if !strings.HasPrefix(stderr, prefix) || strings.Count(stderr, prefix) != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("stderr %q: want the error alone", stderr)
	}
	for _, other := range []string{"level=", "frames/s", cmd + ": rank", "\r"} {
		if strings.Contains(stderr, other) {
			t.Fatalf("stderr %q: %q besides the error", stderr, other)
		}
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("error %q does not say %q", stderr, w)
		}
	}
}

// onlyInBandError fails t unless a msgpack stdout holds one message, an
// in-band error (no header: nothing streamed).
func onlyInBandError(t *testing.T, stdout string) {
	t.Helper()
	d := sink.NewDecoder(bytes.NewReader([]byte(stdout)))
	m, err := d.Next()
	if err != nil || m.Type != sink.TypeError {
		t.Fatalf("stdout: first message %+v (%v), want an in-band error", m, err)
	}
	if m, err := d.Next(); err == nil {
		t.Fatalf("stdout: a %s after the in-band error", m.Type)
	}
}

// realNoVideos is a real LeRobot dataset copy with its metadata and data
// but no video files (its cameras observation.images.front and .top).
func realNoVideos(t *testing.T) string {
	dir := testkit.Shared(t, "datasets", "real", "SamueleSandrini__record-test")
	if _, err := os.Stat(filepath.Join(dir, "meta", "info.json")); err != nil {
		t.Skipf("shared dataset: %v", err)
	}
	return dir
}

// TestCamerasAbsentFailAtStartup: --cameras all or a list on a copy
// without video files fails before any output — no note, no progress or
// summary line, no header, no output directory — with an error naming
// camera, file, episode and count and the ways on (issue item 1).
func TestCamerasAbsentFailAtStartup(t *testing.T) {
	real := realNoVideos(t)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	nov := demoWithoutVideos(t) // the demo ships videos: a copy without them
	demoFirst := "--cameras all: camera observation.images.front: video file videos/observation.images.front/chunk-000/file-000.mp4 (episode 0) is not in " + nov
	hints := []string{"--cameras none", "--cameras auto"}
	tests := []struct {
		name   string
		args   []string
		inBand bool // stdout holds the in-band error (msgpack)
		want   []string
	}{
		{"stream demo", []string{"stream", "--cameras", "all"}, true, append([]string{demoFirst, "6 of the 6 video file(s)", "observation.images.front, observation.images.wrist"}, hints...)},
		{"stream one episode", []string{"stream", "--cameras", "all", "--episodes", "2"}, true, []string{"(episode 2)", "2 of the 2 video file(s)"}},
		{"stream real, a list", []string{"stream", "--dataset", real, "--recipe", recipe, "--cameras", "observation.images.top", "--episodes", "1"}, true,
			append([]string{"--cameras observation.images.top: camera observation.images.top: video file videos/observation.images.top/", "1 of the 1 video file(s)"}, hints...)},
		{"stream shuffled training", []string{"stream", "--cameras", "all", "--shuffle", "--epochs", "2"}, true, []string{demoFirst}},
		{"bench", []string{"bench", "--cameras", "all"}, false, []string{demoFirst}},
		{"inspect", []string{"inspect", "--cameras", "all"}, false, []string{demoFirst}},
		{"prerender", []string{"prerender", "--cameras", "all", "--out", "OUT"}, false, []string{demoFirst}},
		{"serve", []string{"serve", "--cameras", "all", "--socket", "SOCK"}, false, []string{demoFirst}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			args := tempArgs(tmp, tc.args...)
			if !slices.Contains(args, "--dataset") {
				args = append(args, "--dataset", nov, "--recipe", recipe)
			}
			out, errb, code := runCmd(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			onlyError(t, args[0], errb, tc.want...)
			if tc.inBand {
				onlyInBandError(t, out)
			} else if out != "" {
				t.Fatalf("stdout %q", out)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("left in the temporary directory: %v", left)
			}
		})
	}
}

// demoWithoutVideos is a copy of the demo dataset without its videos
// directory: a dataset declaring cameras whose video files are absent.
func demoWithoutVideos(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "demo")
	dst := filepath.Join(t.TempDir(), "novideos")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case rel == "videos":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestCameraNoteLogged: when --cameras auto leaves the dataset's cameras
// out (video files absent), every command says so once on stderr (log/slog)
// — the stream being piped, no preview shows it — as a warning -q does
// not hide, unless --cameras none asks for silence (issue item 2; issue
// 25 item 4).
func TestCameraNoteLogged(t *testing.T) {
	ds := demoWithoutVideos(t)
	note := `level=WARN msg="cameras: ` + ds + ` declares observation.images.front, observation.images.wrist; decoding none: video files absent, e.g. videos/observation.images.front/chunk-000/file-000.mp4; --cameras none to silence"`
	tests := []struct {
		args []string
		want int // notes
	}{
		{[]string{"stream"}, 1},
		{[]string{"stream", "--format", "jsonl"}, 1},
		{[]string{"stream", "--shuffle"}, 1},
		{[]string{"stream", "--cameras", "none"}, 0},
		{[]string{"stream", "-q"}, 1},
		{[]string{"bench", "--stages", "decode"}, 1},
		{[]string{"inspect", "--show", "1"}, 1},
		{[]string{"prerender", "--cameras", "auto", "--out", "OUT"}, 1},
		{[]string{"prerender", "--out", "OUT"}, 0}, // --cameras none by default
		{[]string{"prerender", "--cameras", "auto", "-q", "--out", "OUT"}, 1},
		{[]string{"serve", "--socket", "SOCK"}, 1},
		{[]string{"serve", "--socket", "SOCK", "--cameras", "none"}, 0},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			tmp := t.TempDir()
			args := append(append([]string(nil), tc.args...), "--dataset", ds, "--recipe", filepath.Join("..", "..", "testdata", "demo-recipe.yaml"))
			for i, a := range args {
				switch a {
				case "OUT":
					args[i] = filepath.Join(tmp, "out")
				case "SOCK":
					sockDir, err := os.MkdirTemp("", "lrs") // short: socket paths are limited
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { os.RemoveAll(sockDir) })
					args[i] = filepath.Join(sockDir, "s.sock")
				}
			}
			e, _, errb := genEnv()
			var code int
			if args[0] == "serve" {
				code = runServeUntilListening(t, e, args)
			} else {
				code = run(context.Background(), e, args)
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			if n := strings.Count(errb.String(), note); n != tc.want {
				t.Fatalf("%d camera notes, want %d; stderr:\n%s", n, tc.want, errb)
			}
			if tc.want == 0 && strings.Contains(errb.String(), "cameras:") {
				t.Fatalf("a camera note in stderr:\n%s", errb)
			}
		})
	}
}

// runServeUntilListening runs serve until its socket exists, then stops it
// (SIGTERM's path: ctx cancelled) and returns its exit status.
func runServeUntilListening(t *testing.T, e *env, args []string) int {
	t.Helper()
	sock := args[len(args)-1]
	for i, a := range args {
		if a == "--socket" {
			sock = args[i+1]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, args) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case code := <-done:
			return code
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen within 30 s")
		}
	}
	cancel()
	return <-done
}

// TestStartupErrorsPrintOnlyTheError: options and inputs a run refuses
// before its first batch — training options, --delta-timestamps, a
// prerender directory holding another run, a socket path in use — give
// the error alone on stderr: no rank note, camera note, progress or
// summary line before it, no output directory (issue item 3).
func TestStartupErrorsPrintOnlyTheError(t *testing.T) {
	// A complete single-rank pre-render of episode 0 that the runs below
	// do not match.
	done := filepath.Join(t.TempDir(), "done")
	if _, errb, code := runCmd(t, "prerender", "-q", "--out", done, "--episodes", "0"); code != 0 {
		t.Fatalf("prerender: %s", errb)
	}
	notSocket := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"partitions", []string{"stream", "--order", "partitioned", "--partitions", "3", "--world-size", "2", "--rank", "0"}, nil, "must divide --partitions 3"},
		{"resume token", []string{"stream", "--resume", "garbage"}, nil, `invalid resume token "garbage"`},
		{"resume token, torchrun rank", []string{"stream", "--resume", "garbage"}, map[string]string{"RANK": "1", "WORLD_SIZE": "2"}, `invalid resume token "garbage"`},
		{"resume token of another run", []string{"stream", "--shuffle", "--resume", "v1.eyJlcG9jaCI6MH0"}, nil, "resume token"},
		{"delta key", []string{"stream", "--delta-timestamps", "foo=1"}, nil, "--delta-timestamps: foo is not one of the emitted numeric features"},
		{"delta key, shuffled", []string{"stream", "--shuffle", "--delta-timestamps", "foo=1"}, nil, "foo is not one"},
		{"delta offset", []string{"stream", "--delta-timestamps", "observation.state=0.01"}, nil, "not multiples of 1/10 s"},
		{"delta key outside --features", []string{"stream", "--features", "action", "--delta-timestamps", "observation.state=0"}, nil, "observation.state is not one"},
		{"prerender delta", []string{"prerender", "--out", "NEW", "--delta-timestamps", "foo=1", "--world-size", "2", "--rank", "1"}, nil, "foo is not one"},
		{"prerender other run", []string{"prerender", "--out", done, "--episodes", "1", "--world-size", "2", "--rank", "0", "--cameras", "auto"}, nil, "holds a different pre-render"},
		{"serve delta", []string{"serve", "--socket", "SOCK", "--delta-timestamps", "foo=1"}, nil, "foo is not one"},
		{"bench delta", []string{"bench", "--delta-timestamps", "foo=1"}, nil, "foo is not one"},
		{"inspect delta", []string{"inspect", "--delta-timestamps", "foo=1"}, nil, "foo is not one"},
		{"serve socket", []string{"serve", "--socket", notSocket}, nil, "exists and is not a socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			args := tempArgs(tmp, tc.args...)
			e, _, errb := genEnv()
			e.getenv = func(k string) string { return tc.env[k] }
			if code := run(context.Background(), e, args); code != 1 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			onlyError(t, args[0], errb.String(), tc.want)
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("left in the temporary directory: %v", left)
			}
		})
	}
}

// tempArgs returns args with the placeholders OUT, NEW and SOCK replaced by
// paths in tmp (an output directory, a new one, a socket).
func tempArgs(tmp string, args ...string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		switch a {
		case "OUT":
			out[i] = filepath.Join(tmp, "out")
		case "NEW":
			out[i] = filepath.Join(tmp, "new")
		case "SOCK":
			out[i] = filepath.Join(tmp, "s.sock")
		}
	}
	return out
}
