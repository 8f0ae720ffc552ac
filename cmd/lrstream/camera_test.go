package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/sink"
)

// cameraDataset generates a tiny dataset with two cameras' videos.
func cameraDataset(t *testing.T) string {
	t.Helper()
	return genCameraDataset(t, filepath.Join(t.TempDir(), "cams"), 3, 8, 12, 32, 16)
}

// genCameraDataset generates at dir a dataset of eps episodes of minF to
// maxF frames with two cameras' w×h videos. Without ffmpeg on PATH it
// skips the test, or fails it where FFmpeg is required (CI).
func genCameraDataset(t *testing.T, dir string, eps, minF, maxF, w, h int) string {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: ffmpeg not found: %v", err)
		}
		t.Skipf("ffmpeg not found: %v", err)
	}
	o := datagen.Options{Episodes: eps, MinFrames: minF, MaxFrames: maxF, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		Videos: true, VideoWidth: w, VideoHeight: h, Workers: 1}
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

func headerOf(t *testing.T, out string) *sink.Header {
	t.Helper()
	st, err := sink.Decode(bytes.NewReader([]byte(out)))
	if err != nil {
		t.Fatal(err)
	}
	return st.Header
}

func cameraColumns(h *sink.Header) []string {
	var cols []string
	for _, f := range h.Features {
		if strings.HasPrefix(f.Name, "observation.images.") {
			cols = append(cols, f.Name)
		}
	}
	return cols
}

