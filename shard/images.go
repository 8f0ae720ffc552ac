package shard

import (
	"bytes"
	"context"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/lrstream/lrstream/fetch"
)

// ReadImageBytes reads the encoded images of the given image features
// (LeRobot's struct<bytes: binary, path: string> columns) from one row
// group of a data file: for each key, a map from the frame's dataset index
// to its bytes (absent for a null image). Errors are *Error values naming
// the file, row group and column.
func ReadImageBytes(ctx context.Context, src fetch.Source, name string, rowGroup int, keys []string) (map[string]map[int64][]byte, error) {
	p, err := openFile(ctx, src, name, nil)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fail := func(col string, err error) error {
		return &Error{Dataset: src.ID(), File: name, RowGroup: rowGroup, Episode: -1, Index: -1, Column: col, Err: err}
	}
	if rowGroup < 0 || rowGroup >= p.numRowGroups() {
		return nil, fail("", fmt.Errorf("no such row group (the file has %d)", p.numRowGroups()))
	}
	rgs := []int{rowGroup}
	leaves := make([]*parquet.Column, len(keys))
	idx := []int{p.leafIndex(ColIndex)}
	for i, k := range keys {
		c, err := p.flatLeaf(k, "bytes")
		if err != nil {
			return nil, fail(k+".bytes", fmt.Errorf("image feature %s: %w", k, err))
		}
		if c.Type().Kind() != parquet.ByteArray {
			return nil, fail(k+".bytes", fmt.Errorf("type %s, want binary", c.Type()))
		}
		leaves[i] = c
		idx = append(idx, c.Index())
	}
	if err := p.prefetch(ctx, idx, rgs); err != nil {
		return nil, err
	}
	index, err := p.readInts(ColIndex, rgs)
	if err != nil {
		return nil, fail(ColIndex, err)
	}
	out := make(map[string]map[int64][]byte, len(keys))
	for i, k := range keys {
		m := make(map[int64][]byte, len(index))
		row := 0
		err := p.leafValues(leaves[i], rgs, func(v parquet.Value) error {
			if !v.IsNull() {
				m[index[row]] = bytes.Clone(v.ByteArray())
			}
			row++
			return nil
		})
		if err != nil {
			return nil, fail(k+".bytes", err)
		}
		out[k] = m
	}
	return out, nil
}
