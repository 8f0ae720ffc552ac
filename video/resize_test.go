package video

import (
	"bytes"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// pattern is the test image the golden outputs were computed from: c planes
// of h×w bytes, byte i = (37 i + 11 (i div w)) mod 256.
func pattern(c, h, w int) []byte {
	b := make([]byte, c*h*w)
	for i := range b {
		b[i] = byte((i*37 + i/w*11) % 256)
	}
	return b
}

// TestResizeMatchesTorchvision compares resizePlanes with outputs of
// torchvision 0.26 / torch 2.11 (x86, AVX512):
// torchvision.transforms.v2.functional.resize(torch.from_numpy(pattern),
// [H, W], antialias=True).numpy().tobytes().hex(). The interop test
// (python/interop/test_camera_resize.py) checks whole datasets against the
// live torchvision.
func TestResizeMatchesTorchvision(t *testing.T) {
	tests := []struct {
		name           string
		sh, sw, dh, dw int
		want           string
	}{
		{"halve", 6, 8, 3, 4, "3e81ab5b9591736da758829470a1944fac6b698d756ea6689d8f6671995d8788689ca14c"},
		{"shrink by 7/3", 5, 7, 2, 3, "2e7dc84a99a674b66990a43db87358ae4474"},
		{"enlarge", 2, 3, 5, 7, "0005152535454a0c1121314151563d4252627282876e738393a3b3b87a7f8f9fafbfc4f4d5771929393ee7cb782535454ab1a47d5666767b7b7d828797a7ac6e738393a3b3b8e8c96b0d1d2d32dbbf6c1929393ea598714a5a6a6f6f71767b8b9ba06267778797a7ac"},
		{"width only", 6, 6, 6, 3, "1a5d9f714688c84f71b1385abe8143a7ca5090b33979bc9062a5794b8ed03477b91d60a274498bcb5274b43b5dc18446aacd5393b63c"},
		{"height only", 9, 4, 4, 4, "51769b52944f748664836388a76d5f847a9f9157769b7b9a788aaf6aac6388ad7fa45b80587d8f7c8c6c917e76688db2"},
		{"shrink one, enlarge the other", 8, 3, 3, 8, "7371685f62707e80aba5836157657375999474554c5a686a8d8f9dab9f7b56507b7d8b999070514b696b798791989e9f5d5f6d7b8997a5a74b4d5b69778593958381736565738183"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := hex.DecodeString(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 3*tc.dh*tc.dw)
			resizePlanes(pattern(3, tc.sh, tc.sw), 3, tc.sh, tc.sw, got, tc.dh, tc.dw)
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %x\nwant %x", got, want)
			}
		})
	}
}

// floatResize is the same filter in float64 without fixed point, the
// reference for the properties below.
func floatResize(src []byte, sh, sw, dh, dw int) []float64 {
	axis := func(in, out int) [][2][]float64 { // per output: indices, weights
		scale := float64(in) / float64(out)
		support, inv := 1.0, 1.0
		if scale >= 1 {
			support, inv = scale, 1/scale
		}
		res := make([][2][]float64, out)
		for i := range res {
			center := scale * (float64(i) + 0.5)
			var idx, ws []float64
			total := 0.0
			for j := max(int(center-support+0.5), 0); j < min(int(center+support+0.5), in); j++ {
				w := max(0, 1-math.Abs((float64(j)-center+0.5)*inv))
				idx, ws, total = append(idx, float64(j)), append(ws, w), total+w
			}
			for k := range ws {
				ws[k] /= total
			}
			res[i] = [2][]float64{idx, ws}
		}
		return res
	}
	h, v := axis(sw, dw), axis(sh, dh)
	out := make([]float64, dh*dw)
	for y := range dh {
		for x := range dw {
			s := 0.0
			for a, yy := range v[y][0] {
				for b, xx := range h[x][0] {
					s += v[y][1][a] * h[x][1][b] * float64(src[int(yy)*sw+int(xx)])
				}
			}
			out[y*dw+x] = s
		}
	}
	return out
}

// TestResizeProperties: on random planes of random sizes the fixed-point
// result is within 1 level of the exact filter (per pass rounding) and a
// constant plane stays constant.
func TestResizeProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		sh, sw, dh, dw := 1+rng.IntN(40), 1+rng.IntN(40), 1+rng.IntN(40), 1+rng.IntN(40)
		src := make([]byte, sh*sw)
		for j := range src {
			src[j] = byte(rng.IntN(256))
		}
		got := make([]byte, dh*dw)
		resizePlanes(src, 1, sh, sw, got, dh, dw)
		want := floatResize(src, sh, sw, dh, dw)
		for j, g := range got {
			if d := math.Abs(float64(g) - want[j]); d > 1.5 {
				t.Fatalf("%dx%d -> %dx%d: pixel %d is %d, exact filter %.2f", sh, sw, dh, dw, j, g, want[j])
			}
		}
		c := byte(rng.IntN(256))
		for j := range src {
			src[j] = c
		}
		resizePlanes(src, 1, sh, sw, got, dh, dw)
		for j, g := range got {
			if g != c {
				t.Fatalf("%dx%d -> %dx%d: constant %d became %d at %d", sh, sw, dh, dw, c, g, j)
			}
		}
	}
}

// TestDecodeImageResize: with resize an image of any size becomes the
// camera's size (its own size: unchanged); without, a size mismatch is an
// error that names --resize.
func TestDecodeImageResize(t *testing.T) {
	const w, h = 8, 6
	src := image.NewNRGBA(image.Rect(0, 0, w, h))
	planes := pattern(3, h, w)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := y*w + x
			src.SetNRGBA(x, y, color.NRGBA{planes[p], planes[w*h+p], planes[2*w*h+p], 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, src); err != nil {
		t.Fatal(err)
	}
	halve, _ := hex.DecodeString("3e81ab5b9591736da758829470a1944fac6b698d756ea6689d8f6671995d8788689ca14c")
	tests := []struct {
		name    string
		cam     Camera
		resize  bool
		want    []byte
		wantErr string
	}{
		{"resized as torchvision", Camera{Key: "k", C: 3, H: 3, W: 4}, true, halve, ""},
		{"own size: unchanged", Camera{Key: "k", C: 3, H: h, W: w}, true, planes, ""},
		{"no resize: size must match", Camera{Key: "k", C: 3, H: 3, W: 4}, false, nil, "use --resize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, tc.cam.FrameBytes())
			err := decodeImage(buf.Bytes(), true, tc.cam, tc.resize, dst)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, tc.want) {
				t.Fatalf("got  %x\nwant %x", dst, tc.want)
			}
		})
	}
}

// BenchmarkResizePlanes: one 480×640 RGB frame to 224×224 (the usual
// --resize of a LeRobot camera).
func BenchmarkResizePlanes(b *testing.B) {
	src := pattern(3, 480, 640)
	dst := make([]byte, 3*224*224)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		resizePlanes(src, 3, 480, 640, dst, 224, 224)
	}
}
