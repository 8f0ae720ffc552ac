package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func genEnv() (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}, &out, &errb
}

func TestGen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	args := []string{"gen", "--out", dir, "--episodes", "3", "--min-frames", "20", "--max-frames", "40",
		"--fps", "10", "--cameras", "top,wrist", "--dim", "6", "--density", "sparse", "--variant", "inferred",
		"--seed", "9", "--files-per-chunk", "2", "--frames-per-file", "50"}
	e, out, errb := genEnv()
	if code := run(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "3 episodes") || errb.Len() != 0 {
		t.Errorf("stdout %q stderr %q", out, errb)
	}
	info, err := os.ReadFile(filepath.Join(dir, "meta", "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), `"observation.images.top"`) || !strings.Contains(string(info), `"chunks_size": 2`) {
		t.Errorf("info.json:\n%s", info)
	}

	// A non-empty directory is refused without --force.
	e, _, errb = genEnv()
	if code := run(context.Background(), e, args); code != 1 || !strings.Contains(errb.String(), "not empty") {
		t.Errorf("second run: exit %d, stderr %q", code, errb)
	}
	e, _, errb = genEnv()
	if code := run(context.Background(), e, append(args, "--force", "-q")); code != 0 {
		t.Errorf("--force: exit %d, stderr %q", code, errb)
	}

	for _, bad := range [][]string{
		{"gen"},
		{"gen", "--out", dir + "x", "--density", "dense"},
		{"gen", "--out", dir + "y", "--episodes", "0"},
		{"gen", "--bogus"},
	} {
		e, _, errb := genEnv()
		if code := run(context.Background(), e, bad); code == 0 {
			t.Errorf("%v: exit 0, stderr %q", bad, errb)
		}
	}
	e, _, _ = genEnv()
	if code := run(context.Background(), e, []string{"gen", "-h"}); code != 0 {
		t.Errorf("gen -h: exit %d", code)
	}
}

// TestGenVideoSize: --video-size is the cameras' declared shape with or
// without --videos (the VQA and trace coordinates follow it: datagen's
// TestViewCoordinatesInFrame).
func TestGenVideoSize(t *testing.T) {
	for _, tc := range []struct {
		size  string
		shape []int
	}{
		{"", []int{480, 640, 3}},
		{"64x96", []int{64, 96, 3}},
	} {
		dir := filepath.Join(t.TempDir(), "ds")
		args := []string{"gen", "--out", dir, "--episodes", "1", "--min-frames", "20", "--max-frames", "20", "--cameras", "top", "-q"}
		if tc.size != "" {
			args = append(args, "--video-size", tc.size)
		}
		e, _, errb := genEnv()
		if code := run(context.Background(), e, args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		data, err := os.ReadFile(filepath.Join(dir, "meta", "info.json"))
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Features map[string]struct{ Shape []int }
		}
		if err := json.Unmarshal(data, &info); err != nil {
			t.Fatal(err)
		}
		if got := info.Features["observation.images.top"].Shape; !slices.Equal(got, tc.shape) {
			t.Errorf("--video-size %q: declared shape %v, want %v", tc.size, got, tc.shape)
		}
	}
}
