package video

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lrstream/lrstream/framecache"
)

// TestBackendConversions decodes videos on which LeRobot's two backends
// differ with each FFmpeg.Backend and compares every frame with FFmpeg's
// own conversion as each backend does it: torchcodec bicubic, honouring
// the colorspace tag; PyAV bilinear, BT.601 whatever the tag
// (python/interop/test_camera_backends.py checks these against
// LeRobotDataset itself). The bt709 video's frames come through the YUV
// path, so for PyAV the Go conversion must ignore the tag too.
func TestBackendConversions(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	tests := []struct {
		name, codec, pixFmt string
		extra               []string
		yuv                 bool
	}{
		{"10-bit", "libsvtav1", "yuv420p10le", []string{"-svtav1-params", "verbose=0"}, false},
		{"bt709", "libx264", "yuv420p", []string{"-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709"}, true},
	}
	const w, h, n = 64, 64, 8
	for _, tc := range tests {
		p := filepath.Join(dir, tc.name+".mp4")
		args := append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
			"-i", "testsrc2=size=" + itoa(w) + "x" + itoa(h) + ":rate=30", "-frames:v", itoa(n),
			"-c:v", tc.codec, "-pix_fmt", tc.pixFmt, "-g", "4"}, tc.extra...)
		if out, err := exec.Command(d.Path, append(args, p)...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v: %s", err, out)
		}
		reference := map[string][]string{
			BackendTorchcodec: {"-sws_flags", "bicubic"},
			BackendPyAV:       {"-vf", "setparams=colorspace=unknown", "-sws_flags", "bilinear"},
		}
		got := map[string][][]byte{}
		for backend, conv := range reference {
			t.Run(tc.name+"/"+backend, func(t *testing.T) {
				out, err := exec.Command(d.Path, append(append([]string{"-nostdin", "-loglevel", "error", "-i", p}, conv...),
					"-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")...).Output()
				if err != nil || len(out) != n*3*w*h {
					t.Fatalf("reference conversion: %v (%d bytes)", err, len(out))
				}
				dec := &FFmpeg{Path: d.Path, Probe: d.Probe, MaxIdle: -1, Backend: backend}
				defer dec.Close()
				i, yuv := 0, 0
				err = dec.Decode(context.Background(), Segment{Path: p, Start: 0, End: 100}, func(f Frame) error {
					if f.YUV != nil {
						yuv++
					}
					chw := make([]byte, 3*w*h)
					ToCHW(chw, f)
					want := hwcToCHW(out[i*3*w*h:(i+1)*3*w*h], w, h)
					if !bytes.Equal(chw, want) {
						t.Errorf("frame %d differs from FFmpeg's conversion %v", i, conv)
					}
					got[backend] = append(got[backend], chw)
					i++
					return nil
				})
				if err != nil || i != n {
					t.Fatalf("decoded %d frames: %v", i, err)
				}
				if tc.yuv != (yuv == n) {
					t.Fatalf("%d of %d frames came as YUV, want yuv=%v", yuv, n, tc.yuv)
				}
			})
		}
		// The video must tell the backends apart, or it tests nothing.
		same := len(got[BackendTorchcodec]) == n && len(got[BackendPyAV]) == n
		for i := 0; same && i < n; i++ {
			same = bytes.Equal(got[BackendTorchcodec][i], got[BackendPyAV][i])
		}
		if same {
			t.Errorf("%s: the two backends gave the same frames", tc.name)
		}
	}
}

func hwcToCHW(hwc []byte, w, h int) []byte {
	chw := make([]byte, len(hwc))
	for i := range w * h {
		for c := range 3 {
			chw[c*w*h+i] = hwc[3*i+c]
		}
	}
	return chw
}

func TestCheckBackend(t *testing.T) {
	for _, tc := range []struct {
		b  string
		ok bool
	}{{"", true}, {"torchcodec", true}, {"pyav", true}, {"PyAV", false}, {"video_reader", false}} {
		if err := CheckBackend(tc.b); (err == nil) != tc.ok {
			t.Errorf("CheckBackend(%q) = %v", tc.b, err)
		}
	}
}

// TestFileKeyBackend: frames decoded for one backend are not served for
// the other (the frame cache's key names the conversion).
func TestFileKeyBackend(t *testing.T) {
	d := needFFmpeg(t)
	c, err := framecache.Open(framecache.Options{Dir: t.TempDir(), Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := &Frames{Cache: c, Group: "g", Identify: func(context.Context, string) (string, bool, error) { return "v1", true, nil }}
	key := func(backend string) string {
		k, ok := fr.fileKey(context.Background(), &FFmpeg{Path: d.Path, Probe: d.Probe, Backend: backend}, "a.mp4", "cam", Segment{}, FileNeeds{}, 1e-4)
		if !ok {
			t.Fatalf("no key for backend %q", backend)
		}
		return k
	}
	if key("") != key(BackendTorchcodec) {
		t.Error("the default backend and torchcodec have different keys")
	}
	if key(BackendTorchcodec) == key(BackendPyAV) {
		t.Error("torchcodec and pyav frames share a key")
	}
}

func TestBackendsDiffer(t *testing.T) {
	for _, tc := range []struct {
		pix, space string
		differ     bool
	}{
		{"yuv420p", "", false},
		{"yuv420p", "bt470bg", false},
		{"yuv420p", "smpte170m", false},
		{"yuvj420p", "", false},
		{"yuv444p", "unknown", false},
		{"yuv420p", "bt709", true},
		{"yuv420p", "bt2020nc", true},
		{"yuv420p10le", "", true},
		{"yuv422p12be", "", true},
		{"p010le", "", true},
		{"gray12le", "", false},
		{"gray", "bt709", false},
		{"gbrp10le", "", false},
		{"rgb24", "", false},
		{"nv12", "", false},
	} {
		if _, got := BackendsDiffer(StreamInfo{PixFmt: tc.pix, ColorSpace: tc.space}); got != tc.differ {
			t.Errorf("%s %q: differ=%v, want %v", tc.pix, tc.space, got, tc.differ)
		}
	}
}
