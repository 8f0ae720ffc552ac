package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// The numeric leaves of a row group (frame columns and numeric features),
// decoded from parquet-go's pages: decoded levels checked for the list
// shape, values appended (dictionary indices gathered) into one buffer.

// pqColumn is one leaf column decoded from a row group: its values as
// little-endian bytes of dtype, and the per-frame shape.
type pqColumn struct {
	dtype string
	size  int   // bytes per value
	dims  []int // uniform list lengths per nesting depth
	data  []byte
	rows  int
}

// pqLeaf finds the leaf column of a numeric feature: the column itself, or
// its list elements, however deep.
func pqLeaf(root *parquet.Column, name string) (*parquet.Column, error) {
	c := root.Column(name)
	if c == nil {
		return nil, errors.New("missing column")
	}
	for !c.Leaf() {
		kids := c.Columns()
		if len(kids) != 1 {
			return nil, fmt.Errorf("group of %d fields, want a number or a list of numbers", len(kids))
		}
		c = kids[0]
	}
	return c, nil
}

// pqSchemaLogical returns the logical type of the footer's schema
// element of leaf column c. parquet-go's Type drops annotations it has no
// type for (FLOAT16), so the reader looks at the footer itself.
func pqSchemaLogical(pf *parquet.File, c int) *format.LogicalType {
	k := 0
	for i := range pf.Metadata().Schema {
		e := &pf.Metadata().Schema[i]
		if i == 0 || e.NumChildren.V > 0 {
			continue
		}
		if k == c {
			return &e.LogicalType
		}
		k++
	}
	return nil
}

// pqDType maps a leaf's parquet type (and the logical type of its footer
// schema element) to its numpy type string and size.
func pqDType(t parquet.Type, schemaLT *format.LogicalType) (string, int, error) {
	lt := t.LogicalType()
	if lt == nil && schemaLT != nil && schemaLT.Value != nil {
		lt = schemaLT
	}
	var it *format.IntType
	if lt != nil {
		switch v := lt.Value.(type) {
		case *format.IntType:
			it = v
		case *format.Float16Type:
			if t.Kind() == parquet.FixedLenByteArray && t.Length() == 2 {
				return "<f2", 2, nil
			}
		case nil:
		default:
			return "", 0, fmt.Errorf("unexpected type %s: not a numeric type", t)
		}
	}
	if it == nil {
		if ct := t.ConvertedType(); ct != nil {
			switch *ct {
			case deprecated.Int8:
				it = &format.IntType{BitWidth: 8, IsSigned: true}
			case deprecated.Int16:
				it = &format.IntType{BitWidth: 16, IsSigned: true}
			case deprecated.Int32:
				it = &format.IntType{BitWidth: 32, IsSigned: true}
			case deprecated.Int64:
				it = &format.IntType{BitWidth: 64, IsSigned: true}
			case deprecated.Uint8:
				it = &format.IntType{BitWidth: 8}
			case deprecated.Uint16:
				it = &format.IntType{BitWidth: 16}
			case deprecated.Uint32:
				it = &format.IntType{BitWidth: 32}
			case deprecated.Uint64:
				it = &format.IntType{BitWidth: 64}
			default:
				return "", 0, fmt.Errorf("unexpected type %s: not a numeric type", t)
			}
		}
	}
	switch t.Kind() {
	case parquet.Boolean:
		return "|b1", 1, nil
	case parquet.Float:
		return "<f4", 4, nil
	case parquet.Double:
		return "<f8", 8, nil
	case parquet.Int32, parquet.Int64:
		bits := 32
		if t.Kind() == parquet.Int64 {
			bits = 64
		}
		signed := true
		if it != nil {
			bits, signed = int(it.BitWidth), it.IsSigned
		}
		switch bits {
		case 8:
			if signed {
				return "|i1", 1, nil
			}
			return "|u1", 1, nil
		case 16, 32, 64:
			k := "<i"
			if !signed {
				k = "<u"
			}
			return fmt.Sprintf("%s%d", k, bits/8), bits / 8, nil
		}
	}
	return "", 0, fmt.Errorf("unexpected type %s: not a numeric type", t)
}

// pqLevels tracks the list structure of a leaf while its levels are read:
// it checks every list at a depth has the same length, and that nothing is
// null.
type pqLevels struct {
	maxRep, maxDef int
	// nonEmpty[k] is the definition level at which the list at depth k
	// (1-based) has at least one element.
	nonEmpty []int
	open     []bool
	count    []int
	dims     []int // -1 until the first list at that depth closes
	rows     int
	// the slices' memory for up to pqSmallDepth-1 nested lists (a reader
	// per column chunk: no allocation for the usual shapes)
	smallInts [3 * pqSmallDepth]int
	smallOpen [pqSmallDepth]bool
}

