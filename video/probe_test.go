package video

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestParseProbe(t *testing.T) {
	tests := []struct {
		name string
		out  string
		key  yuvKey
		ok   bool
	}{
		{"untagged", `{"streams": [{"pix_fmt": "yuv420p", "width": 640, "height": 480}]}`, yuvKey{w: 640, h: 480}, true},
		{"tagged 709", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "bt709", "color_range": "tv"}]}`, yuvKey{64, 48, "bt709", "tv"}, true},
		{"unknown", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "unknown", "color_range": "unknown"}]}`, yuvKey{64, 48, "unknown", "unknown"}, true},
		{"full range", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_range": "pc"}]}`, yuvKey{64, 48, "", "pc"}, false},
		{"yuvj", `{"streams": [{"pix_fmt": "yuvj420p", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"10 bit", `{"streams": [{"pix_fmt": "yuv420p10le", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"444", `{"streams": [{"pix_fmt": "yuv444p", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"bt2020", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "bt2020nc"}]}`, yuvKey{64, 48, "bt2020nc", ""}, false},
		{"odd width", `{"streams": [{"pix_fmt": "yuv420p", "width": 63, "height": 48}]}`, yuvKey{w: 63, h: 48}, false},
		{"no stream", `{"streams": []}`, yuvKey{}, false},
		{"not json", `moov atom not found`, yuvKey{}, false},
		{"huge", `{"streams": [{"pix_fmt": "yuv420p", "width": 65536, "height": 2}]}`, yuvKey{w: 65536, h: 2}, false},
	}
	for _, tc := range tests {
		key, ok := parseProbe([]byte(tc.out))
		if ok != tc.ok || (tc.ok && key != tc.key) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, key, ok, tc.key, tc.ok)
		}
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add([]byte(`{"streams": [{"pix_fmt": "yuv420p", "width": 640, "height": 480, "color_space": "bt709", "color_range": "tv"}]}`))
	f.Add([]byte(`{"streams": [{"pix_fmt": "yuv420p", "width": -2, "height": 480}]}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		key, ok := parseProbe(out)
		if ok && (key.w <= 0 || key.h <= 0 || key.w%2 != 0 || key.h%2 != 0 || key.w > 1<<15 || key.h > 1<<15 || yuvFor(key.space, key.rng) == nil) {
			t.Fatalf("accepted %+v", key)
		}
	})
}

func TestSetparams(t *testing.T) {
	for _, tc := range []struct{ space, rng, want string }{
		{"", "", ""}, {"unknown", "unknown", ""}, {"bt709", "", "setparams=colorspace=bt709"},
		{"", "tv", "setparams=range=tv"}, {"bt709", "tv", "setparams=colorspace=bt709:range=tv"},
	} {
		if got := setparams(tc.space, tc.rng); got != tc.want {
			t.Errorf("setparams(%q, %q) = %q, want %q", tc.space, tc.rng, got, tc.want)
		}
	}
}

// TestYUVCheck checks that the runtime check accepts the conversion that
// matches FFmpeg and refuses one that does not (the wrong matrix), for a
// size with a partial vector block.
func TestYUVCheck(t *testing.T) {
	d := needFFmpeg(t)
	ctx := context.Background()
	for _, key := range []yuvKey{{w: 640, h: 480}, {w: 34, h: 22, space: "bt709", rng: "tv"}} {
		if !d.matches(ctx, key, yuvFor(key.space, key.rng)) {
			t.Errorf("%+v: the matching conversion was refused", key)
		}
		wrong := limitedYUV("wrong", matrixBT709)
		if key.space == "bt709" {
			wrong = limitedYUV("wrong", matrixBT601)
		}
		if d.matches(ctx, key, wrong) {
			t.Errorf("%+v: the wrong matrix was accepted", key)
		}
	}
	if d.Probe == "" {
		t.Fatal("NewFFmpeg found no ffprobe beside ffmpeg")
	}
}

// TestFFmpegYUVFrames decodes videos with frames through the pipe as YUV
// (the default where it applies) and as RGB24 from FFmpeg, and checks that
// every frame's pixels are identical; a yuv444p video comes as RGB24.
func TestFFmpegYUVFrames(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	tests := []struct {
		name, codec, pixFmt string
		w, h                int
		yuv                 bool
		extra               []string
	}{
		{"h264", "libx264", "yuv420p", 64, 48, true, nil},
		{"av1", "libsvtav1", "yuv420p", 64, 64, true, nil},
		{"partial block", "libx264", "yuv420p", 34, 22, true, nil},
		{"bt709", "libx264", "yuv420p", 64, 48, true, []string{"-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"}},
		{"full range", "libx264", "yuv420p", 64, 48, false, []string{"-color_range", "pc"}},
		{"444", "libx264", "yuv444p", 32, 16, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".mp4")
			args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
				"-i", "testsrc2=size=" + itoa(tc.w) + "x" + itoa(tc.h) + ":rate=30", "-frames:v", "12",
				"-c:v", tc.codec, "-pix_fmt", tc.pixFmt, "-g", "5"}
			if tc.codec == "libsvtav1" {
				args = append(args, "-svtav1-params", "verbose=0")
			}
			args = append(args, tc.extra...)
			if out, err := exec.Command("ffmpeg", append(args, p)...).CombinedOutput(); err != nil {
				t.Fatalf("ffmpeg: %v: %s", err, out)
			}
			decode := func(rgb bool) (frames [][]byte, yuv int) {
				dec := &FFmpeg{Path: d.Path, Probe: d.Probe, RGB24: rgb, MaxIdle: -1}
				err := dec.Decode(context.Background(), Segment{Path: p, Start: 0, End: 100}, func(f Frame) error {
					if f.YUV != nil {
						yuv++
					}
					chw := make([]byte, 3*f.Width*f.Height)
					ToCHW(chw, f)
					frames = append(frames, chw)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return frames, yuv
			}
			got, yuv := decode(false)
			want, rgbYUV := decode(true)
			if len(got) != 12 || len(want) != 12 {
				t.Fatalf("%d and %d frames, want 12", len(got), len(want))
			}
			if rgbYUV != 0 {
				t.Fatalf("RGB24 set: %d YUV frames", rgbYUV)
			}
			if tc.yuv != (yuv == 12) || (!tc.yuv && yuv != 0) {
				t.Fatalf("%d of 12 frames came as YUV, want yuv=%v", yuv, tc.yuv)
			}
			for i := range got {
				if string(got[i]) != string(want[i]) {
					t.Fatalf("frame %d: YUV-converted pixels differ from FFmpeg's RGB24", i)
				}
			}
		})
	}
}
