// Package tamper edits copies of datasets for tests: it rewrites parquet
// files column by column and info.json by text replacement, the way the
// integrity and validate tests corrupt conformance datasets.
package tamper

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Edit changes a table's columns (it may add or drop some).
type Edit func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error)

// CopyDataset copies a dataset's meta/, data/ and videos/ (when present)
// into dst.
func CopyDataset(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if top != "meta" && top != "data" && top != "videos" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
}

// Parquet rewrites the parquet file at path through edit, as one row group
// with statistics.
func Parquet(path string, edit Edit) error {
	f, err := file.OpenParquetFile(path, false)
	if err != nil {
		return err
	}
	fr, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		f.Close()
		return err
	}
	tbl, err := fr.ReadTable(context.Background())
	f.Close()
	if err != nil {
		return err
	}
	defer tbl.Release()
	var fields []arrow.Field
	var cols []arrow.Array
	for i := 0; i < int(tbl.NumCols()); i++ {
		a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			return err
		}
		fields = append(fields, tbl.Schema().Field(i))
		cols = append(cols, a)
	}
	if fields, cols, err = edit(fields, cols); err != nil {
		return err
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, tbl.NumRows())
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(parquet.WithStats(true)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return err
	}
	if err := w.Write(rec); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func find(fields []arrow.Field, col string) (int, error) {
	for i, f := range fields {
		if f.Name == col {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no column %s", col)
}

// SetInt sets row of the integer column col to v (the column becomes
// int64).
func SetInt(col string, row int, v int64) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, col)
		if err != nil {
			return nil, nil, err
		}
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for k := 0; k < cols[i].Len(); k++ {
			var x int64
			switch a := cols[i].(type) {
			case *array.Int64:
				x = a.Value(k)
			case *array.Int32:
				x = int64(a.Value(k))
			default:
				return nil, nil, fmt.Errorf("column %s: type %s", col, a.DataType())
			}
			if k == row {
				x = v
			}
			b.Append(x)
		}
		cols[i], fields[i].Type = b.NewArray(), arrow.PrimitiveTypes.Int64
		return fields, cols, nil
	}
}

// SetFloat32 sets row of the float32 column col to v.
func SetFloat32(col string, row int, v float32) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, col)
		if err != nil {
			return nil, nil, err
		}
		a, ok := cols[i].(*array.Float32)
		if !ok {
			return nil, nil, fmt.Errorf("column %s: type %s", col, cols[i].DataType())
		}
		vals := append([]float32(nil), a.Float32Values()...)
		vals[row] = v
		b := array.NewFloat32Builder(memory.DefaultAllocator)
		b.AppendValues(vals, nil)
		cols[i] = b.NewArray()
		return fields, cols, nil
	}
}

// Drop removes column col.
func Drop(col string) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, col)
		if err != nil {
			return nil, nil, err
		}
		return append(fields[:i:i], fields[i+1:]...), append(cols[:i:i], cols[i+1:]...), nil
	}
}

// Replace replaces the first occurrence of old by new in the text file at
// path (info.json); it fails when old does not occur.
func Replace(path, old, new string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := strings.Replace(string(data), old, new, 1)
	if s == string(data) {
		return fmt.Errorf("%s has no %q", path, old)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// SetString sets row of the string column col to v.
func SetString(col string, row int, v string) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, col)
		if err != nil {
			return nil, nil, err
		}
		a, ok := cols[i].(*array.String)
		if !ok {
			return nil, nil, fmt.Errorf("column %s: type %s", col, cols[i].DataType())
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for k := 0; k < a.Len(); k++ {
			if k == row {
				b.Append(v)
			} else {
				b.Append(a.Value(k))
			}
		}
		cols[i] = b.NewArray()
		return fields, cols, nil
	}
}

// Rename renames column from to to.
func Rename(from, to string) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, from)
		if err != nil {
			return nil, nil, err
		}
		fields[i].Name = to
		return fields, cols, nil
	}
}

// SetFloat64 sets row of the float64 column col to v.
func SetFloat64(col string, row int, v float64) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		i, err := find(fields, col)
		if err != nil {
			return nil, nil, err
		}
		a, ok := cols[i].(*array.Float64)
		if !ok {
			return nil, nil, fmt.Errorf("column %s: type %s", col, cols[i].DataType())
		}
		vals := append([]float64(nil), a.Float64Values()...)
		vals[row] = v
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		b.AppendValues(vals, nil)
		cols[i] = b.NewArray()
		return fields, cols, nil
	}
}

// Chain applies edits in order.
func Chain(edits ...Edit) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		var err error
		for _, e := range edits {
			if fields, cols, err = e(fields, cols); err != nil {
				return nil, nil, err
			}
		}
		return fields, cols, nil
	}
}

// SetImages adds (or replaces) column col as a LeRobot image feature,
// struct<bytes: binary, path: string>, with row i's bytes img(i) (nil: a
// null image).
func SetImages(col string, img func(row int) []byte) Edit {
	return func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
		n := 0
		if len(cols) > 0 {
			n = cols[0].Len()
		}
		typ := arrow.StructOf(arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
			arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true})
		b := array.NewStructBuilder(memory.DefaultAllocator, typ)
		bb := b.FieldBuilder(0).(*array.BinaryBuilder)
		pb := b.FieldBuilder(1).(*array.StringBuilder)
		for i := 0; i < n; i++ {
			data := img(i)
			if data == nil {
				b.AppendNull()
				continue
			}
			b.Append(true)
			bb.Append(data)
			pb.AppendNull()
		}
		a := b.NewArray()
		if i, err := find(fields, col); err == nil {
			cols[i], fields[i] = a, arrow.Field{Name: col, Type: typ, Nullable: true}
			return fields, cols, nil
		}
		return append(fields, arrow.Field{Name: col, Type: typ, Nullable: true}), append(cols, a), nil
	}
}
