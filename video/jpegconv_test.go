package video

import (
	"bytes"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJPEGMatchesPIL decodes JPEG images as image features are decoded and
// compares every byte with what PIL (Pillow 12.3.0, libjpeg-turbo 3.1.4.1 —
// what LeRobot reads image features with) decoded from the same files,
// kept in testdata/jpeg/*.rgb (HWC). tiles*: 16×16 tiles of flat colour
// at quality 100, so every 8×8 block is flat and any decoder's inverse DCT
// is exact — they test the chroma upsampling (4:2:0, 4:2:2, tile and image
// edges, odd numbers of chroma columns and rows) and the YCbCr → RGB
// arithmetic (jpegconv.go), which Go's own conversion gets tens of levels
// wrong. photo*: gradients, a disc and noise at qualities 20–90, 4:4:4 to
// 4:2:0, an odd size, restart markers, optimized Huffman tables, gray, RGB
// components — and progressive*: progressive files (spectral selection
// and successive approximation, as libjpeg's default script writes them),
// 4:4:4 to 4:2:0, gray, odd sizes, restart markers. They test
// decodeJPEG's entropy decoding and inverse DCT (jpegdec.go), which
// image/jpeg's differs from.
func TestJPEGMatchesPIL(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "jpeg", "*.jpg"))
	if len(files) < 18 {
		t.Fatalf("%d test images, want 18", len(files))
	}
	goDiffers := false
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			img, ok, err := decodeJPEG(b)
			if !ok || err != nil {
				t.Fatalf("decodeJPEG does not take it: %v", err)
			}
			w, h := img.Bounds().Dx(), img.Bounds().Dy()
			// image/jpeg, for comparison (it refuses some files libjpeg
			// decodes: progressive with restart markers).
			goImg, _, goErr := image.Decode(bytes.NewReader(b))
			got := make([]byte, 3*w*h)
			if err := decodeImage(b, true, Camera{W: w, H: h}, false, got); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".jpg") + ".rgb")
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 3*w*h {
				t.Fatalf("%d reference bytes for %dx%d", len(want), w, h)
			}
			wantCHW := hwcToCHW(want, w, h)
			worst, bad := 0, 0
			for i := range got {
				d := int(got[i]) - int(wantCHW[i])
				worst = max(worst, d, -d)
				if d != 0 {
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ from PIL's, by up to %d", bad, len(got), worst)
			}
			// What image/jpeg would have given: Go's conversion for the
			// tiles, its inverse DCT (with libjpeg's conversion) for the
			// photos.
			if goErr != nil {
				return
			}
			alt := make([]byte, 3*w*h)
			m, ycc := goImg.(*image.YCbCr)
			if strings.HasPrefix(filepath.Base(f), "tiles") {
				toPlanesAny(goImg, alt)
				if ycc && m.SubsampleRatio != image.YCbCrSubsampleRatio444 && bytes.Equal(alt, wantCHW) {
					t.Error("Go's own conversion matches PIL's too: the image does not test the upsampling")
				}
			} else if ycc && ycbcrToPlanes(m, alt) && !bytes.Equal(alt, wantCHW) {
				goDiffers = true
			}
		})
	}
	if !goDiffers {
		t.Error("image/jpeg's inverse DCT matched PIL's on every photo: they do not test decodeJPEG's")
	}
}

// TestUpsampleEdges: one and two stored samples (the end cases of
// libjpeg's loops) — worked by hand from jdsample.c's formulas.
func TestUpsampleEdges(t *testing.T) {
	out := make([]byte, 4)
	upsampleH(out, []byte{10, 20}, 2)
	// out[0]=in[0]; out[1]=(3·10+20+2)>>2=13; out[2]=(3·20+10+1)>>2=17; out[3]=in[1]
	if want := []byte{10, 13, 17, 20}; !bytes.Equal(out, want) {
		t.Errorf("h2v1 %v, want %v", out, want)
	}
	upsampleHV(out, []byte{10, 20}, []byte{30, 40})
	// column sums 3·10+30=60, 3·20+40=100: (60·4+8)>>4=15, (60·3+100+7)>>4=17,
	// (100·3+60+8)>>4=23, (100·4+7)>>4=25
	if want := []byte{15, 17, 23, 25}; !bytes.Equal(out, want) {
		t.Errorf("h2v2 %v, want %v", out, want)
	}
	upsampleHV(out[:2], []byte{9}, []byte{13})
	// sum 40: (160+8)>>4=10, (160+7)>>4=10
	if want := []byte{10, 10}; !bytes.Equal(out[:2], want) {
		t.Errorf("h2v2, one sample %v, want %v", out[:2], want)
	}
}

// FuzzDecodeJPEG: decodeJPEG never panics or hangs on any bytes; what it
// decodes has its header's size, and what it refuses to take image/jpeg
// decodes instead.
func FuzzDecodeJPEG(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "jpeg", "*.jpg"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		img, ok, err := decodeJPEGLimit(data, 1<<16)
		if !ok || err != nil {
			return
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err == nil && (cfg.Width != img.Bounds().Dx() || cfg.Height != img.Bounds().Dy()) {
			t.Fatalf("decoded %v, the header says %dx%d", img.Bounds(), cfg.Width, cfg.Height)
		}
	})
}

// BenchmarkDecodeJPEG decodes a 480×640 4:2:0 JPEG into CHW planes:
// decodeJPEG (libjpeg's arithmetic, what image features use) against
// image/jpeg with the same colour conversion.
func BenchmarkDecodeJPEG(b *testing.B) {
	const w, h = 640, 480
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			i := src.PixOffset(x, y)
			src.Pix[i], src.Pix[i+1], src.Pix[i+2], src.Pix[i+3] = byte(x^y), byte(3*x+y), byte(x*y>>5), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	dst := make([]byte, 3*w*h)
	b.Run("libjpeg", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			img, ok, err := decodeJPEG(data)
			if !ok || err != nil {
				b.Fatal(ok, err)
			}
			toPlanes(img, dst)
		}
	})
	b.Run("image/jpeg", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			img, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			toPlanes(img, dst)
		}
	})
}
