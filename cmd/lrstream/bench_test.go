package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/bench"
)

func TestBenchDemo(t *testing.T) {
	e, out, errb := genEnv()
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	if code := run(context.Background(), e, []string{"bench", "--cpuprofile", prof}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	s := out.String()
	for _, want := range []string{"lrstream-demo", "demo-recipe.yaml", "scan", "decode", "render", "stream", "frames/s", "MB/s", "ns/frame", "allocs/frame", "peak RSS", "stream/scan", "render/scan"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("cpu profile not written: %v", err)
	}
}

func TestBenchJSON(t *testing.T) {
	e, out, errb := genEnv()
	if code := run(context.Background(), e, []string{"bench", "--json", "--workers", "1", "--batch-size", "7", "--stages", "scan,stream", "--count", "2"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.Stages) != 2 || rep.Stages[0].Name != "scan" || rep.Stages[1].Name != "stream" {
		t.Fatalf("stages %+v", rep.Stages)
	}
	if rep.Workers != 1 || rep.BatchSize != 7 || rep.Count != 2 {
		t.Errorf("workers %d batch size %d", rep.Workers, rep.BatchSize)
	}
	for _, st := range rep.Stages {
		if st.Frames != 1175 || st.FramesPerSec <= 0 || st.Bytes <= 0 {
			t.Errorf("%s: %+v", st.Name, st)
		}
	}
	if s := rep.Stage("stream"); s.Batches == 0 || s.OutBytes == 0 {
		t.Errorf("stream: %+v", s)
	}
	if rep.StreamOverScan <= 0 || rep.RenderOverScan != 0 {
		t.Errorf("ratios %v %v", rep.StreamOverScan, rep.RenderOverScan)
	}
}

func TestBenchBadStage(t *testing.T) {
	e, _, errb := genEnv()
	if code := run(context.Background(), e, []string{"bench", "--stages", "scan,nope"}); code == 0 || !strings.Contains(errb.String(), "nope") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

// TestBenchFFmpegProcesses: bench reports the ffmpeg processes a camera
// stage started: at least one a camera file for stream (kept processes
// continue to later pieces, so at most one a piece), none for a warm
// cached stage.
func TestBenchFFmpegProcesses(t *testing.T) {
	ds := genCameraDataset(t, filepath.Join(t.TempDir(), "cams"), 3, 8, 12, 32, 16)
	e, out, errb := genEnv()
	args := []string{"bench", "--json", "--dataset", ds, "--recipe", filepath.Join("..", "..", "testdata", "demo-recipe.yaml"),
		"--mode", "fallback", "--cameras", "all", "--stages", "stream,cached", "--frame-cache-dir", t.TempDir()}
	if code := run(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	s, c := rep.Stage(bench.StageStream), rep.Stage(bench.StageCached)
	if s == nil || c == nil {
		t.Fatalf("stages %+v", rep.Stages)
	}
	// Two cameras, one file each; 3 episodes of at most 12 frames: one
	// piece an episode.
	if s.FFmpegProcesses < 2 || s.FFmpegProcesses > 2*3 {
		t.Errorf("stream started %d ffmpeg processes, want 2 to 6", s.FFmpegProcesses)
	}
	if c.FFmpegProcesses != 0 {
		t.Errorf("cached started %d ffmpeg processes, want none", c.FFmpegProcesses)
	}
}
