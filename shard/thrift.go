package shard

import (
	"errors"
	"fmt"
)

// footerShape is what checkFooterThrift learns of a footer while walking
// it: the schema's leaf count and each row group's column chunk count.
type footerShape struct {
	leaves    int
	rgColumns []int
	// rgList is the byte range of the row_groups list (its header
	// included), rgSpans each row group's, rgOrdinals the range of each
	// row group's ordinal value ({-1, -1}: none).
	rgList     [2]int
	rgSpans    [][2]int
	rgOrdinals [][2]int
}

// maxFooterDepth bounds struct nesting in a footer (parquet's own nests
// about seven deep).
const maxFooterDepth = 32

// checkFooterThrift walks a parquet footer (a FileMetaData in thrift's
// compact protocol) without decoding it, before parquet-go does: every
// list, map and binary length must fit in the bytes that remain, structs
// nest at most maxFooterDepth deep, and the bytes end with the struct.
// parquet-go's decoder allocates a list's elements from its declared
// length before reading them, so a corrupt length (up to 2^31 elements of
// a struct of hundreds of bytes) would make it allocate without bound,
// which no recover can catch; arrow-go's thrift library bounds lengths by
// the remaining input, the check repeated here. It returns the shape
// parquet-go's column tree is built from.
func checkFooterThrift(b []byte) (footerShape, error) {
	w := compactWalk{b: b}
	var shape footerShape
	err := w.structure(0, func(id int16, typ byte) (bool, error) {
		switch {
		case id == 2 && typ == tcList: // schema: list<SchemaElement>
			return true, w.list(1, func() error {
				return w.structure(2, func(id int16, typ byte) (bool, error) {
					if id == 1 { // type: set on leaves only
						shape.leaves++
					}
					return false, nil
				})
			})
		case id == 4 && typ == tcList: // row_groups: list<RowGroup>
			if shape.rgSpans != nil || shape.rgList[1] != 0 {
				return false, errors.New("row_groups given twice")
			}
			shape.rgList[0] = w.off
			defer func() { shape.rgList[1] = w.off }()
			shape.rgSpans = [][2]int{}
			return true, w.list(1, func() error {
				start, ord := w.off, [2]int{-1, -1}
				defer func() {
					shape.rgSpans = append(shape.rgSpans, [2]int{start, w.off})
					shape.rgOrdinals = append(shape.rgOrdinals, ord)
				}()
				cols := 0
				err := w.structure(2, func(id int16, typ byte) (bool, error) {
					if id == 7 && typ == tcI16 { // ordinal
						ord[0] = w.off
						_, err := w.uvarint()
						ord[1] = w.off
						return true, err
					}
					if id != 1 || typ != tcList { // columns: list<ColumnChunk>
						return false, nil
					}
					return true, w.list(3, func() error {
						cols++
						return w.value(tcStruct, 3)
					})
				})
				shape.rgColumns = append(shape.rgColumns, cols)
				return err
			})
		}
		return false, nil
	})
	if err != nil {
		return shape, fmt.Errorf("corrupt footer at byte %d of %d: %w", w.off, len(b), err)
	}
	if w.off != len(b) {
		return shape, fmt.Errorf("corrupt footer: %d bytes after its end", len(b)-w.off)
	}
	return shape, nil
}

// Thrift compact protocol types.
const (
	tcStop   = 0
	tcTrue   = 1
	tcFalse  = 2
	tcByte   = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
)

var errThriftEOF = errors.New("unexpected end")

// compactWalk reads thrift compact-protocol values from b, checking them.
type compactWalk struct {
	b   []byte
	off int
}

func (w *compactWalk) byte() (byte, error) {
	if w.off >= len(w.b) {
		return 0, errThriftEOF
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

func (w *compactWalk) uvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

// count reads a length of n items, each at least min bytes long, that
// must fit in the rest of the input.
func (w *compactWalk) count(n uint64, min int) (int, error) {
	if left := uint64(len(w.b) - w.off); n > left/uint64(min) {
		return 0, fmt.Errorf("length %d exceeds the %d bytes left", n, left)
	}
	return int(n), nil
}

// structure walks a struct's fields up to its stop byte. field may read a
// field's value itself (returning true); other values are skipped.
func (w *compactWalk) structure(depth int, field func(id int16, typ byte) (bool, error)) error {
	var id int16
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == tcStop {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int16(v>>1) ^ -int16(v&1) // zigzag
		}
		if field != nil {
			done, err := field(id, typ)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		if typ == tcTrue || typ == tcFalse { // a field's boolean is in its header
			continue
		}
		if err := w.value(typ, depth+1); err != nil {
			return err
		}
	}
}

// list walks a list or set header and calls elem for each element after
// checking the element type is a struct.
func (w *compactWalk) list(depth int, elem func() error) error {
	et, k, err := w.listHeader()
	if err != nil {
		return err
	}
	if et != tcStruct {
		return fmt.Errorf("list of type %d, want structs", et)
	}
	for range k {
		if err := elem(); err != nil {
			return err
		}
	}
	return nil
}

// listHeader reads a list or set header: the element type and the element
// count, checked against the bytes left (at least one byte per element).
func (w *compactWalk) listHeader() (elemType byte, k int, err error) {
	h, err := w.byte()
	if err != nil {
		return 0, 0, err
	}
	n := uint64(h >> 4)
	if n == 15 {
		if n, err = w.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	if k, err = w.count(n, 1); err != nil {
		return 0, 0, err
	}
	return h & 0x0f, k, nil
}

// value skips one value of type typ (a boolean inside a list or map is
// one byte).
func (w *compactWalk) value(typ byte, depth int) error {
	if depth > maxFooterDepth {
		return fmt.Errorf("values nested more than %d deep", maxFooterDepth)
	}
	switch typ {
	case tcTrue, tcFalse, tcByte:
		_, err := w.byte()
		return err
	case tcI16, tcI32, tcI64:
		_, err := w.uvarint()
		return err
	case tcDouble:
		if _, err := w.count(8, 1); err != nil {
			return err
		}
		w.off += 8
		return nil
	case tcBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		k, err := w.count(n, 1)
		if err != nil {
			return err
		}
		w.off += k
		return nil
	case tcList, tcSet:
		et, k, err := w.listHeader()
		if err != nil {
			return err
		}
		for range k {
			if err := w.value(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcMap:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		k, err := w.count(n, 2)
		if err != nil {
			return err
		}
		h, err := w.byte()
		if err != nil {
			return err
		}
		for range k {
			if err := w.value(h>>4, depth+1); err != nil {
				return err
			}
			if err := w.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcStruct:
		return w.structure(depth, nil)
	}
	return fmt.Errorf("invalid thrift type %d", typ)
}