const pqSmallDepth = 4

// init sets l up for leaf column leaf of the schema under root.
func (l *pqLevels) init(leaf *parquet.Column, root *parquet.Column) error {
	l.maxRep, l.maxDef = leaf.MaxRepetitionLevel(), leaf.MaxDefinitionLevel()
	n := l.maxRep + 1
	ints, open := l.smallInts[:], l.smallOpen[:]
	if n > pqSmallDepth {
		ints, open = make([]int, 3*n), make([]bool, n)
	}
	l.nonEmpty, l.count, l.dims = ints[:n:n], ints[n:2*n:2*n], ints[2*n:3*n:3*n]
	l.open = open[:n:n]
	def, rep := 0, 0
	c := root
	for _, name := range leaf.Path() {
		c = c.Column(name)
		if c == nil {
			return errors.New("column path not found")
		}
		switch {
		case c.Optional():
			def++
		case c.Repeated():
			def++
			rep++
			if rep >= n {
				return errors.New("inconsistent repetition levels")
			}
			l.nonEmpty[rep] = def
		}
	}
	for k := range l.dims {
		l.dims[k] = -1
	}
	return nil
}

// closeFrom closes the open lists at depths k..maxRep.
func (l *pqLevels) closeFrom(k int) error {
	for ; k <= l.maxRep; k++ {
		if !l.open[k] {
			continue
		}
		l.open[k] = false
		if l.dims[k] < 0 {
			l.dims[k] = l.count[k]
		} else if l.dims[k] != l.count[k] {
			return fmt.Errorf("list of %d values, previous frames have %d", l.count[k], l.dims[k])
		}
	}
	return nil
}

// entry records one level entry; it reports whether it carries a value.
func (l *pqLevels) entry(rep, def int) (bool, error) {
	if rep == 0 {
		if err := l.closeFrom(1); err != nil {
			return false, err
		}
		l.rows++
	} else if err := l.closeFrom(rep + 1); err != nil {
		return false, err
	}
	// e: depth of the empty list this entry ends at, or maxRep+1 when it
	// carries a value.
	e := l.maxRep + 1
	for k := 1; k <= l.maxRep; k++ {
		if def < l.nonEmpty[k] {
			if def != l.nonEmpty[k]-1 {
				return false, errors.New("null value")
			}
			e = k
			break
		}
	}
	if e > l.maxRep && def < l.maxDef {
		return false, errors.New("null value")
	}
	for k := rep + 1; k <= min(e, l.maxRep); k++ {
		l.open[k], l.count[k] = true, 0
	}
	for k := max(rep, 1); k <= min(e-1, l.maxRep); k++ {
		l.count[k]++
	}
	return e > l.maxRep, nil
}

// pqRead decodes one leaf column chunk of row group rg.
func pqRead(g *pqGroup, leaf *parquet.Column, nrows int) (_ *pqColumn, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt column chunk: %v", r)
		}
	}()
	dtype, size, err := pqDType(leaf.Type(), pqSchemaLogical(g.pf, leaf.Index()))
	if err != nil {
		return nil, err
	}
	var lv pqLevels
	if err := lv.init(leaf, g.pf.Root()); err != nil {
		return nil, err
	}
	// out.data grows by append: a page's values are copied into memory
	// the allocator does not zero first
	out := &pqColumn{dtype: dtype, size: size}
	pages := g.pages(leaf.Index())
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		values, err := lv.page(p)
		if err == nil {
			out.data, err = pqAppend(out.data, p, values, size)
		}
		parquet.Release(p)
		if err != nil {
			return nil, err
		}
	}
	if err := lv.closeFrom(1); err != nil {
		return nil, err
	}
	if lv.rows != nrows {
		return nil, fmt.Errorf("%d rows decoded, footer says %d", lv.rows, nrows)
	}
	out.rows = nrows
	for _, d := range lv.dims[1:] {
		out.dims = append(out.dims, max(d, 0))
	}
	per := 1
	for _, d := range out.dims {
		per *= d
	}
	if len(out.data) != nrows*per*size {
		return nil, fmt.Errorf("%d bytes of values for %d rows of %d values", len(out.data), nrows, per)
	}
	return out, nil
}

// pqMaxValues bounds the values of a column chunk allocated up front
// from the footer's count (a corrupt footer must not allocate gigabytes).
const pqMaxValues = 1 << 20

