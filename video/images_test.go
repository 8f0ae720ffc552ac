package video

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestDecodeImage(t *testing.T) {
	const w, h = 5, 3
	src := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			src.SetNRGBA(x, y, color.NRGBA{uint8(40 * x), uint8(70 * y), uint8(10*x + 3*y), 255})
		}
	}
	var pngBuf, jpgBuf bytes.Buffer
	if err := png.Encode(&pngBuf, src); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgBuf, src, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	cam := Camera{Key: "observation.images.top", C: 3, H: h, W: w}
	jpgImage, err := jpeg.Decode(bytes.NewReader(jpgBuf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// A colour JPEG's planes are converted as libjpeg converts them
	// (jpegconv.go; TestJPEGMatchesPIL checks that against PIL).
	jpgPlanes := make([]byte, 3*w*h)
	if !ycbcrToPlanes(jpgImage.(*image.YCbCr), jpgPlanes) {
		t.Fatal("Go's JPEG encoder wrote a subsampling ycbcrToPlanes does not take")
	}
	jpgWant := image.NewNRGBA(image.Rect(0, 0, w, h))
	for p := range w * h {
		jpgWant.SetNRGBA(p%w, p/w, color.NRGBA{jpgPlanes[p], jpgPlanes[w*h+p], jpgPlanes[2*w*h+p], 255})
	}
	tests := []struct {
		name    string
		data    []byte
		present bool
		cam     Camera
		want    image.Image // the expected pixels
		wantErr string
	}{
		{"png exact", pngBuf.Bytes(), true, cam, src, ""},
		{"jpeg converted as libjpeg", jpgBuf.Bytes(), true, cam, jpgWant, ""},
		{"null", nil, false, cam, nil, "no image"},
		{"garbage", []byte("not an image"), true, cam, nil, "decoding image"},
		{"truncated png", pngBuf.Bytes()[:20], true, cam, nil, "decoding image"},
		{"wrong size", pngBuf.Bytes(), true, Camera{Key: "k", C: 3, H: 4, W: 5}, nil, "info.json says 5x4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, tc.cam.FrameBytes())
			err := decodeImage(tc.data, tc.present, tc.cam, false, dst)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := w * h
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					want := color.NRGBAModel.Convert(tc.want.At(x, y)).(color.NRGBA)
					p := y*w + x
					for c, v := range []uint8{want.R, want.G, want.B} {
						if dst[c*n+p] != v {
							t.Fatalf("pixel (%d,%d) channel %d: %d, want %d", x, y, c, dst[c*n+p], v)
						}
					}
				}
			}
		})
	}
}

// pngHeader returns a PNG holding only its signature, an IHDR chunk of
// w×h 8-bit pixels of colour type ct, and a small IDAT of zlib data
// that inflates to rows of zeros: the shape of a decompression bomb (a
// few hundred bytes declaring any size).
func pngHeader(t testing.TB, w, h uint32, ct byte) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		b.Write(n[:])
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		b.WriteString(typ)
		b.Write(data)
		binary.BigEndian.PutUint32(n[:], c.Sum32())
		b.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, ct
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 64<<10))
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

// TestImageBomb: an image whose header declares a size that disagrees
// with info.json, or more pixels than PIL accepts, is refused from its
// header, before its pixels are allocated (issue 25 item 7: a 560 KB
// 24000x24000 PNG took 605 MB, and 4 GB with --resize).
func TestImageBomb(t *testing.T) {
	cam := Camera{Key: "observation.image", C: 3, H: 48, W: 64}
	tests := []struct {
		name    string
		data    []byte
		resize  bool
		wantErr string
	}{
		{"24000x24000 gray, no resize", pngHeader(t, 24000, 24000, 0), false, "info.json says 64x48"},
		{"24000x24000 gray, resize", pngHeader(t, 24000, 24000, 0), true, "decompression bomb"},
		{"just over PIL's limit, resize", pngHeader(t, 2*MaxImagePixels/1000+1, 1000, 0), true, "more than twice PIL's MAX_IMAGE_PIXELS"},
		{"2000x2000 rgb, no resize", pngHeader(t, 2000, 2000, 2), false, "png image is 2000x2000, info.json says 64x48"},
		{"zero width", pngHeader(t, 0, 48, 2), true, "decoding image header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, cam.FrameBytes())
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := decodeImage(tc.data, true, cam, tc.resize, dst)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Fatalf("refusing it allocated %d bytes", n)
			}
		})
	}
	// Under the limit with --resize: decoded (and its stated size is
	// what it has).
	ok := pngHeader(t, 100, 60, 0)
	if err := CheckImageHeader(ok, cam, true); err != nil {
		t.Fatalf("100x60 with resize: %v", err)
	}
}

// FuzzDecodeImage: any bytes give an error or a frame, never a panic,
// and never more than the frame's worth of pixels without resize.
func FuzzDecodeImage(f *testing.F) {
	f.Add(pngHeader(f, 4, 3, 2), false)
	f.Add(pngHeader(f, 40000, 40000, 6), true)
	f.Add([]byte("\x89PNG\r\n\x1a\n"), false)
	f.Add([]byte{0xff, 0xd8, 0xff, 0xc0, 0, 17, 8, 0xff, 0xff, 0xff, 0xff, 3}, true)
	// Colour JPEGs through the libjpeg conversion (jpegconv.go): one and
	// three columns of chroma, odd sizes, 4:2:0 to 4:4:4.
	for _, sz := range [][2]int{{1, 1}, {2, 1}, {1, 3}, {5, 3}, {4, 3}} {
		img := image.NewRGBA(image.Rect(0, 0, sz[0], sz[1]))
		for i := range img.Pix {
			img.Pix[i] = byte(i * 37)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, nil); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes(), true)
	}
	jpgs, _ := filepath.Glob(filepath.Join("testdata", "jpeg", "*.jpg"))
	for _, p := range jpgs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
	}
	cam := Camera{Key: "k", C: 3, H: 3, W: 4}
	f.Fuzz(func(t *testing.T, data []byte, resize bool) {
		if resize {
			// Sizes up to PIL's limit are accepted with resize: keep
			// the fuzzer's memory small.
			if c, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && int64(c.Width)*int64(c.Height) > 1<<20 {
				t.Skip("large image")
			}
		}
		dst := make([]byte, cam.FrameBytes())
		_ = decodeImage(data, true, cam, resize, dst)
	})
}
