package video

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestEXIFOrientation decodes a 20×12 image saved by PIL with each EXIF
// orientation 1–8, as JPEG and as PNG (eXIf chunk), and compares every
// byte with what the Hugging Face datasets library's Image feature — what
// LeRobot reads image features through — gave for the same bytes (kept in
// testdata/exif/*.rgb, HWC): turned by exif_transpose, 12×20 for 5–8.
func TestEXIFOrientation(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "exif", "o*.*g"))
	if len(files) != 16 {
		t.Fatalf("%d test images, want 16", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(f + ".rgb")
			if err != nil {
				t.Fatal(err)
			}
			o := exifOrientation(b)
			if name := filepath.Base(f); o != int(name[1]-'0') {
				t.Fatalf("orientation %d", o)
			}
			w, h := orientedSize(o, 20, 12)
			cam := Camera{W: w, H: h}
			if err := CheckImageHeader(b, cam, false); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 3*w*h)
			if err := decodeImage(b, true, cam, false, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, hwcToCHW(want, w, h)) {
				t.Errorf("pixels differ from the datasets library's (orientation %d)", o)
			}
			if o >= 5 {
				// The stored size is not the one LeRobot sees.
				if err := CheckImageHeader(b, Camera{W: 20, H: 12}, false); err == nil {
					t.Error("the unturned size passed the header check")
				}
			}
		})
	}
}

func TestTIFFOrientationMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil, []byte("II*\x00"), []byte("XX*\x00\x08\x00\x00\x00"),
		[]byte("II*\x00\xff\xff\xff\x7f"),                                                         // IFD past the end
		[]byte("II*\x00\x08\x00\x00\x00\x05\x00"),                                                 // entries past the end
		[]byte("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x09\x00\x00\x00"), // 9: not an orientation
		[]byte("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x04\x00\x01\x00\x00\x00\x06\x00\x00\x00"), // a LONG, not a SHORT
	} {
		if o := tiffOrientation(b); o != 0 {
			t.Errorf("%q: orientation %d", b, o)
		}
	}
	if o := tiffOrientation([]byte("MM\x00*\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00")); o != 6 {
		t.Errorf("big-endian orientation 6 read as %d", o)
	}
}

func FuzzEXIFOrientation(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "exif", "o*.*g"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if o := exifOrientation(b); o < 0 || o > 8 {
			t.Fatalf("orientation %d", o)
		}
	})
}