// page records the levels of page p and returns its number of values.
func (lv *pqLevels) page(p parquet.Page) (int, error) {
	n := int(p.NumValues())
	if lv.maxRep == 0 && lv.maxDef == 0 {
		lv.rows += n
		return n, nil
	}
	reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
	if (lv.maxRep > 0 && len(reps) != n) || (lv.maxDef > 0 && len(defs) != n) {
		return 0, fmt.Errorf("page of %d values has %d repetition and %d definition levels", n, len(reps), len(defs))
	}
	full := lv.maxDef == 0 || bytes.Count(defs, []byte{byte(lv.maxDef)}) == n
	switch {
	case lv.maxRep == 0 && full:
		lv.rows += n // an optional scalar, every value present
		return n, nil
	case lv.maxRep == 1 && full && n > 0 && reps[0] == 0 && uniformLists(reps, lv.dims[1]):
		// lists of one length (a vector feature): whole rows only
		if err := lv.closeFrom(1); err != nil {
			return 0, err
		}
		k := lv.dims[1]
		if k < 0 {
			k = bytes.IndexByte(reps[1:], 0) + 1
			if k == 0 {
				k = n
			}
			lv.dims[1] = k
		}
		lv.rows += n / k
		lv.open[1], lv.count[1] = true, k
		return n, nil
	case lv.maxRep == 1 && full && (n == 0 || reps[0] == 0 || lv.rows > 0):
		// a list of numbers, every value present: check the lengths
		for _, r := range reps {
			if r == 0 {
				if lv.open[1] {
					if lv.dims[1] < 0 {
						lv.dims[1] = lv.count[1]
					} else if lv.dims[1] != lv.count[1] {
						return 0, fmt.Errorf("list of %d values, previous frames have %d", lv.count[1], lv.dims[1])
					}
				}
				lv.rows++
				lv.open[1], lv.count[1] = true, 0
			} else if r > 1 {
				return 0, errors.New("level out of range")
			}
			lv.count[1]++
		}
		return n, nil
	}
	values := 0
	for i := 0; i < n; i++ {
		rep, def := 0, 0
		if lv.maxRep > 0 {
			rep = int(reps[i])
		}
		if lv.maxDef > 0 {
			def = int(defs[i])
		}
		if rep > lv.maxRep || def > lv.maxDef {
			return 0, errors.New("level out of range")
		}
		if lv.rows == 0 && rep != 0 {
			return 0, errors.New("first value continues a row")
		}
		ok, err := lv.entry(rep, def)
		if err != nil {
			return 0, err
		}
		if ok {
			values++
		}
	}
	return values, nil
}

// uniformLists reports whether the repetition levels reps (starting a
// row) are whole lists of one length: k when k > 0, else the first
// list's. Compared as bytes: the levels are periodic with the list
// length, and the first period is one 0 and then 1s.
func uniformLists(reps []byte, k int) bool {
	if k <= 0 {
		k = bytes.IndexByte(reps[1:], 0) + 1
		if k == 0 {
			k = len(reps)
		}
	}
	if len(reps)%k != 0 || !periodic(reps, int64(k)) {
		return false
	}
	for _, r := range reps[1:k] {
		if r != 1 {
			return false
		}
	}
	return true
}

// pqAppend appends the values of page p (n of them, each size bytes in
// the output) to dst, resolving dictionary indices.
func pqAppend(dst []byte, p parquet.Page, n, size int) ([]byte, error) {
	data := p.Data()
	if dict := p.Dictionary(); dict != nil {
		idx := data.Int32()
		if len(idx) != n {
			return nil, fmt.Errorf("page has %d dictionary indices for %d values", len(idx), n)
		}
		nd := dict.Len()
		if k := indexOutOf(idx, int32(nd)); k >= 0 {
			return nil, fmt.Errorf("dictionary index %d out of range (%d values)", idx[k], nd)
		}
		raw, width, err := pqRaw(dict.Page().Data(), nd)
		if err != nil {
			return nil, err
		}
		at := len(dst)
		dst = slices.Grow(dst, n*size)[:at+n*size]
		out := dst[at:]
		switch {
		case width == 8 && size == 8:
			gather(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(out))), n), unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(raw))), nd), idx)
		case width == 4 && size == 4:
			gather(unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out))), n), unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(raw))), nd), idx)
		default:
			for k, i := range idx {
				copy(out[k*size:(k+1)*size], raw[int(i)*width:])
			}
		}
		return dst, nil
	}
	raw, width, err := pqRaw(data, n)
	if err != nil {
		return nil, err
	}
	if width == size {
		return append(dst, raw[:n*width]...), nil
	}
	at := len(dst)
	dst = slices.Grow(dst, n*size)[:at+n*size]
	for i := 0; i < n; i++ {
		copy(dst[at+i*size:at+(i+1)*size], raw[i*width:])
	}
	return dst, nil
}

