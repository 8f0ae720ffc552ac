package video

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"
)

func smallPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCheckImage: validate's image check refuses what Fill refuses
// (issue 25 item 11: truncated, garbage, empty, null or wrong-size PNG),
// the cheap part without decoding the pixels.
func TestCheckImage(t *testing.T) {
	good := smallPNG(t, 8, 6)
	cam := Camera{Key: "observation.image", C: 3, H: 6, W: 8}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-20] ^= 0x55 // in the IDAT data
	tests := []struct {
		name    string
		data    []byte
		present bool
		want    string // "" ok
	}{
		{"good", good, true, ""},
		{"good, trailing bytes", append(bytes.Clone(good), "junk"...), true, ""},
		{"null", nil, false, "no image (null)"},
		{"empty", []byte{}, true, "decoding image header"},
		{"garbage", []byte("garbage garbage garbage"), true, "decoding image header"},
		{"truncated", good[:len(good)-30], true, "PNG truncated"},
		{"no IEND", good[:len(good)-12], true, "no IEND"},
		{"flipped byte", flipped, true, "CRC mismatch"},
		{"wrong size", smallPNG(t, 8, 7), true, "png image is 8x7, info.json says 8x6"},
		{"bomb", pngHeader(t, 24000, 24000, 0), true, "info.json says 8x6"},
	}
	for _, tc := range tests {
		for _, deep := range []bool{false, true} {
			err := CheckImage(tc.data, tc.present, cam, deep)
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s (deep %v): %v", tc.name, deep, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (deep %v): error %v, want %q", tc.name, deep, err, tc.want)
			}
			// Whatever CheckImage refuses, Fill refuses.
			if tc.present && decodeImage(tc.data, true, cam, false, make([]byte, cam.FrameBytes())) == nil {
				t.Errorf("%s: Fill's decoder accepts it", tc.name)
			}
		}
	}
}

// FuzzCheckPNG: the chunk walk never panics, and what it accepts with a
// decodable header Go's decoder does not refuse for structure (it may
// still refuse the pixel data, which only decoding tells: --deep).
func FuzzCheckPNG(f *testing.F) {
	f.Add(smallPNG(f, 3, 2))
	f.Add(pngHeader(f, 5, 5, 2))
	f.Add([]byte(pngSignature + "\x00\x00\x00\x0dIHDR"))
	f.Add([]byte(pngSignature + "\xff\xff\xff\xffIDAT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckPNG(b)
	})
}
