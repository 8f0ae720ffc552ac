package collate

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

func TestEmittedRules(t *testing.T) {
	cases := []struct {
		dtype, want string
	}{
		{"|b1", "|b1"}, {"|i1", "<i8"}, {"<i2", "<i8"}, {"<i4", "<i8"}, {"<i8", "<i8"},
		{"|u1", "<i8"}, {"<u2", "<i8"}, {"<u4", "<i8"}, {"<u8", "<i8"},
		{"<f2", "<f4"}, {"<f4", "<f4"}, {"<f8", "<f4"},
	}
	for _, c := range cases {
		got, err := EmittedDType(c.dtype)
		if err != nil || got != c.want {
			t.Errorf("EmittedDType(%s) = %q, %v; want %q", c.dtype, got, err, c.want)
		}
	}
	if _, err := EmittedDType(">f4"); err == nil {
		t.Error("EmittedDType(>f4): no error")
	}
	shapes := []struct{ in, want []int }{
		{[]int{1}, []int{}}, {[]int{}, []int{}}, {[]int{3}, []int{3}},
		{[]int{1, 1}, []int{1, 1}}, {[]int{2, 2}, []int{2, 2}},
	}
	for _, c := range shapes {
		if got := EmittedShape(c.in); !slices.Equal(got, c.want) || got == nil {
			t.Errorf("EmittedShape(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func le(vals ...uint64) func(size int) []byte {
	return func(size int) []byte {
		b := make([]byte, size*len(vals))
		for i, v := range vals {
			switch size {
			case 1:
				b[i] = byte(v)
			case 2:
				binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
			case 4:
				binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
			case 8:
				binary.LittleEndian.PutUint64(b[8*i:], v)
			}
		}
		return b
	}
}

func TestConvertData(t *testing.T) {
	neg := func(x int64) uint64 { return uint64(x) }
	ints := []struct {
		dtype string
		size  int
		in    []uint64
		want  []int64
	}{
		{"|i1", 1, []uint64{neg(-128), 127, neg(-1)}, []int64{-128, 127, -1}},
		{"<i2", 2, []uint64{neg(-32768), 32767}, []int64{-32768, 32767}},
		{"<i4", 4, []uint64{neg(-1 << 31), 1<<31 - 1}, []int64{-1 << 31, 1<<31 - 1}},
		{"|u1", 1, []uint64{255, 0}, []int64{255, 0}},
		{"<u2", 2, []uint64{65535}, []int64{65535}},
		{"<u4", 4, []uint64{1<<32 - 1}, []int64{1<<32 - 1}},
		{"<u8", 8, []uint64{1<<63 - 1, 7}, []int64{1<<63 - 1, 7}},
	}
	for _, c := range ints {
		out, err := ConvertData(c.dtype, le(c.in...)(c.size))
		if err != nil {
			t.Fatalf("%s: %v", c.dtype, err)
		}
		for i, w := range c.want {
			if g := int64(binary.LittleEndian.Uint64(out[8*i:])); g != w {
				t.Errorf("%s[%d] = %d, want %d", c.dtype, i, g, w)
			}
		}
	}
	_, err := ConvertData("<u8", le(3, 1<<63)(8))
	var ce *ConvertError
	if !errors.As(err, &ce) || ce.Elem != 1 || ce.Value != 1<<63 {
		t.Errorf("uint64 above int64: %v", err)
	}
	f64 := []float64{0.1, -1e300, math.Inf(1), 1.0 / 3, 5e-46}
	var in []byte
	for _, x := range f64 {
		in = binary.LittleEndian.AppendUint64(in, math.Float64bits(x))
	}
	out, err := ConvertData("<f8", in)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range f64 {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); g != float32(x) {
			t.Errorf("<f8 %g -> %g, want %g", x, g, float32(x))
		}
	}
	h, err := ConvertData("<f2", le(0x3c00, 0xc000, 0x0001)(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []float32{1, -2, 5.960464477539063e-08} {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(h[4*i:])); g != w {
			t.Errorf("<f2[%d] = %g, want %g", i, g, w)
		}
	}
	same := le(1, 2)(4)
	if out, _ := ConvertData("<f4", same); &out[0] != &same[0] {
		t.Error("<f4: copied, want the data itself")
	}
	if _, err := ConvertData("<i4", []byte{1, 2, 3}); err == nil {
		t.Error("partial value: no error")
	}
}