// gather sets dst[k] = src[idx[k]] (indices checked by the caller).
func gather[T any](dst, src []T, idx []int32) {
	for k, i := range idx {
		dst[k] = src[i]
	}
}

// pqRaw returns n values of v as little-endian bytes of width bytes each
// (booleans unpacked to one byte), aliasing v's buffers where it can.
func pqRaw(v encoding.Values, n int) ([]byte, int, error) {
	var raw []byte
	width := 0
	switch v.Kind() {
	case encoding.Boolean:
		bits := v.Boolean()
		if len(bits)*8 < n {
			return nil, 0, errors.New("boolean page too short")
		}
		raw = make([]byte, n)
		for i := range raw {
			raw[i] = bits[i/8] >> (i % 8) & 1
		}
		return raw, 1, nil
	case encoding.Int32:
		raw, width = leBytes(v.Int32()), 4
	case encoding.Float:
		raw, width = leBytes(v.Float()), 4
	case encoding.Int64:
		raw, width = leBytes(v.Int64()), 8
	case encoding.Double:
		raw, width = leBytes(v.Double()), 8
	case encoding.FixedLenByteArray:
		raw, width = v.FixedLenByteArray()
	default:
		return nil, 0, fmt.Errorf("unexpected page values of kind %v", v.Kind())
	}
	if width <= 0 || len(raw) < n*width {
		return nil, 0, fmt.Errorf("page has %d bytes of values for %d values", len(raw), n)
	}
	return raw, width, nil
}

// leBytes returns the little-endian bytes of s (an alias: parquet values
// are little-endian, as are the platforms Go and lrstream run on).
func leBytes[T int32 | float32 | int64 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// dtypeName names a numpy type string the way info.json does.
func dtypeName(dtype string) string {
	names := map[string]string{"<f4": "float32", "<f8": "float64", "<f2": "float16", "<i8": "int64", "<i4": "int32",
		"<i2": "int16", "|i1": "int8", "<u8": "uint64", "<u4": "uint32", "<u2": "uint16", "|u1": "uint8", "|b1": "bool"}
	if n, ok := names[dtype]; ok {
		return n
	}
	return dtype
}

// pqInts converts a scalar integer column to int64 values (the column's
// own memory when it holds int64 already).
func pqInts(c *pqColumn) ([]int64, error) {
	if len(c.dims) != 0 {
		return nil, errors.New("unexpected list column")
	}
	if (c.dtype == "<i8" || c.dtype == "<u8") && len(c.data) == 8*c.rows {
		if c.rows == 0 {
			return []int64{}, nil
		}
		if p := unsafe.Pointer(unsafe.SliceData(c.data)); uintptr(p)%8 == 0 {
			return unsafe.Slice((*int64)(p), c.rows), nil
		}
	}
	out := make([]int64, c.rows)
	for i := range out {
		v := c.data[i*c.size : (i+1)*c.size]
		switch c.dtype {
		case "<i8", "<u8":
			out[i] = int64(binary.LittleEndian.Uint64(v))
		case "<i4":
			out[i] = int64(int32(binary.LittleEndian.Uint32(v)))
		case "<u4":
			out[i] = int64(binary.LittleEndian.Uint32(v))
		case "<i2":
			out[i] = int64(int16(binary.LittleEndian.Uint16(v)))
		case "<u2":
			out[i] = int64(binary.LittleEndian.Uint16(v))
		case "|i1":
			out[i] = int64(int8(v[0]))
		case "|u1":
			out[i] = int64(v[0])
		default:
			return nil, fmt.Errorf("unexpected type %s, want an integer", dtypeName(c.dtype))
		}
	}
	return out, nil
}

// pqFloats converts the timestamp column to float32 values.
func pqFloats(c *pqColumn, keep []int) ([]float32, error) {
	if len(c.dims) != 0 || !slices.Contains([]string{"<f4", "<f8"}, c.dtype) {
		return nil, fmt.Errorf("unexpected type %s, want float32", dtypeName(c.dtype))
	}
	n := c.rows
	if keep != nil {
		n = len(keep)
	}
	f4 := c.dtype == "<f4"
	if f4 && keep == nil && len(c.data) == 4*n && n > 0 {
		if p := unsafe.Pointer(unsafe.SliceData(c.data)); uintptr(p)%4 == 0 {
			return unsafe.Slice((*float32)(p), n), nil // the column's own memory
		}
	}
	out := make([]float32, n)
	for i := range out {
		r := i
		if keep != nil {
			r = keep[i]
		}
		if f4 {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(c.data[4*r:]))
		} else {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(c.data[8*r:])))
		}
	}
	return out, nil
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
