package video

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJPEGMatchesPIL decodes JPEG images as image features are decoded and
// compares every byte with what PIL (Pillow 12.3.0, libjpeg-turbo 3.1.4.1 —
// what LeRobot reads image features with) decoded from the same files,
// kept in testdata/jpeg/*.rgb (HWC). The images are 16×16 tiles of flat
// colour at quality 100, so every 8×8 block is flat and the inverse DCT
// is exact in any decoder: what is compared is the chroma upsampling —
// 4:2:0 and 4:2:2, at tile edges, at the image's edges, with an odd
// number of chroma columns and rows — and the YCbCr → RGB arithmetic
// (jpegconv.go). Go's own conversion is tens of levels off here.
func TestJPEGMatchesPIL(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "jpeg", "*.jpg"))
	if len(files) < 5 {
		t.Fatalf("%d test images, want 5", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".jpg") + ".rgb")
			if err != nil {
				t.Fatal(err)
			}
			img, _, err := image.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			w, h := img.Bounds().Dx(), img.Bounds().Dy()
			if len(want) != 3*w*h {
				t.Fatalf("%d reference bytes for %dx%d", len(want), w, h)
			}
			got := make([]byte, 3*w*h)
			if err := decodeImage(b, true, Camera{W: w, H: h}, false, got); err != nil {
				t.Fatal(err)
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
			m, ok := img.(*image.YCbCr)
			if !ok {
				t.Fatalf("decoded as %T, want *image.YCbCr", img)
			}
			goConv := make([]byte, 3*w*h)
			toPlanesAny(m, goConv)
			if m.SubsampleRatio != image.YCbCrSubsampleRatio444 && bytes.Equal(goConv, wantCHW) {
				t.Error("Go's own conversion matches PIL's too: the image does not test the upsampling")
			}
		})
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
