package video

import (
	"context"
	"strings"
	"testing"
)

// TestFFmpegIdentityKey: the installed FFmpeg's key names its executable
// and the libav* libraries it links; Identity names the build by its
// version lines.
func TestFFmpegIdentityKey(t *testing.T) {
	d := needFFmpeg(t)
	key, ok := d.IdentityKey()
	if !ok {
		t.Skipf("FFmpeg at %s is not a system build with its libraries in the default directories", d.Path)
	}
	if !strings.Contains(key, "ffmpeg") || !strings.Contains(key, "libavcodec") {
		t.Fatalf("key %q does not name the executable and libavcodec", key)
	}
	id, err := d.Identity(context.Background())
	if err != nil || !strings.Contains(id, "ffmpeg version") || !strings.Contains(id, "libavcodec") {
		t.Fatalf("Identity = %q, %v", id, err)
	}
	if again, _ := d.IdentityKey(); again != key {
		t.Fatal("the key changes from one call to the next")
	}
}
