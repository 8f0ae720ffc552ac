package video

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// exhaustiveYUV returns frames (w×h yuv420p, w = h = 512) in which every
// (Y, U, V) triple occurs: chroma sample k of frame f is (U, V) = (k>>8,
// k&255) and its four luma samples are 4f..4f+3.
func exhaustiveYUV() (frames [][]byte, w, h int) {
	w, h = 512, 512
	cw := w / 2
	for f := range 64 {
		buf := make([]byte, yuvSize(w, h))
		ys, us, vs := buf[:w*h], buf[w*h:w*h+cw*cw], buf[w*h+cw*cw:]
		for k := range cw * cw {
			us[k], vs[k] = byte(k>>8), byte(k)
			row, col := k/cw, k%cw
			for d := range 4 {
				ys[(2*row+d/2)*w+2*col+d%2] = byte(4*f + d)
			}
		}
		frames = append(frames, buf)
	}
	return frames, w, h
}

// ffmpegRGB converts yuv420p frames to RGB24 with the ffmpeg executable,
// the way lrstream's decoder asks it to (-sws_flags bilinear), with the
// frames tagged with colorspace space and range rng.
func ffmpegRGB(t testing.TB, frames [][]byte, w, h int, space, rng string) []byte {
	t.Helper()
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", fmt.Sprintf("%dx%d", w, h), "-i", "pipe:0"}
	if space != "" {
		args = append(args, "-vf", fmt.Sprintf("setparams=colorspace=%s:range=%s", space, rng))
	}
	args = append(args, "-sws_flags", "bilinear", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	cmd := exec.Command("ffmpeg", args...)
	cmd.Stdin = bytes.NewReader(bytes.Join(frames, nil))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, stderr.String())
	}
	return out
}

// TestYUVMatchesFFmpeg checks the Go conversion against FFmpeg's own for
// every (Y, U, V) triple, for each matrix lrstream converts itself.
func TestYUVMatchesFFmpeg(t *testing.T) {
	needFFmpeg(t)
	frames, w, h := exhaustiveYUV()
	for _, tc := range []struct{ space, rng string }{{"", ""}, {"bt470bg", "tv"}, {"smpte170m", "tv"}, {"bt709", "tv"}} {
		t.Run(tc.space, func(t *testing.T) {
			conv := yuvFor(tc.space, tc.rng)
			want := ffmpegRGB(t, frames, w, h, tc.space, tc.rng)
			fb := 3 * w * h
			if len(want) != fb*len(frames) {
				t.Fatalf("ffmpeg wrote %d bytes, want %d", len(want), fb*len(frames))
			}
			got := make([]byte, fb)
			ref := make([]byte, fb)
			for i, f := range frames {
				for _, path := range availableYUVPaths() {
					conv.toCHWPath(got, f, w, h, path)
					toCHW(ref, Frame{Width: w, Height: h, Pix: want[i*fb : (i+1)*fb]}, false)
					if !bytes.Equal(got, ref) {
						n := w * h
						for p := range fb {
							if got[p] != ref[p] {
								px := p % n
								t.Fatalf("%s (%s): frame %d pixel (%d,%d) channel %d: %d, ffmpeg %d (Y %d U %d V %d)", conv.Name, path, i, px%w, px/w, p/n, got[p], ref[p],
									f[px], f[n+(px/w/2)*(w/2)+px%w/2], f[n+n/4+(px/w/2)*(w/2)+px%w/2])
							}
						}
					}
				}
			}
		})
	}
}

// allYUVPaths are every row conversion the package has, on any CPU.
var allYUVPaths = []yuvPath{yuvScalar, yuvSSE2, yuvAVX2}

