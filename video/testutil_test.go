package video

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// needFFmpeg returns the FFmpeg decoder, skipping the test when ffmpeg is
// absent, except under CI=1 where FFmpeg is installed (scripts/test.sh)
// and its absence fails the test.
func needFFmpeg(t testing.TB) *FFmpeg {
	t.Helper()
	d, err := NewFFmpeg()
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skipf("%v", err)
	}
	return d
}

// makeVideo encodes n frames of FFmpeg's testsrc2 at fps into dir/name
// with codec ("libx264" or "libsvtav1") and a keyframe every gop frames.
func makeVideo(t testing.TB, dir, name, codec string, w, h, fps, n, gop int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=" + itoa(w) + "x" + itoa(h) + ":rate=" + itoa(fps),
		"-frames:v", itoa(n), "-c:v", codec, "-pix_fmt", "yuv420p", "-g", itoa(gop)}
	if codec == "libsvtav1" {
		args = append(args, "-svtav1-params", "verbose=0")
	}
	args = append(args, p)
	out, err := exec.Command("ffmpeg", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	return p
}

func itoa(i int) string { return fmtInt(i) }

func fmtInt(i int) string { return strconv.Itoa(i) }
