package video

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
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
	tests := []struct {
		name    string
		data    []byte
		present bool
		cam     Camera
		want    image.Image // the expected pixels
		wantErr string
	}{
		{"png exact", pngBuf.Bytes(), true, cam, src, ""},
		{"jpeg as Go's decoder gives it", jpgBuf.Bytes(), true, cam, jpgImage, ""},
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
