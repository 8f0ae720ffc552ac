package video

import (
	"bytes"
	"encoding/binary"
)

// LeRobot reads image features through the Hugging Face datasets library's
// Image feature, which turns an image whose EXIF data carries an
// Orientation tag the right way up (PIL.ImageOps.exif_transpose) before
// LeRobot sees it: a phone or camera JPEG stored sideways with
// Orientation 6 arrives rotated a quarter turn clockwise, its width and
// height swapped. LeRobot's own writers store no EXIF; other tools'
// images may. exifOrientation finds the tag where PIL's getexif does — a
// JPEG's first APP1 "Exif" segment, a PNG's eXIf chunk — and orientPlanes
// applies what exif_transpose applies.

// exifOrientation returns the EXIF Orientation (1–8) of an encoded JPEG
// or PNG image, 0 when it has none or it cannot be read.
func exifOrientation(b []byte) int {
	switch {
	case len(b) > 4 && b[0] == 0xFF && b[1] == 0xD8:
		for p := 2; p+4 <= len(b); {
			if b[p] != 0xFF {
				return 0
			}
			m := b[p+1]
			if m == 0xFF {
				p++
				continue
			}
			if m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7) {
				p += 2
				continue
			}
			if m == 0xDA || m == 0xD9 {
				return 0 // no EXIF before the image data
			}
			n := int(binary.BigEndian.Uint16(b[p+2:]))
			if n < 2 || p+2+n > len(b) {
				return 0
			}
			seg := b[p+4 : p+2+n]
			if m == 0xE1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
				return tiffOrientation(seg[6:])
			}
			p += 2 + n
		}
	case bytes.HasPrefix(b, []byte(pngSignature)):
		for off := len(pngSignature); off+12 <= len(b); {
			size := int64(binary.BigEndian.Uint32(b[off:]))
			typ := string(b[off+4 : off+8])
			if size > int64(len(b)-off-12) || typ == "IDAT" || typ == "IEND" {
				// PIL reads eXIf wherever it is, but one past the image data
				// is not where a writer puts it; stop at the pixels.
				return 0
			}
			if typ == "eXIf" {
				data := b[off+8 : off+8+int(size)]
				return tiffOrientation(bytes.TrimPrefix(data, []byte("Exif\x00\x00")))
			}
			off += 12 + int(size)
		}
	}
	return 0
}

// tiffOrientation reads tag 0x0112 (Orientation, a SHORT) from the first
// IFD of TIFF-structured EXIF data.
func tiffOrientation(t []byte) int {
	bo, ifd, ok := tiffHeader(t)
	if !ok || ifd < 8 || ifd+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[ifd:]))
	for i := range n {
		e := ifd + 2 + 12*i
		if e+12 > int64(len(t)) {
			return 0
		}
		if bo.Uint16(t[e:]) == 0x0112 {
			if bo.Uint16(t[e+2:]) != 3 { // SHORT
				return 0
			}
			v := int(bo.Uint16(t[e+8:]))
			if v < 1 || v > 8 {
				return 0
			}
			return v
		}
	}
	return 0
}

// orientedSize is the size of a w×h image once turned by orientation o:
// 5–8 swap width and height.
func orientedSize(o, w, h int) (int, int) {
	if o >= 5 && o <= 8 {
		return h, w
	}
	return w, h
}

// orientPlanes writes the planes (c of them, each w×h) of src into dst
// turned as exif_transpose turns an image of orientation o (2: mirrored,
// 3: upside down, 4: flipped, 5: transposed, 6: a quarter turn clockwise,
// 7: transversed, 8: a quarter turn anticlockwise); dst's planes are
// orientedSize.
func orientPlanes(dst, src []byte, c, w, h, o int) {
	ow, oh := orientedSize(o, w, h)
	for p := range c {
		s, d := src[p*w*h:(p+1)*w*h], dst[p*ow*oh:(p+1)*ow*oh]
		for y := range oh {
			for x := range ow {
				var sx, sy int
				switch o {
				case 2:
					sx, sy = w-1-x, y
				case 3:
					sx, sy = w-1-x, h-1-y
				case 4:
					sx, sy = x, h-1-y
				case 5:
					sx, sy = y, x
				case 6:
					sx, sy = y, h-1-x
				case 7:
					sx, sy = w-1-y, h-1-x
				case 8:
					sx, sy = w-1-y, x
				default:
					sx, sy = x, y
				}
				d[y*ow+x] = s[sy*w+sx]
			}
		}
	}
}
