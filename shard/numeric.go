package shard

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lrstream/lrstream/schema"
)

// span is a half-open range of array positions.
type span struct{ b, e int }

// rowSpans returns the output rows as runs of consecutive row-group rows.
func (d *decoder) rowSpans() []span {
	if d.keep == nil {
		return []span{{0, d.n}}
	}
	var out []span
	for _, r := range d.keep {
		if k := len(out) - 1; k >= 0 && out[k].e == r {
			out[k].e++
			continue
		}
		out = append(out, span{r, r + 1})
	}
	return out
}

// feature decodes a numeric feature into raw little-endian bytes.
func (d *decoder) feature(f schema.Feature) (FeatureData, error) {
	a := d.arrs[f.Name]
	spans := d.rowSpans()
	var dims []int
	for level := 0; ; level++ {
		a = unwrapExt(a)
		if l, ok := asList(a); ok {
			n := -1
			next := make([]span, 0, len(spans))
			for _, s := range spans {
				for r := s.b; r < s.e; r++ {
					if a.IsNull(r) {
						return FeatureData{}, d.numErr(f.Name, level, r, errors.New("null value"))
					}
					b, e := l.bounds(r)
					if n < 0 {
						n = e - b
					} else if e-b != n {
						return FeatureData{}, d.numErr(f.Name, level, r, fmt.Errorf("list of %d values, previous frames have %d", e-b, n))
					}
				}
				if s.e > s.b {
					b, _ := l.bounds(s.b)
					_, e := l.bounds(s.e - 1)
					next = append(next, span{b, e})
				}
			}
			if n < 0 {
				n = 0
			}
			dims = append(dims, n)
			spans, a = next, l.values
			continue
		}
		if fl, ok := a.(*array.FixedSizeList); ok {
			n := int(fl.DataType().(*arrow.FixedSizeListType).Len())
			off := fl.Offset()
			next := make([]span, 0, len(spans))
			for _, s := range spans {
				if fl.NullN() > 0 {
					for r := s.b; r < s.e; r++ {
						if fl.IsNull(r) {
							return FeatureData{}, d.numErr(f.Name, level, r, errors.New("null value"))
						}
					}
				}
				next = append(next, span{(off + s.b) * n, (off + s.e) * n})
			}
			dims = append(dims, n)
			spans, a = next, fl.ListValues()
			continue
		}
		break
	}
	dtype, size, err := numpyType(a.DataType())
	if err != nil {
		return FeatureData{}, d.colErr(f.Name, fmt.Errorf("unexpected type %s: %w", d.arrs[f.Name].DataType(), err))
	}
	total := 0
	for _, s := range spans {
		total += s.e - s.b
	}
	var out []byte
	if a.NullN() > 0 {
		for _, s := range spans {
			for k := s.b; k < s.e; k++ {
				if a.IsNull(k) {
					return FeatureData{}, d.colErr(f.Name, errors.New("null element"))
				}
			}
		}
	}
	if bl, ok := a.(*array.Boolean); ok {
		out = make([]byte, 0, total*size)
		for _, s := range spans {
			for k := s.b; k < s.e; k++ {
				if bl.Value(k) {
					out = append(out, 1)
				} else {
					out = append(out, 0)
				}
			}
		}
	} else {
		data := a.Data()
		bufs := data.Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			if total > 0 {
				return FeatureData{}, d.colErr(f.Name, errors.New("missing value buffer"))
			}
			out = []byte{}
		} else {
			raw := bufs[1].Bytes()
			off := data.Offset()
			if len(spans) == 1 && off+spans[0].b == 0 && (off+spans[0].e)*size == len(raw) && d.owned[f.Name] {
				return FeatureData{Name: f.Name, DType: dtype, Shape: frameShape(f.Shape, dims), Data: raw}, nil
			}
			out = make([]byte, 0, total*size)
			for _, s := range spans {
				lo, hi := (off+s.b)*size, (off+s.e)*size
				if lo < 0 || hi > len(raw) || lo > hi {
					return FeatureData{}, d.colErr(f.Name, errors.New("value buffer too short"))
				}
				out = append(out, raw[lo:hi]...)
			}
		}
	}
	return FeatureData{Name: f.Name, DType: dtype, Shape: frameShape(f.Shape, dims), Data: out}, nil
}

func (d *decoder) numErr(col string, level, r int, err error) *Error {
	e := d.colErr(col, err)
	if level == 0 && r >= 0 && r < d.n {
		if ep, ok := d.arrs[ColEpisodeIndex].(*array.Int64); ok {
			e.Episode = ep.Value(r)
		}
		if ix, ok := d.arrs[ColIndex].(*array.Int64); ok {
			e.Index = ix.Value(r)
		}
	}
	return e
}

// frameShape prefers info.json's shape when it describes as many values as
// are stored per frame.
func frameShape(info, dims []int) []int {
	n := 1
	for _, x := range dims {
		n *= x
	}
	if len(info) > 0 {
		m := 1
		for _, x := range info {
			m *= x
		}
		if m == n {
			return append([]int(nil), info...)
		}
	}
	if dims == nil {
		return []int{}
	}
	return dims
}

// numpyType maps a primitive Arrow type to its numpy type string and byte
// size.
func numpyType(t arrow.DataType) (string, int, error) {
	switch t.ID() {
	case arrow.FLOAT32:
		return "<f4", 4, nil
	case arrow.FLOAT64:
		return "<f8", 8, nil
	case arrow.FLOAT16:
		return "<f2", 2, nil
	case arrow.INT64:
		return "<i8", 8, nil
	case arrow.INT32:
		return "<i4", 4, nil
	case arrow.INT16:
		return "<i2", 2, nil
	case arrow.INT8:
		return "|i1", 1, nil
	case arrow.UINT64:
		return "<u8", 8, nil
	case arrow.UINT32:
		return "<u4", 4, nil
	case arrow.UINT16:
		return "<u2", 2, nil
	case arrow.UINT8:
		return "|u1", 1, nil
	case arrow.BOOL:
		return "|b1", 1, nil
	}
	return "", 0, fmt.Errorf("not a numeric type")
}
