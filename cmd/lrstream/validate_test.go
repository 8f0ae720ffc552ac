package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/validate"
)

func TestValidateCommand(t *testing.T) {
	clean := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist")
	bad := copyMeta(t, clean)
	p := filepath.Join(bad, "meta", "info.json")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(data), `"fps": 10`, `"fps": 0`, 1)), 0o644)
	for _, c := range []struct {
		args       []string
		code       int
		out, errIn string
	}{
		{[]string{"validate", clean}, 0, "0 errors", ""},
		{[]string{"validate", "--recipe", shared(t, "recipes", "subtask.yaml"), "--mode", "fallback", clean}, 0, "recipe subtask.yaml in mode fallback", ""},
		// Without --mode the recipe is checked in stream's default mode:
		// fallback, which batches a dataset with unannotated episodes.
		{[]string{"validate", "--recipe", shared(t, "recipes", "subtask.yaml"), shared(t, "conformance", "datasets", "pub_documented_top_wrist")}, 1, "recipe subtask.yaml in mode fallback", ""},
		{[]string{"validate", "--recipe", shared(t, "recipes", "subtask.yaml"), "--mode", "drop", shared(t, "conformance", "datasets", "pub_documented_top_wrist")}, 1, "--mode drop cannot batch this dataset", ""},
		{[]string{"validate", bad}, 1, "fps 0: want a frame rate above 0", ""},
		{[]string{"validate"}, 2, "", "DATASET is required"},
		{[]string{"validate", clean, "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"validate", "--bogus", clean}, 2, "", "unknown flag --bogus"},
		{[]string{"validate", clean, "--jsn"}, 2, "", "unknown flag --jsn; did you mean --json?"},
		{[]string{"validate", "--download", "none", clean}, 0, "0 errors", ""},
		{[]string{"validate", "--cache", "none", clean}, 0, "0 errors", ""},
		{[]string{"validate", "--cache-dir", t.TempDir(), clean}, 0, "0 errors", ""},
		{[]string{"validate", "--revision", "v2", clean}, 1, "", "is a local directory; revisions apply to Hub datasets"},
	} {
		out, errb, code := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errb, c.errIn) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errb)
		}
	}
	out, _, code := runCmd(t, "validate", "--json", bad)
	var rep validate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Errors == 0 || rep.Clean() || rep.FramesRead != 604 {
		t.Fatalf("--json: exit %d, %v, %+v", code, err, rep)
	}
}

// TestValidateFFprobe checks video lengths with the real ffprobe: a
// 1-second video for episodes that last about a minute.
func TestValidateFFprobe(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not on PATH (scripts/test.sh installs it)")
	}
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe not on PATH")
	}
	dir := copyMeta(t, shared(t, "conformance", "datasets", "pub_jsonext_front_wrist"))
	for _, cam := range []string{"front", "wrist"} {
		p := filepath.Join(dir, "videos", "observation.images."+cam, "chunk-000", "file-000.mp4")
		os.MkdirAll(filepath.Dir(p), 0o755)
		cmd := exec.Command(ffmpeg, "-v", "error", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=10:duration=1", "-pix_fmt", "yuv420p", p)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v %s", err, out)
		}
	}
	out, _, code := runCmd(t, "validate", dir)
	if code != 1 || !strings.Contains(out, "the video has 10 frames, its episodes need 604") ||
		!strings.Contains(out, "it lasts to its last episode's end with no frame of slack") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestValidateHub validates a Hub dataset (from a warm cache, offline)
// the way the other commands open it.
func TestValidateHub(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist")
	sha := strings.Repeat("cd34", 10)
	cache := warmCache(t, ds, "lerobot-test/jsonext", sha)
	vars := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}
	e, out, errb := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	code := run(context.Background(), e, []string{"validate", "--json", "lerobot-test/jsonext"})
	var rep validate.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v, stderr %s", code, err, errb)
	}
	if rep.Dataset != "lerobot-test/jsonext" || rep.Revision != sha || rep.FramesRead != 604 || !rep.Clean() {
		t.Fatalf("report %+v", rep)
	}
}

// TestValidateLanguageAndLeftOut: the language checks are listed as
// checked only for a dataset with language columns (issue 24 item 7), and
// the summary says what stream with its default flags leaves out.
func TestValidateLanguageAndLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dataset   string
		language  bool
		leavesOut []string
	}{
		{"no language columns", shared(t, "datasets", "real", "SamueleSandrini__record-test"), false,
			[]string{"camera observation.images.front: video files absent", "camera observation.images.top: video files absent"}},
		{"language", shared(t, "conformance", "datasets", "pub_jsonext_front_wrist"), true,
			[]string{"camera observation.images.front: video files absent", "camera observation.images.wrist: video files absent"}},
		{"language, videos present", cameraDataset(t), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, code := runCmd(t, "validate", tc.dataset)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errb, out)
			}
			checked, rest, _ := strings.Cut(out, "\nnot checked:\n")
			if got := strings.Contains(checked, "\n  language: styles"); got != tc.language {
				t.Errorf("language listed as checked: %t, want %t\n%s", got, tc.language, out)
			}
			if got := strings.Contains(rest, "  language: the dataset has no language columns"); got == tc.language {
				t.Errorf("language listed as not checked: %t, want %t\n%s", got, !tc.language, out)
			}
			_, left, found := strings.Cut(out, "lrstream stream (default flags) leaves out:\n")
			if found != (len(tc.leavesOut) > 0) {
				t.Fatalf("leaves-out section: %t\n%s", found, out)
			}
			for _, w := range tc.leavesOut {
				if !strings.Contains(left, "  "+w) {
					t.Errorf("leaves-out section lacks %q:\n%s", w, left)
				}
			}
			js, _, _ := runCmd(t, "validate", "--json", tc.dataset)
			var rep validate.Report
			if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.StreamLeavesOut) != len(tc.leavesOut) {
				t.Errorf("--json stream_leaves_out %q (%v), want %d entries", rep.StreamLeavesOut, err, len(tc.leavesOut))
			}
		})
	}
}
