package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/sink"
)

// copyMeta copies a dataset's meta/ and data/ into a temporary directory.
func copyMeta(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, sub := range []string{"meta", "data"} {
		err := filepath.Walk(filepath.Join(src, sub), func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if info.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestStreamEpisodesMissing(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist") // 14 episodes
	rec := shared(t, "recipes", "subtask.yaml")
	args := []string{"stream", "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "-q", "--episodes", "3,50-52"}
	out, errb, code := runCmd(t, args...)
	if code != 0 || !strings.Contains(errb, "has no episode 50-52") {
		t.Fatalf("exit %d, stderr %q: want a warning naming 50-52", code, errb)
	}
	if st, err := sink.Decode(strings.NewReader(out)); err != nil || st.End.Frames == 0 {
		t.Fatalf("stream %v", err)
	}
	out, errb, code = runCmd(t, append(args, "--strict")...)
	// The failure is also in-band: a lone error message on stdout.
	if msg, lone := loneError(out); code == 0 || !lone || !strings.Contains(msg, "has no episode 50-52") || !strings.Contains(errb, "has no episode 50-52") {
		t.Fatalf("--strict: exit %d, stdout %d bytes, stderr %q", code, len(out), errb)
	}
}

func TestStreamOnInconsistent(t *testing.T) {
	dir := copyMeta(t, shared(t, "conformance", "datasets", "pub_jsonext_front_wrist"))
	p := filepath.Join(dir, "meta", "info.json")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(data), `"total_frames": 604`, `"total_frames": 700`, 1)), 0o644)
	rec := shared(t, "recipes", "subtask.yaml")
	args := []string{"stream", "--dataset", dir, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "-q"}
	_, errb, code := runCmd(t, args...)
	if code == 0 || !strings.Contains(errb, "total_frames is 700") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	out, errb, code := runCmd(t, append(args, "--on-inconsistent", "warn")...)
	if code != 0 || !strings.Contains(errb, "warning: ") || !strings.Contains(errb, "total_frames is 700") {
		t.Fatalf("warn: exit %d, stderr %q", code, errb)
	}
	if st, err := sink.Decode(strings.NewReader(out)); err != nil || st.End.Frames != 604 {
		t.Fatalf("warn: stream %v", err)
	}
	if _, errb, code := runCmd(t, append(args, "--on-inconsistent", "maybe")...); code == 0 || !strings.Contains(errb, "fail or warn") {
		t.Fatalf("bad value: exit %d, stderr %q", code, errb)
	}
}

// TestStreamFrameChecks: a task_index missing from tasks.parquet and a NaN
// timestamp fail naming the frame, in both modes (not "use --mode
// fallback").
func TestStreamFrameChecks(t *testing.T) {
	base := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist")
	rec := shared(t, "recipes", "subtask.yaml")
	file := "data/chunk-000/file-000.parquet"
	for _, c := range []struct {
		edit tamper.Edit
		want []string
	}{
		{tamper.SetInt("task_index", 3, 9), []string{file, "episode 0", "index 3", "frame_index 3", "task_index 9 is not in meta/tasks.parquet"}},
		{tamper.SetFloat32("timestamp", 0, float32(math.NaN())), []string{file, "episode 0", "index 0", "frame_index 0", "timestamp NaN"}},
	} {
		dir := copyMeta(t, base)
		if err := tamper.Parquet(filepath.Join(dir, file), c.edit); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"drop", "fallback"} {
			_, errb, code := runCmd(t, "stream", "--dataset", dir, "--recipe", rec, "--mode", mode, "--on-error", "skip", "-q")
			if code == 0 || strings.Contains(errb, "--mode fallback") {
				t.Errorf("%s: exit %d, stderr %q", mode, code, errb)
			}
			for _, w := range c.want {
				if !strings.Contains(errb, w) {
					t.Errorf("%s: stderr %q lacks %q", mode, errb, w)
				}
			}
		}
	}
}
