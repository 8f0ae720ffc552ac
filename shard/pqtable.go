package shard

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/lrstream/lrstream/fetch"
)

// Typed column reads of small parquet tables (meta/tasks.parquet, the
// episodes index) and of single row groups (image bytes), through
// parquet-go's value readers: simple, and fast enough for tables of
// thousands of rows. Every read checks each row group's row count.

// openTable opens the small table name and prefetches the column chunks
// of the named top-level columns that it has (all row groups).
func openTable(ctx context.Context, src fetch.Source, name string, cols []string) (*pfile, error) {
	p, err := openFile(ctx, src, name, nil)
	if err != nil {
		return nil, err
	}
	rgs := make([]int, p.numRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	if err := p.prefetch(ctx, p.leavesUnder(cols), rgs); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// has reports whether the file has the top-level column name.
func (p *pfile) has(name string) bool { return p.column(name) != nil }

// allRowGroups lists every row group of the file.
func (p *pfile) allRowGroups() []int {
	rgs := make([]int, p.numRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	return rgs
}

// numRows is the row count of the row groups rgs.
func (p *pfile) numRows(rgs []int) int {
	n := int64(0)
	for _, rg := range rgs {
		n += p.rowGroup(rg).NumRows
	}
	return int(n)
}

// leafValues calls fn with every value of leaf column c in the row groups
// rgs, in order, then checks each row group held as many rows as its
// footer says. Values are valid during the call only. A decoder panic
// (corrupt pages) is an error.
func (p *pfile) leafValues(c *parquet.Column, rgs []int, fn func(v parquet.Value) error) (err error) {
	defer recoverTo(&err, func(e error) error { return e })
	buf := make([]parquet.Value, 256)
	for _, rg := range rgs {
		want := p.rowGroup(rg).NumRows
		rows := int64(0)
		err := func() error {
			pages := p.pages(rg, c.Index())
			defer pages.Close()
			for {
				page, err := pages.ReadPage()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				err = func() error {
					defer parquet.Release(page)
					vr := page.Values()
					for {
						n, err := vr.ReadValues(buf)
						for _, v := range buf[:n] {
							if v.RepetitionLevel() == 0 {
								if rows++; rows > want {
									return fmt.Errorf("more rows than the footer's %d", want)
								}
							}
							if err := fn(v); err != nil {
								return err
							}
						}
						if errors.Is(err, io.EOF) {
							return nil
						}
						if err != nil {
							return err
						}
						if n == 0 {
							return errors.New("page value reader made no progress")
						}
					}
				}()
				if err != nil {
					return err
				}
			}
		}()
		if err == nil && rows != want {
			err = fmt.Errorf("%d rows decoded, footer says %d", rows, want)
		}
		if err != nil {
			return fmt.Errorf("row group %d: %w", rg, err)
		}
	}
	return nil
}

// flatLeaf returns the leaf at path (top-level name, then nested field
// names), which must hold one value per row (no repetition).
func (p *pfile) flatLeaf(path ...string) (*parquet.Column, error) {
	c := p.file.Root()
	for _, n := range path {
		if c = c.Column(n); c == nil {
			return nil, errors.New("missing column")
		}
	}
	if !c.Leaf() {
		return nil, fmt.Errorf("type %s, want a primitive column", c.Type())
	}
	if c.MaxRepetitionLevel() != 0 {
		return nil, fmt.Errorf("type %s, want one value per row", c.Type())
	}
	return c, nil
}

// intType reports whether a column of type t holds integers, and whether
// they are unsigned.
func intType(t parquet.Type) (isInt, unsigned bool) {
	switch t.Kind() {
	case parquet.Int32, parquet.Int64:
	default:
		return false, false
	}
	lt := t.LogicalType()
	if lt == nil || lt.Value == nil {
		return true, false
	}
	it, ok := lt.Value.(*format.IntType)
	if !ok {
		return false, false
	}
	return true, !it.IsSigned
}

// readInts reads the flat integer column name of the row groups rgs: no
// nulls, values that fit an int64.
func (p *pfile) readInts(name string, rgs []int) ([]int64, error) {
	c, err := p.flatLeaf(name)
	if err != nil {
		return nil, err
	}
	isInt, unsigned := intType(c.Type())
	if !isInt {
		return nil, fmt.Errorf("type %s, want an integer", c.Type())
	}
	out := make([]int64, 0, p.numRows(rgs))
	nulls := 0
	err = p.leafValues(c, rgs, func(v parquet.Value) error {
		var x int64
		switch {
		case v.IsNull():
			nulls++
		case v.Kind() == parquet.Int32 && unsigned:
			x = int64(uint32(v.Int32()))
		case v.Kind() == parquet.Int32:
			x = int64(v.Int32())
		case unsigned && v.Int64() < 0:
			return fmt.Errorf("value %d overflows int64", uint64(v.Int64()))
		default:
			x = v.Int64()
		}
		out = append(out, x)
		return nil
	})
	if err == nil && nulls > 0 {
		err = fmt.Errorf("%d null values", nulls)
	}
	return out, err
}

// readFloats reads the flat float or double column name (all row groups):
// no nulls.
func (p *pfile) readFloats(name string) ([]float64, error) {
	c, err := p.flatLeaf(name)
	if err != nil {
		return nil, err
	}
	if k := c.Type().Kind(); (k != parquet.Float && k != parquet.Double) || c.Type().LogicalType() != nil {
		return nil, fmt.Errorf("type %s, want a float", c.Type())
	}
	rgs := p.allRowGroups()
	out := make([]float64, 0, p.numRows(rgs))
	nulls := 0
	err = p.leafValues(c, rgs, func(v parquet.Value) error {
		switch {
		case v.IsNull():
			nulls++
			out = append(out, 0)
		case v.Kind() == parquet.Float:
			out = append(out, float64(v.Float()))
		default:
			out = append(out, v.Double())
		}
		return nil
	})
	if err == nil && nulls > 0 {
		err = fmt.Errorf("%d null values", nulls)
	}
	return out, err
}

// isStringType reports whether a column of type t holds UTF-8 strings.
func isStringType(t parquet.Type) bool {
	if t.Kind() != parquet.ByteArray {
		return false
	}
	lt := t.LogicalType()
	if lt == nil {
		return false
	}
	_, ok := lt.Value.(*format.StringType)
	return ok
}

// readStrings reads the flat string column name (all row groups): no
// nulls.
func (p *pfile) readStrings(name string) ([]string, error) {
	c, err := p.flatLeaf(name)
	if err != nil {
		return nil, err
	}
	if !isStringType(c.Type()) {
		return nil, fmt.Errorf("type %s, want string", c.Type())
	}
	rgs := p.allRowGroups()
	out := make([]string, 0, p.numRows(rgs))
	nulls := 0
	err = p.leafValues(c, rgs, func(v parquet.Value) error {
		if v.IsNull() {
			nulls++
		}
		out = append(out, string(v.ByteArray()))
		return nil
	})
	if err == nil && nulls > 0 {
		err = fmt.Errorf("%d null values", nulls)
	}
	return out, err
}

// readStringLists reads the column name (all row groups) as a list of
// strings per row: a list<string> column (a null or empty list gives
// nil), or a string column (one string per row, none when null).
func (p *pfile) readStringLists(name string) ([][]string, error) {
	top := p.column(name)
	if top == nil {
		return nil, errors.New("missing column")
	}
	// The leaf, and the definition level at which a row has an element:
	// the level of its (single) repeated ancestor.
	c, elemDef := top, 0
	def := 0
	for {
		if c.Optional() || c.Repeated() {
			def++
		}
		if c.Repeated() {
			if elemDef > 0 {
				return nil, errors.New("nested lists, want list<string>")
			}
			elemDef = def
		}
		if c.Leaf() {
			break
		}
		kids := c.Columns()
		if len(kids) != 1 {
			return nil, fmt.Errorf("group of %d fields, want list<string>", len(kids))
		}
		c = kids[0]
	}
	if !isStringType(c.Type()) {
		return nil, fmt.Errorf("type %s, want list<string>", c.Type())
	}
	rgs := p.allRowGroups()
	out := make([][]string, 0, p.numRows(rgs))
	err := p.leafValues(c, rgs, func(v parquet.Value) error {
		if v.RepetitionLevel() == 0 {
			out = append(out, nil)
		}
		if elemDef == 0 { // a string column
			if !v.IsNull() {
				out[len(out)-1] = []string{string(v.ByteArray())}
			}
			return nil
		}
		if v.DefinitionLevel() < elemDef { // a null or empty list
			return nil
		}
		if v.IsNull() {
			return fmt.Errorf("row %d: null string in the list", len(out)-1)
		}
		out[len(out)-1] = append(out[len(out)-1], string(v.ByteArray()))
		return nil
	})
	return out, err
}
