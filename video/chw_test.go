package video

import (
	"math/rand/v2"
	"testing"
)

// chwReference is the byte-by-byte transpose the fast paths must match.
func chwReference(f Frame) []byte {
	n := f.Width * f.Height
	out := make([]byte, 3*n)
	for p := range n {
		for c := range 3 {
			out[c*n+p] = f.Pix[3*p+c]
		}
	}
	return out
}

// TestToCHWPaths: the vector path (SSSE3 on amd64, where the CPU has it)
// and the portable path give the reference bytes for frame sizes around
// the 16- and 8-pixel block edges, and neither writes past 3×W×H bytes.
func TestToCHWPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][2]int{{1, 1}, {7, 1}, {8, 1}, {15, 1}, {16, 1}, {17, 1}, {31, 1}, {32, 1}, {33, 1},
		{5, 3}, {16, 3}, {47, 5}, {640, 480}, {641, 479}}
	for _, wh := range sizes {
		f := Frame{Width: wh[0], Height: wh[1], Pix: make([]byte, 3*wh[0]*wh[1])}
		for i := range f.Pix {
			f.Pix[i] = byte(rng.Uint32())
		}
		want := chwReference(f)
		for _, vector := range []bool{false, true} {
			dst := make([]byte, len(want)+16)
			for i := range dst {
				dst[i] = 0xAB
			}
			toCHW(dst[:len(want)], f, vector && hasSSSE3)
			if string(dst[:len(want)]) != string(want) {
				t.Fatalf("%dx%d vector=%v: planes differ from the reference", wh[0], wh[1], vector)
			}
			for i, c := range dst[len(want):] {
				if c != 0xAB {
					t.Fatalf("%dx%d vector=%v: wrote byte %d past the frame", wh[0], wh[1], vector, len(want)+i)
				}
			}
		}
	}
	if !hasSSSE3 {
		t.Log("no vector transpose on this CPU/architecture: only the portable path was compared")
	}
}

// FuzzToCHW: whatever the pixels and size, both paths equal the reference.
func FuzzToCHW(f *testing.F) {
	f.Add(uint8(16), uint8(1), []byte("0123456789abcdef0123456789abcdef0123456789abcdef"))
	f.Add(uint8(3), uint8(2), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Fuzz(func(t *testing.T, w, h uint8, seed []byte) {
		if w == 0 || h == 0 || len(seed) == 0 {
			return
		}
		fr := Frame{Width: int(w), Height: int(h), Pix: make([]byte, 3*int(w)*int(h))}
		for i := range fr.Pix {
			fr.Pix[i] = seed[i%len(seed)] + byte(i/len(seed))
		}
		want := chwReference(fr)
		for _, vector := range []bool{false, true} {
			dst := make([]byte, len(want))
			toCHW(dst, fr, vector && hasSSSE3)
			if string(dst) != string(want) {
				t.Fatalf("%dx%d vector=%v: planes differ from the reference", w, h, vector)
			}
		}
	})
}

// BenchmarkToCHWPortable is BenchmarkToCHW without the vector code.
func BenchmarkToCHWPortable(b *testing.B) {
	f := Frame{Width: 640, Height: 480, Pix: make([]byte, 3*640*480)}
	dst := make([]byte, len(f.Pix))
	b.SetBytes(int64(len(f.Pix)))
	for b.Loop() {
		toCHW(dst, f, false)
	}
}

// BenchmarkToCHWChunk transposes into a chunk-sized destination (64
// frames, far larger than the caches), as the pipeline does.
func BenchmarkToCHWChunk(b *testing.B) {
	f := Frame{Width: 640, Height: 480, Pix: make([]byte, 3*640*480)}
	const frames = 64
	dst := make([]byte, frames*len(f.Pix))
	for i := range dst {
		dst[i] = 1 // fault the pages in before timing
	}
	b.SetBytes(int64(len(f.Pix)))
	i := 0
	for b.Loop() {
		ToCHW(dst[i*len(f.Pix):(i+1)*len(f.Pix)], f)
		i = (i + 1) % frames
	}
}
