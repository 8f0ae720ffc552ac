package video

import (
	"bytes"
	"fmt"
	"os/exec"
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
				for _, vector := range []bool{false, true} {
					conv.toCHW(got, f, w, h, vector)
					toCHW(ref, Frame{Width: w, Height: h, Pix: want[i*fb : (i+1)*fb]}, false)
					if !bytes.Equal(got, ref) {
						n := w * h
						for p := range fb {
							if got[p] != ref[p] {
								px := p % n
								t.Fatalf("%s (vector %v): frame %d pixel (%d,%d) channel %d: %d, ffmpeg %d (Y %d U %d V %d)", conv.Name, vector, i, px%w, px/w, p/n, got[p], ref[p],
									f[px], f[n+(px/w/2)*(w/2)+px%w/2], f[n+n/4+(px/w/2)*(w/2)+px%w/2])
							}
						}
					}
				}
			}
		})
	}
}

// TestYUVVectorMatchesScalar compares the vector and scalar conversions on
// random frames of sizes with and without a partial last block.
func TestYUVVectorMatchesScalar(t *testing.T) {
	conv := yuvFor("bt709", "tv")
	for _, wh := range [][2]int{{2, 2}, {14, 2}, {16, 4}, {34, 6}, {640, 480}, {322, 10}} {
		w, h := wh[0], wh[1]
		src := make([]byte, yuvSize(w, h))
		for i := range src {
			src[i] = byte(i*131 + i/7)
		}
		a, b := make([]byte, 3*w*h), make([]byte, 3*w*h)
		conv.toCHW(a, src, w, h, false)
		conv.toCHW(b, src, w, h, true)
		if !bytes.Equal(a, b) {
			t.Fatalf("%dx%d: vector and scalar differ", w, h)
		}
	}
	if err := conv.ToCHW(make([]byte, 3*9*2), make([]byte, 27), 3, 2); err == nil {
		t.Fatal("odd width accepted")
	}
	if err := conv.ToCHW(make([]byte, 3*4*2), make([]byte, 5), 4, 2); err == nil {
		t.Fatal("short frame accepted")
	}
}

func BenchmarkYUVToCHW(b *testing.B) {
	const w, h = 640, 480
	conv := yuvFor("", "")
	src := make([]byte, yuvSize(w, h))
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 3*w*h)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		conv.toCHW(dst, src, w, h, hasYUVVector)
	}
}

// FuzzYUVToCHW compares the vector and scalar conversions on any even
// size up to 80×8 and any content.
func FuzzYUVToCHW(f *testing.F) {
	f.Add(uint8(16), uint8(2), []byte{16, 235, 128, 0, 255})
	f.Add(uint8(34), uint8(4), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, w8, h8 uint8, seed []byte) {
		w, h := 2*(int(w8)%40+1), 2*(int(h8)%4+1)
		if len(seed) == 0 {
			seed = []byte{0}
		}
		src := make([]byte, yuvSize(w, h))
		for i := range src {
			src[i] = seed[i%len(seed)] + byte(i/len(seed))
		}
		for _, conv := range []*YUV{yuvFor("", ""), yuvFor("bt709", "tv")} {
			a, b := make([]byte, 3*w*h), make([]byte, 3*w*h)
			conv.toCHW(a, src, w, h, false)
			conv.toCHW(b, src, w, h, true)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s %dx%d: vector and scalar differ", conv.Name, w, h)
			}
		}
	})
}
