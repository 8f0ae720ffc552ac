package video

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// tiff builds an uncompressed one-channel TIFF: vals as uint16 (bits 16)
// or float32 (bits 32), split into strips of rows rows.
func tiff(bo binary.AppendByteOrder, w, h, bits, format, samples, compression, rows int, vals []float64) []byte {
	var pix []byte
	for _, v := range vals {
		if bits == 8 {
			pix = append(pix, byte(v))
		} else if bits == 16 {
			pix = bo.AppendUint16(pix, uint16(v))
		} else {
			pix = bo.AppendUint32(pix, math.Float32bits(float32(v)))
		}
	}
	rowBytes := w * bits / 8
	var offs, counts []uint32
	b := []byte("II*\x00")
	if bo.String() == binary.BigEndian.String() {
		b = []byte("MM\x00*")
	}
	b = bo.AppendUint32(b, 0) // IFD offset, set below
	for r := 0; r < h; r += rows {
		n := min(rows, h-r) * rowBytes
		offs = append(offs, uint32(len(b)))
		counts = append(counts, uint32(n))
		b = append(b, pix[r*rowBytes:r*rowBytes+n]...)
	}
	arr := func(v []uint32) uint32 { // LONG array out of line
		o := uint32(len(b))
		for _, x := range v {
			b = bo.AppendUint32(b, x)
		}
		return o
	}
	type entry struct {
		tag, typ uint16
		n, v     uint32
	}
	ents := []entry{{256, 4, 1, uint32(w)}, {257, 4, 1, uint32(h)}, {258, 3, 1, uint32(bits)}, {259, 3, 1, uint32(compression)},
		{277, 3, 1, uint32(samples)}, {339, 3, 1, uint32(format)}}
	if len(offs) == 1 {
		ents = append(ents, entry{273, 4, 1, offs[0]}, entry{279, 4, 1, counts[0]})
	} else {
		ents = append(ents, entry{273, 4, uint32(len(offs)), arr(offs)}, entry{279, 4, uint32(len(counts)), arr(counts)})
	}
	ifd := uint32(len(b))
	bo.(binary.ByteOrder).PutUint32(b[4:], ifd)
	b = bo.AppendUint16(b, uint16(len(ents)))
	for _, e := range ents {
		b = bo.AppendUint16(b, e.tag)
		b = bo.AppendUint16(b, e.typ)
		b = bo.AppendUint32(b, e.n)
		if e.typ == 3 && e.n == 1 {
			b = bo.AppendUint16(b, uint16(e.v))
			b = bo.AppendUint16(b, 0)
		} else {
			b = bo.AppendUint32(b, e.v)
		}
	}
	return bo.AppendUint32(b, 0)
}

func TestDecodeDepthTIFF(t *testing.T) {
	vals := []float64{0, 1, 2, 65535, 4, 5}
	fvals := []float64{0.25, 1.5, -2, 1e-3, 10, 0}
	good := []struct {
		name string
		b    []byte
		want []float64
	}{
		{"uint16 LE one strip", tiff(binary.LittleEndian, 3, 2, 16, 1, 1, 1, 2, vals), vals},
		{"uint16 BE strips", tiff(binary.BigEndian, 3, 2, 16, 1, 1, 1, 1, vals), vals},
		{"float32 LE", tiff(binary.LittleEndian, 2, 3, 32, 3, 1, 1, 3, fvals), fvals},
	}
	for _, c := range good {
		w, h, got, err := decodeDepthTIFF(c.b)
		if err != nil || w*h != len(c.want) {
			t.Fatalf("%s: %dx%d %v", c.name, w, h, err)
		}
		for i, v := range c.want {
			if got[i] != float32(v) {
				t.Errorf("%s[%d] = %v, want %v", c.name, i, got[i], v)
			}
		}
	}
	bad := []struct {
		name, want string
		b          []byte
	}{
		{"png", "not a TIFF", []byte("\x89PNG\r\n\x1a\n....")},
		{"short", "shorter", []byte("II")},
		{"compressed", "compression 5", tiff(binary.LittleEndian, 3, 2, 16, 1, 1, 5, 2, vals)},
		{"rgb", "3 samples per pixel", tiff(binary.LittleEndian, 3, 2, 16, 1, 3, 1, 2, vals)},
		{"8-bit", "8-bit samples", tiff(binary.LittleEndian, 6, 1, 8, 1, 1, 1, 1, vals)},
		{"truncated", "beyond", tiff(binary.LittleEndian, 3, 2, 16, 1, 1, 1, 2, vals)[:30]},
	}
	for _, c := range bad {
		if _, _, _, err := decodeDepthTIFF(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestImageDepthUnits(t *testing.T) {
	for _, c := range []struct {
		stored, out string
		in, want    float32
	}{
		{"mm", "mm", 1234, 1234}, {"mm", "m", 1234, 1.234}, {"m", "mm", 1.5, 1500}, {"", "m", 77, 77},
	} {
		d := &imageDepth{stored: c.stored, out: c.out}
		if g := d.convert(c.in); g != c.want {
			t.Errorf("%s->%s %v = %v, want %v", c.stored, c.out, c.in, g, c.want)
		}
	}
}

// FuzzDecodeDepthTIFF: arbitrary bytes never panic, and a decoded image
// has its size's values.
func FuzzDecodeDepthTIFF(f *testing.F) {
	f.Add(tiff(binary.LittleEndian, 3, 2, 16, 1, 1, 1, 1, []float64{1, 2, 3, 4, 5, 6}))
	f.Add(tiff(binary.BigEndian, 2, 1, 32, 3, 1, 1, 1, []float64{1, 2}))
	f.Add([]byte("II*\x00\x08\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, vals, err := decodeDepthTIFF(b)
		if err == nil && len(vals) != w*h {
			t.Fatalf("%dx%d with %d values", w, h, len(vals))
		}
	})
}
