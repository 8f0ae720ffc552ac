package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
)

// TestShuffleSpillFlag: --shuffle-spill (or LRSTREAM_SHUFFLE_SPILL)
// streams the same bytes as holding the frames in memory, leaves nothing
// in its directory, and a directory that does not exist is a usage error.
func TestShuffleSpillFlag(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: ffmpeg not found: %v", err)
		}
		t.Skipf("ffmpeg not found: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "cams")
	// 96×64 cameras: a sample's frames are large enough (32 KiB) to be
	// held in an array of their own, which is what spills.
	o := datagen.Options{Episodes: 3, MinFrames: 8, MaxFrames: 12, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		Videos: true, VideoWidth: 96, VideoHeight: 64, Workers: 1}
	if _, err := datagen.Generate(context.Background(), ds, o); err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	args := []string{"stream", "-q", "--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "4",
		"--cameras", "all", "--shuffle", "--seed", "5", "--shuffle-buffer", "12", "--shuffle-buffer-bytes", "0"}
	runEnv := func(vars map[string]string, extra ...string) (string, string, int) {
		t.Helper()
		e, out, errb := genEnv()
		e.getenv = func(k string) string { return vars[k] }
		code := run(context.Background(), e, append(append([]string{}, args...), extra...))
		return out.String(), errb.String(), code
	}
	want, errb, code := runEnv(nil)
	if code != 0 {
		t.Fatalf("stream: %s", errb)
	}
	spill := t.TempDir()
	missing := filepath.Join(spill, "missing")
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		flags []string
		fail  string
	}{
		{name: "flag", flags: []string{"--shuffle-spill", spill}},
		{name: "environment", vars: map[string]string{shuffleSpillEnv: spill}},
		{name: "flag over environment", vars: map[string]string{shuffleSpillEnv: missing}, flags: []string{"--shuffle-spill", spill}},
		{name: "missing directory", flags: []string{"--shuffle-spill", missing}, fail: "--shuffle-spill"},
		{name: "not a directory", flags: []string{"--shuffle-spill", recipe}, fail: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errb, code := runEnv(tc.vars, tc.flags...)
			if tc.fail != "" {
				if code == 0 || !strings.Contains(errb, tc.fail) || got != "" {
					t.Fatalf("exit %d, stderr %q, %d bytes out: want a usage error naming %q and nothing streamed", code, errb, len(got), tc.fail)
				}
				return
			}
			if code != 0 {
				t.Fatalf("stream: %s", errb)
			}
			if got != want {
				t.Fatalf("%d bytes with the spill, %d without: the output differs", len(got), len(want))
			}
			if left, err := os.ReadDir(spill); err != nil || len(left) != 0 {
				t.Fatalf("spill directory after the stream: %v %v, want empty", left, err)
			}
		})
	}
}