// TestCamerasPrerenderReplay: prerender writes frames only with --cameras;
// stream --from replays exactly what stream emits with the same flags.
func TestCamerasPrerenderReplay(t *testing.T) {
	ds := cameraDataset(t)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	common := []string{"--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "8"}
	for _, tc := range []struct {
		name    string
		flags   []string
		columns int
	}{
		{"default: no frames", nil, 0},
		{"all cameras resized", []string{"--cameras", "all", "--resize", "8x12"}, 2},
		{"all cameras, PyAV's conversion", []string{"--cameras", "all", "--video-backend", "pyav"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pr")
			args := append(append([]string{"prerender", "--out", dir, "-q"}, common...), tc.flags...)
			if _, errb, code := runCmd(t, args...); code != 0 {
				t.Fatalf("prerender: %s", errb)
			}
			replay, errb, code := runCmd(t, "stream", "--from", dir)
			if code != 0 {
				t.Fatalf("stream --from: %s", errb)
			}
			if n := len(cameraColumns(headerOf(t, replay))); n != tc.columns {
				t.Fatalf("%d camera columns in the prerendered stream, want %d", n, tc.columns)
			}
			flags := tc.flags
			if flags == nil {
				flags = []string{"--cameras", "none"}
			}
			live, errb, code := runCmd(t, append(append([]string{"stream"}, common...), flags...)...)
			if code != 0 {
				t.Fatalf("stream: %s", errb)
			}
			if live != replay {
				t.Fatalf("replay (%d bytes) differs from stream with the same flags (%d bytes)", len(replay), len(live))
			}
		})
	}
}

// TestCamerasWithoutFFmpeg: without ffmpeg, decoding cameras is a startup
// error of every command — the error alone on stderr (no note, progress
// or summary line), nothing streamed — saying how to install FFmpeg and
// how to skip cameras; --cameras none and datasets without video files
// need no FFmpeg.
func TestCamerasWithoutFFmpeg(t *testing.T) {
	ds := cameraDataset(t)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	t.Setenv("PATH", t.TempDir()) // no ffmpeg on it
	common := []string{"--dataset", ds, "--recipe", recipe, "--mode", "fallback"}
	for _, tc := range []struct {
		args   []string
		inBand bool
	}{
		{[]string{"stream"}, true},
		{[]string{"stream", "--cameras", "observation.images.wrist", "--shuffle"}, true},
		{[]string{"stream", "--format", "jsonl", "--cameras", "all"}, false},
		{[]string{"bench"}, false},
		{[]string{"inspect"}, false},
		{[]string{"prerender", "--cameras", "all", "--out", "OUT"}, false},
		{[]string{"serve", "--socket", "SOCK"}, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			tmp := t.TempDir()
			args := tempArgs(tmp, append(append([]string(nil), tc.args...), common...)...)
			out, errb, code := runCmd(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			onlyError(t, args[0], errb, "ffmpeg not found", "apt-get install ffmpeg", "--cameras none")
			switch {
			case tc.inBand:
				onlyInBandError(t, out)
			case strings.Contains(strings.Join(args, " "), "jsonl"):
				if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"type":"error"`) {
					t.Fatalf("stdout %q: want the in-band error alone", out)
				}
			case out != "":
				t.Fatalf("stdout %q", out)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("left in the temporary directory: %v", left)
			}
		})
	}
	out, errb, code := runCmd(t, "stream", "--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--cameras", "none")
	if code != 0 {
		t.Fatalf("--cameras none: %s", errb)
	}
	h := headerOf(t, out)
	if len(cameraColumns(h)) != 0 || len(h.Cameras) != 2 || h.Cameras[0].Decoded {
		t.Fatalf("--cameras none: columns %v, cameras %+v", cameraColumns(h), h.Cameras)
	}
	// The embedded demo's cameras under the default auto, without FFmpeg:
	// the newcomer's first command streams without camera frames, saying
	// why; an explicit --cameras still needs FFmpeg.
	out, errb, code = runCmd(t, "stream")
	if code != 0 {
		t.Fatalf("demo: %s", errb)
	}
	if h := headerOf(t, out); len(cameraColumns(h)) != 0 || len(h.Cameras) != 2 || h.Cameras[0].Decoded {
		t.Fatalf("demo: columns %v, cameras %+v", cameraColumns(h), h.Cameras)
	}
	const note = "cameras: lrstream-demo declares observation.images.front, observation.images.wrist; decoding none: FFmpeg not found (install it to see the demo's camera frames, e.g. `apt-get install ffmpeg`); --cameras none to silence"
	if !strings.Contains(errb, note) {
		t.Fatalf("demo without FFmpeg: stderr %q, want the note %q", errb, note)
	}
	if _, errb, code := runCmd(t, "stream", "--cameras", "all"); code != 1 || !strings.Contains(errb, "ffmpeg not found") {
		t.Fatalf("demo --cameras all without FFmpeg: exit %d, stderr %q", code, errb)
	}
}

// TestDemoShowsCameraFrames: the embedded demo ships tiny videos, so the
// first command of the README (`lrstream stream`, no flags) carries every
// kind of column, camera frames included (issue 24 item 16).
func TestDemoShowsCameraFrames(t *testing.T) {
	cameraDataset(t) // FFmpeg is required (in CI) or the test is skipped
	out, errb, code := runCmd(t, "stream", "--batch-size", "4", "--episodes", "0,11")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if strings.Contains(errb, "cameras:") {
		t.Errorf("a camera note: %s", errb)
	}
	st, err := sink.Decode(bytes.NewReader([]byte(out)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"observation.images.front", "observation.images.wrist"}
	if got := cameraColumns(st.Header); !slices.Equal(got, want) {
		t.Fatalf("camera columns %v, want %v", got, want)
	}
	for _, c := range st.Header.Cameras {
		if !c.Decoded {
			t.Errorf("camera %+v not decoded", c)
		}
	}
	if len(st.Batches) == 0 {
		t.Fatal("no batch")
	}
	b := st.Batches[0]
	for _, k := range append(want, "observation.state", "action", "index", "task", "messages") {
		if b.Column(k) == nil {
			t.Errorf("first batch lacks column %s", k)
		}
	}
	for _, k := range want {
		a, ok := b.Column(k).(*sink.Array)
		if !ok || a.DType != "|u1" || !slices.Equal(a.Shape, []int{4, 3, 32, 48}) || len(a.Data) != 4*3*32*48 {
			t.Fatalf("%s: %T %+v, want |u1 [4 3 32 48]", k, b.Column(k), a)
		}
		if bytes.Count(a.Data, []byte{0}) == len(a.Data) {
			t.Errorf("%s: black frames", k)
		}
	}
}

// TestPrerenderCameraNote: prerender's default --cameras none warns when
// stream's default (auto) would decode cameras, naming them (issue 24
// item 3); no note when --cameras is given, under -q, or when auto would
// decode nothing (a dataset without its videos).
func TestPrerenderCameraNote(t *testing.T) {
	ds := cameraDataset(t)
	noVideos := filepath.Join(t.TempDir(), "novideos")
	o := datagen.Options{Episodes: 2, MinFrames: 8, MaxFrames: 12, Density: datagen.DensitySparse, Dim: 2, Tasks: 2, Workers: 1}
	if _, err := datagen.Generate(context.Background(), noVideos, o); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		note bool
	}{
		{"default", []string{"--dataset", ds}, true},
		{"cameras none", []string{"--dataset", ds, "--cameras", "none"}, false},
		{"cameras auto", []string{"--dataset", ds, "--cameras", "auto"}, false},
		{"quiet", []string{"--dataset", ds, "-q"}, false},
		{"no videos", []string{"--dataset", noVideos}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "pr")
			_, errb, code := runCmd(t, append([]string{"prerender", "--out", out, "--recipe", "none"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			has := strings.Contains(errb, "prerender writes no camera frames by default")
			if has != tc.note {
				t.Fatalf("note %t, want %t; stderr %q", has, tc.note, errb)
			}
			if has && (!strings.Contains(errb, "observation.images.front, observation.images.wrist") || !strings.Contains(errb, "stream --from "+out)) {
				t.Errorf("note does not name the cameras and the replay: %q", errb)
			}
		})
	}
}

// TestMixCameraSets: a mixture whose datasets decode different cameras is
// refused before the header (stream, serve), naming both datasets, the
// cameras and why one is not decoded (issue 24 item 5); --cameras none
// mixes them.
func TestMixCameraSets(t *testing.T) {
	withVideos := cameraDataset(t)
	noVideos := filepath.Join(t.TempDir(), "novideos")
	o := datagen.Options{Episodes: 3, MinFrames: 8, MaxFrames: 12, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		VideoWidth: 32, VideoHeight: 16, Workers: 1}
	if _, err := datagen.Generate(context.Background(), noVideos, o); err != nil {
		t.Fatal(err)
	}
	mix := []string{"--dataset", withVideos, "--dataset", noVideos, "--recipe", "none"}
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"stream", append([]string{"stream", "--format", "jsonl"}, mix...), false},
		{"stream shuffled", append([]string{"stream", "--format", "jsonl", "--shuffle"}, mix...), false},
		{"serve", append([]string{"serve", "--socket", filepath.Join(t.TempDir(), "s.sock")}, mix...), false},
		{"cameras none", append([]string{"stream", "--format", "jsonl", "--cameras", "none", "-q"}, mix...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, code := runCmd(t, tc.args...)
			if tc.ok {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errb)
				}
				return
			}
			for _, want := range []string{"cams and ", "novideos cannot be mixed", "decode different cameras", "observation.images.front 3x16x32",
				"novideos: observation.images.front not decoded: video files absent", "--cameras"} {
				if !strings.Contains(errb, want) {
					t.Errorf("exit %d, stderr %q lacks %q", code, errb, want)
				}
			}
			if code != 1 || strings.Contains(out, `"type":"header"`) || strings.Contains(out, `"type":"batch"`) {
				t.Errorf("exit %d; stdout %.300q: want the error before any header", code, out)
			}
		})
	}
}