// availableYUVPaths returns the row conversions this CPU runs.
func availableYUVPaths() []yuvPath {
	var ps []yuvPath
	for _, p := range allYUVPaths {
		if yuvPathAvailable(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// skipYUVPath skips t (a test or benchmark) when this CPU cannot run p,
// saying why.
func skipYUVPath(t testing.TB, p yuvPath) {
	t.Helper()
	if yuvPathAvailable(p) {
		return
	}
	if p == yuvAVX2 && runtime.GOARCH == "amd64" {
		t.Skipf("%s path not tested: this CPU lacks AVX2 (cpu.X86.HasAVX2 false)", p)
	}
	t.Skipf("%s path not tested: no %s code on %s", p, p, runtime.GOARCH)
}

// randomYUV returns a w×h yuv420p frame of random bytes.
func randomYUV(rng *rand.Rand, w, h int) []byte {
	src := make([]byte, yuvSize(w, h))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	return src
}

// yuvTestSizes are the frame sizes the paths are compared on: every even
// width up to 70 (every tail after 32- and 16-pixel blocks, none to two
// whole 32-pixel blocks), with 2 and 4 rows (one and two chroma rows), and
// camera and model-input sizes.
func yuvTestSizes() [][2]int {
	var sizes [][2]int
	for w := 2; w <= 70; w += 2 {
		sizes = append(sizes, [2]int{w, 2}, [2]int{w, 4})
	}
	return append(sizes, [2]int{96, 6}, [2]int{222, 4}, [2]int{224, 224}, [2]int{640, 480}, [2]int{642, 6}, [2]int{1920, 4})
}

// TestYUVPathsMatchScalar compares every vector row conversion with the
// scalar loop, byte for byte, for every conversion the package knows, on
// random frames of every size in yuvTestSizes. The vector output buffer
// starts filled with another byte than the scalar one, and 64 guard bytes
// after the planes must stay untouched: a pixel left unwritten or a write
// past the end fails.
func TestYUVPathsMatchScalar(t *testing.T) {
	const guard = 64
	for _, path := range allYUVPaths[1:] {
		t.Run(path.String(), func(t *testing.T) {
			skipYUVPath(t, path)
			rng := rand.New(rand.NewPCG(1, uint64(path)))
			for _, name := range yuvNames() {
				conv := yuvByName(name)
				for _, wh := range yuvTestSizes() {
					w, h := wh[0], wh[1]
					src := randomYUV(rng, w, h)
					want, got := make([]byte, 3*w*h), make([]byte, 3*w*h+guard)
					for i := range got {
						got[i] = 0xa5
					}
					conv.toCHWPath(want, src, w, h, yuvScalar)
					conv.toCHWPath(got[:3*w*h], src, w, h, path)
					if p := firstDiff(got[:3*w*h], want); p >= 0 {
						n := w * h
						t.Fatalf("%s %dx%d: pixel (%d,%d) channel %d: %s %d, scalar %d", name, w, h, p%n%w, p%n/w, p/n, path, got[p], want[p])
					}
					for i, v := range got[3*w*h:] {
						if v != 0xa5 {
							t.Fatalf("%s %dx%d: %s wrote guard byte %d after the planes", name, w, h, path, i)
						}
					}
				}
			}
		})
	}
}

// firstDiff returns the first index where a and b (same length) differ,
// or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestYUVNames checks that every conversion yuvFor returns is one of
// yuvNames (the set TestYUVPathsMatchScalar covers) and that yuvByName
// knows each name.
func TestYUVNames(t *testing.T) {
	known := map[string]bool{}
	for _, name := range yuvNames() {
		conv := yuvByName(name)
		if conv == nil || conv.Name != name {
			t.Fatalf("yuvByName(%q) = %v", name, conv)
		}
		known[name] = true
	}
	for _, tc := range []struct{ space, rng string }{
		{"", ""}, {"unknown", "unknown"}, {"bt470bg", "tv"}, {"smpte170m", "tv"}, {"bt709", "tv"}, {"bt709", ""},
	} {
		conv := yuvFor(tc.space, tc.rng)
		if conv == nil || !known[conv.Name] {
			t.Errorf("yuvFor(%q, %q) = %v, not one of %v", tc.space, tc.rng, conv, yuvNames())
		}
	}
	for _, tc := range []struct{ space, rng string }{{"bt709", "pc"}, {"bt2020nc", "tv"}, {"", "pc"}} {
		if conv := yuvFor(tc.space, tc.rng); conv != nil {
			t.Errorf("yuvFor(%q, %q) = %s, want none (FFmpeg converts)", tc.space, tc.rng, conv.Name)
		}
	}
}

// TestYUVToCHWRejects checks ToCHW's errors on odd sizes and short
// buffers.
func TestYUVToCHWRejects(t *testing.T) {
	conv := yuvFor("bt709", "tv")
	for _, tc := range []struct {
		name        string
		w, h        int
		dst, src    int
		wantErrPart string
	}{
		{"odd width", 3, 2, 3 * 3 * 2, 27, "must be even"},
		{"odd width 641", 641, 2, 3 * 641 * 2, yuvSize(642, 2), "must be even"},
		{"odd height", 4, 3, 3 * 4 * 3, 27, "must be even"},
		{"zero", 0, 2, 0, 0, "must be even"},
		{"short frame", 4, 2, 3 * 4 * 2, 5, "bytes in"},
		{"short output", 640, 2, 3*640*2 - 1, yuvSize(640, 2), "bytes in"},
	} {
		err := conv.ToCHW(make([]byte, tc.dst), make([]byte, tc.src), tc.w, tc.h)
		if err == nil || !strings.Contains(err.Error(), tc.wantErrPart) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.wantErrPart)
		}
	}
	w, h := 642, 4
	src := randomYUV(rand.New(rand.NewPCG(2, 2)), w, h)
	got, want := make([]byte, 3*w*h), make([]byte, 3*w*h)
	if err := conv.ToCHW(got, src, w, h); err != nil {
		t.Fatal(err)
	}
	conv.toCHWPath(want, src, w, h, yuvScalar)
	if !bytes.Equal(got, want) {
		t.Fatalf("ToCHW (%s) and the scalar loop differ", yuvBestPath)
	}
}

// BenchmarkYUVToCHW converts whole frames (a 480×640 camera frame, a
// 224×224 model input) through each row conversion; bytes/s counts the
// RGB bytes written.
func BenchmarkYUVToCHW(b *testing.B) {
	for _, size := range []struct {
		name string
		w, h int
	}{{"480x640", 640, 480}, {"224x224", 224, 224}} {
		for _, path := range allYUVPaths {
			b.Run(size.name+"/"+path.String(), func(b *testing.B) {
				skipYUVPath(b, path)
				conv := yuvFor("", "")
				w, h := size.w, size.h
				src := randomYUV(rand.New(rand.NewPCG(3, 3)), w, h)
				dst := make([]byte, 3*w*h)
				b.SetBytes(int64(len(dst)))
				for b.Loop() {
					conv.toCHWPath(dst, src, w, h, path)
				}
			})
		}
	}
}

// FuzzYUVToCHW compares every vector row conversion the CPU runs with the
// scalar loop, for every conversion, on any even size up to 144×8 (every
// combination of 32- and 16-pixel blocks and tail) and any content.
func FuzzYUVToCHW(f *testing.F) {
	f.Add(uint8(16), uint8(2), []byte{16, 235, 128, 0, 255})
	f.Add(uint8(34), uint8(4), []byte{1, 2, 3})
	f.Add(uint8(23), uint8(1), []byte{0, 255})
	f.Add(uint8(71), uint8(3), []byte{255, 0, 128, 7})
	f.Fuzz(func(t *testing.T, w8, h8 uint8, seed []byte) {
		w, h := 2*(int(w8)%72+1), 2*(int(h8)%4+1)
		if len(seed) == 0 {
			seed = []byte{0}
		}
		src := make([]byte, yuvSize(w, h))
		for i := range src {
			src[i] = seed[i%len(seed)] + byte(i/len(seed))
		}
		for _, name := range yuvNames() {
			conv := yuvByName(name)
			want := make([]byte, 3*w*h)
			conv.toCHWPath(want, src, w, h, yuvScalar)
			for _, path := range availableYUVPaths()[1:] {
				got := make([]byte, 3*w*h)
				conv.toCHWPath(got, src, w, h, path)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s %dx%d: %s and scalar differ", name, w, h, path)
				}
			}
		}
	})
}
