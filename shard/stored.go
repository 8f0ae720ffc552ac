package shard

import (
	"github.com/lrstream/lrstream/schema"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// storedColumn describes how the footer's file stores the top-level column
// name (present), for schema.CheckStored: the leaf's value type named as
// info.json names dtypes, its list depth, and its value and row counts
// from the column chunk metadata (no data is read).
func storedColumn(ft *footer, name string) schema.StoredColumn {
	col := schema.StoredColumn{Values: -1}
	n := ft.column(name)
	// Lists (and single-field groups) lead down to the leaf; a group of
	// several fields is a struct.
	for !n.Leaf() {
		kids := n.Columns()
		if len(kids) != 1 {
			break
		}
		n = kids[0]
	}
	col.Lists = n.MaxRepetitionLevel()
	if !n.Leaf() {
		col.Type = "struct"
		if b := n.Column("bytes"); b != nil && b.Leaf() && b.Type().Kind() == parquet.ByteArray {
			col.Type = schema.DTypeImage // datasets.Image: struct<bytes: binary, path: string>
		}
		return col
	}
	col.Type = leafTypeName(n.Type(), pqSchemaLogical(ft.file, n.Index()))
	leaf := n.Index()
	col.Values = 0
	for rg := 0; rg < ft.numRowGroups(); rg++ {
		g := ft.rowGroup(rg)
		if leaf >= len(g.Columns) {
			col.Values = -1 // a footer check refuses such a file elsewhere
			break
		}
		col.Rows += g.NumRows
		col.Values += g.Columns[leaf].MetaData.NumValues
	}
	return col
}

// leafTypeName names a leaf's value type as info.json names dtypes
// (pqDType's numpy types for numbers), "string" for text, "binary" for
// other byte arrays.
func leafTypeName(t parquet.Type, schemaLT *format.LogicalType) string {
	switch t.Kind() {
	case parquet.ByteArray:
		for _, lt := range []*format.LogicalType{t.LogicalType(), schemaLT} {
			if lt == nil {
				continue
			}
			if _, ok := lt.Value.(*format.StringType); ok {
				return schema.DTypeString
			}
		}
		if ct := t.ConvertedType(); ct != nil && *ct == deprecated.UTF8 {
			return schema.DTypeString
		}
		return "binary"
	case parquet.Int96:
		return "int96"
	}
	dt, _, err := pqDType(t, schemaLT)
	if err != nil {
		if t.Kind() == parquet.FixedLenByteArray {
			return "binary"
		}
		return t.String()
	}
	return dtypeName(dt)
}
