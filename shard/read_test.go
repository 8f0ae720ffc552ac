package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/testkit"
)

// TestReadLayouts reads the data file rewritten with other page layouts
// (data page v2, no dictionary, small pages and dictionaries, codecs, 4
// rows per row group) and requires the same frames as the original file.
func TestReadLayouts(t *testing.T) {
	base, variants := layoutVariants(t)
	data, err := os.ReadFile(filepath.Join(inferredDir(t), "data/chunk-000/file-001.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	wb, we := readVariant(t, base, data, Options{})
	want := frameRecords(wb)
	if len(we) > 0 || len(want) == 0 {
		t.Fatalf("original: %d frames, errors %q", len(want), we)
	}
	for name, data := range variants {
		bs, errs := readVariant(t, base, data, Options{})
		if len(errs) > 0 {
			t.Fatalf("%s: errors %q", name, errs)
		}
		if got := frameRecords(bs); !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("%s: frame %d differs:\n%s\n%s", name, i, got[i], want[i])
				}
			}
			t.Fatalf("%s: %d frames, want %d", name, len(got), len(want))
		}
	}
}

// readVariant reads the episodes 5-9 of the inferred conformance dataset
// with data file file-001 replaced by data; it returns the batches and the
// errors.
func readVariant(t *testing.T, base fstest.MapFS, data []byte, opts Options) ([]*Batch, []string) {
	ctx := context.Background()
	src := fetch.NewFS("sweep", withFile(base, "data/chunk-000/file-001.parquet", data))
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := ParseSelection("5-9", "")
	units, err := Plan(ctx, src, ds, sel)
	if err != nil {
		return nil, []string{"plan: " + err.Error()}
	}
	var bs []*Batch
	var errs []string
	for _, u := range units {
		b, err := ReadUnit(ctx, src, ds, u, opts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		bs = append(bs, b)
	}
	return bs, errs
}

// layoutVariants rewrites data file file-001 of the inferred conformance
// dataset with other page layouts (data page v2, no dictionary, small
// pages, codecs) and returns them by name, with the dataset's base files.
func layoutVariants(t testing.TB) (fstest.MapFS, map[string][]byte) {
	base, dir := fuzzBase(t)
	tbl := testkit.ReadTable(t, filepath.Join(dir, "data/chunk-000/file-001.parquet"))
	defer tbl.Release()
	rec := tableRecord(t, tbl)
	v2 := parquet.WithDataPageVersion(parquet.DataPageV2)
	small := []parquet.WriterProperty{parquet.WithDataPageSize(64), parquet.WithBatchSize(5)}
	out := map[string][]byte{}
	for name, props := range map[string][]parquet.WriterProperty{
		"v2":                    {v2},
		"plain":                 {parquet.WithDictionaryDefault(false)},
		"v2 plain":              {v2, parquet.WithDictionaryDefault(false)},
		"small pages":           {parquet.WithDataPageSize(64), parquet.WithBatchSize(7)},
		"v2 small pages snappy": append([]parquet.WriterProperty{v2, parquet.WithCompression(compress.Codecs.Snappy)}, small...),
		"small dictionaries":    {parquet.WithDictionaryPageSizeLimit(16), parquet.WithDataPageSize(64), parquet.WithBatchSize(3)},
		"zstd":                  {parquet.WithCompression(compress.Codecs.Zstd)},
		"v2 small pages zstd":   append([]parquet.WriterProperty{v2, parquet.WithCompression(compress.Codecs.Zstd)}, small...),
		"gzip small pages":      append([]parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Gzip)}, small...),
		"uncompressed":          {parquet.WithCompression(compress.Codecs.Uncompressed)},
		"v2 uncompressed":       {v2, parquet.WithCompression(compress.Codecs.Uncompressed)},
		"snappy, no statistics": {parquet.WithCompression(compress.Codecs.Snappy), parquet.WithStats(false)},
	} {
		props = append([]parquet.WriterProperty{parquet.WithStats(true)}, props...)
		out[name] = writeRowGroups(t, rec, 4, parquet.NewWriterProperties(props...))
	}
	return base, out
}

// tableRecord concatenates a table's chunks into one record batch.
func tableRecord(t testing.TB, tbl arrow.Table) arrow.RecordBatch {
	var arrs []arrow.Array
	for i := 0; i < int(tbl.NumCols()); i++ {
		a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		arrs = append(arrs, a)
	}
	return array.NewRecordBatch(tbl.Schema(), arrs, tbl.NumRows())
}

// writeRowGroups writes rec as a parquet file of row groups of rows rows,
// each written from a copy of its rows: arrow-go v18.8's writer, splitting
// a longer record by MaxRowGroupLength, wrote wrong list and
// fixed_size_list values into the later row groups (pyarrow reads the same
// wrong values from those files).
func writeRowGroups(t testing.TB, rec arrow.RecordBatch, rows int, props *parquet.WriterProperties) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < rec.NumRows(); i += int64(rows) {
		part := rec.NewSlice(i, min(i+int64(rows), rec.NumRows()))
		var cols []arrow.Array
		for _, c := range part.Columns() {
			a, err := array.Concatenate([]arrow.Array{c}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			cols = append(cols, a)
		}
		if err := w.Write(array.NewRecordBatch(rec.Schema(), cols, part.NumRows())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dtypeDataset returns the inferred conformance dataset with both data
// files rewritten to carry, besides their columns, a numeric feature of
// every dtype and shape the reader supports (scalars, lists,
// fixed_size_lists, nested lists, float16, bool, dictionary-encoded and
// plain), declared in info.json.
func dtypeDataset(t testing.TB, dict bool) (fetch.Source, map[string]func(index int64) []byte) {
	base, dir := fuzzBase(t)
	var info map[string]any
	if err := json.Unmarshal(base["meta/info.json"].Data, &info); err != nil {
		t.Fatal(err)
	}
	feats := info["features"].(map[string]any)
	type col struct {
		name, dtype string
		shape       []int
		typ         arrow.DataType
		fill        func(b array.Builder, r int)
	}
	f16 := func(r, k int) float16.Num { return float16.New(float32(r%7) + float32(k)/4) }
	cols := []col{
		{"x.bool", "bool", []int{1}, arrow.FixedWidthTypes.Boolean, func(b array.Builder, r int) { b.(*array.BooleanBuilder).Append(r%3 == 0) }},
		{"x.i8", "int8", []int{1}, arrow.PrimitiveTypes.Int8, func(b array.Builder, r int) { b.(*array.Int8Builder).Append(int8(r%200 - 100)) }},
		{"x.u8", "uint8", []int{1}, arrow.PrimitiveTypes.Uint8, func(b array.Builder, r int) { b.(*array.Uint8Builder).Append(uint8(r)) }},
		{"x.i16", "int16", []int{1}, arrow.PrimitiveTypes.Int16, func(b array.Builder, r int) { b.(*array.Int16Builder).Append(int16(-r)) }},
		{"x.u16", "uint16", []int{2}, arrow.ListOf(arrow.PrimitiveTypes.Uint16), func(b array.Builder, r int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Uint16Builder).AppendValues([]uint16{uint16(r), uint16(60000 + r%5)}, nil)
		}},
		{"x.i32", "int32", []int{1}, arrow.PrimitiveTypes.Int32, func(b array.Builder, r int) { b.(*array.Int32Builder).Append(int32(r % 4)) }},
		{"x.u32", "uint32", []int{1}, arrow.PrimitiveTypes.Uint32, func(b array.Builder, r int) { b.(*array.Uint32Builder).Append(uint32(4e9) + uint32(r)) }},
		{"x.i64", "int64", []int{1}, arrow.PrimitiveTypes.Int64, func(b array.Builder, r int) { b.(*array.Int64Builder).Append(-int64(r) << 40) }},
		{"x.u64", "uint64", []int{1}, arrow.PrimitiveTypes.Uint64, func(b array.Builder, r int) { b.(*array.Uint64Builder).Append(1<<63 + uint64(r)) }},
		{"x.f16", "float16", []int{3}, arrow.FixedSizeListOf(3, arrow.FixedWidthTypes.Float16), func(b array.Builder, r int) {
			lb := b.(*array.FixedSizeListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Float16Builder).AppendValues([]float16.Num{f16(r, 0), f16(r, 1), f16(r, 2)}, nil)
		}},
		{"x.f64", "float64", []int{2, 2}, arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Float64)), func(b array.Builder, r int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			inner := lb.ValueBuilder().(*array.ListBuilder)
			for k := 0; k < 2; k++ {
				inner.Append(true)
				inner.ValueBuilder().(*array.Float64Builder).AppendValues([]float64{float64(r) / 3, float64(k % 2)}, nil)
			}
		}},
	}
	for _, c := range cols {
		feats[c.name] = map[string]any{"dtype": c.dtype, "shape": c.shape}
	}
	data, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"meta/info.json": &fstest.MapFile{Data: data}}
	for k, v := range base {
		if k != "meta/info.json" {
			fsys[k] = v
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
	if len(names) == 0 {
		t.Fatal("no data files")
	}
	for _, path := range names {
		name, _ := filepath.Rel(dir, path)
		name = filepath.ToSlash(name)
		tbl := testkit.ReadTable(t, path)
		n := int(tbl.NumRows())
		fields := append([]arrow.Field(nil), tbl.Schema().Fields()...)
		var arrs []arrow.Array
		for i := range fields {
			a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			arrs = append(arrs, a)
		}
		var index []int64
		for i, f := range fields {
			if f.Name == ColIndex {
				index = arrs[i].(*array.Int64).Int64Values()
			}
		}
		if len(index) != n {
			t.Fatal("no index column")
		}
		for _, c := range cols {
			b := array.NewBuilder(memory.DefaultAllocator, c.typ)
			for r := 0; r < n; r++ {
				c.fill(b, int(index[r]))
			}
			fields = append(fields, arrow.Field{Name: c.name, Type: c.typ})
			arrs = append(arrs, b.NewArray())
		}
		rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(n))
		data := writeRowGroups(t, rec, 40, parquet.NewWriterProperties(parquet.WithDictionaryDefault(dict), parquet.WithDataPageSize(512)))
		fsys[name] = &fstest.MapFile{Data: data}
		tbl.Release()
	}
	le := func(v any) []byte { b, _ := binary.Append(nil, binary.LittleEndian, v); return b }
	want := map[string]func(int64) []byte{
		"x.i8":  func(r int64) []byte { return le(int8(r%200 - 100)) },
		"x.u8":  func(r int64) []byte { return le(uint8(r)) },
		"x.i16": func(r int64) []byte { return le(int16(-r)) },
		"x.u16": func(r int64) []byte { return le([]uint16{uint16(r), uint16(60000 + r%5)}) },
		"x.i32": func(r int64) []byte { return le(int32(r % 4)) },
		"x.u32": func(r int64) []byte { return le(uint32(4e9) + uint32(r)) },
		"x.i64": func(r int64) []byte { return le(-r << 40) },
		"x.u64": func(r int64) []byte { return le(1<<63 + uint64(r)) },
		"x.f64": func(r int64) []byte { return le([]float64{float64(r) / 3, 0, float64(r) / 3, 1}) },
		"x.f16": func(r int64) []byte {
			return le([]uint16{f16(int(r), 0).Uint16(), f16(int(r), 1).Uint16(), f16(int(r), 2).Uint16()})
		},
		"x.bool": func(r int64) []byte {
			if r%3 == 0 {
				return []byte{1}
			}
			return []byte{0}
		},
	}
	return fetch.NewFS("dtypes", fsys), want
}

// TestReadDTypes reads a feature of every dtype and shape,
// dictionary-encoded and plain, whole and with an episode selection, and
// checks every frame's bytes against the values written.
func TestReadDTypes(t *testing.T) {
	for _, dict := range []bool{true, false} {
		src, want := dtypeDataset(t, dict)
		for _, sel := range []Selection{{}, {Episodes: Ranges{{1, 1}, {3, 3}, {6, 6}}}} {
			_, got := readAll(t, src, sel, Options{})
			seen := map[string]bool{}
			for _, b := range got {
				for _, f := range b.Features {
					seen[f.DType+fmt.Sprint(f.Shape)] = true
					per := len(f.Data) / b.Len()
					w, ok := want[f.Name]
					if !ok {
						continue
					}
					for i, x := range b.Index {
						if !bytes.Equal(f.Data[i*per:(i+1)*per], w(x)) {
							t.Fatalf("dict %v: %s frame %d: %x, want %x", dict, f.Name, x, f.Data[i*per:(i+1)*per], w(x))
						}
					}
				}
			}
			if len(seen) < 12 {
				t.Fatalf("dtypes decoded: %v", seen)
			}
		}
	}
}

// readTolerant reads episodes 5-9 of the inferred conformance dataset with
// data file file-001 replaced by data, tolerating metadata inconsistencies
// (the fuzz seed holds the first rows only, so the episodes index promises
// frames it does not have): ReadUnit gets the units. It returns the
// batches and the errors of Plan and ReadUnit.
func readTolerant(t *testing.T, base fstest.MapFS, data []byte) ([]*Batch, []error) {
	ctx := context.Background()
	src := fetch.NewFS("sweep", withFile(base, "data/chunk-000/file-001.parquet", data))
	ds, err := OpenDatasetWith(ctx, src, OpenOptions{Tolerate: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := ParseSelection("5-9", "")
	units, err := Plan(ctx, src, ds, sel)
	if err != nil {
		return nil, []error{err}
	}
	var bs []*Batch
	var errs []error
	for _, u := range units {
		b, err := ReadUnit(ctx, src, ds, u, Options{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		bs = append(bs, b)
	}
	return bs, errs
}

// TestReadCorruption flips bytes across a small data file (every 61st
// byte, two flips each) and reads it: nothing panics, every ReadUnit
// failure is an *Error naming the file and row group, and a unit that
// reads has every frame of its row group (a flipped value may read as
// another value: pages without checksums cannot tell).
func TestReadCorruption(t *testing.T) {
	base, dir := fuzzBase(t)
	seed := smallDataFile(t, dir)
	want, errs := readTolerant(t, base, seed)
	if len(errs) > 0 || len(want) == 0 {
		t.Fatalf("seed: %d batches, errors %v", len(want), errs)
	}
	rows := map[int]int{}
	for _, b := range want {
		rows[b.RowGroup] = b.Len()
	}
	stride := 61
	if testing.Short() {
		stride = 499
	}
	n, read, failed := 0, 0, 0
	for i := 0; i < len(seed); i += stride {
		for _, x := range []byte{0xff, 0x01} {
			d := append([]byte(nil), seed...)
			d[i] ^= x
			bs, errs := readTolerant(t, base, d)
			for _, err := range errs {
				var se *Error
				if !errors.As(err, &se) || se.File != "data/chunk-000/file-001.parquet" {
					t.Fatalf("byte %d ^ %#x: error not naming the file: %v", i, x, err)
				}
				if !strings.HasPrefix(err.Error(), "dataset sweep: data/chunk-000/file-001.parquet") {
					t.Fatalf("byte %d ^ %#x: error %q", i, x, err)
				}
			}
			for _, b := range bs {
				if r, ok := rows[b.RowGroup]; ok && b.Len() != r {
					t.Fatalf("byte %d ^ %#x: row group %d read %d frames, has %d", i, x, b.RowGroup, b.Len(), r)
				}
			}
			read += len(bs)
			if len(errs) > 0 {
				failed++
			}
			n++
		}
	}
	if read == 0 {
		t.Fatal("no corrupted file had a unit that read")
	}
	t.Logf("%d corrupted files, %d units read, %d files with errors", n, read, failed)
}

// frameRecords flattens batches into one comparable record per frame.
func frameRecords(bs []*Batch) []string {
	var out []string
	for _, b := range bs {
		for i := 0; i < b.Len(); i++ {
			rec := fmt.Sprintf("%d %d %d %d %g %s %s", b.Index[i], b.EpisodeIndex[i], b.FrameIndex[i], b.TaskIndex[i], b.Timestamp[i],
				rowsJSON(b.PersistentRows(i), true), rowsJSON(b.EventRows(i), false))
			for _, f := range b.Features {
				per := len(f.Data) / max(b.Len(), 1)
				rec += fmt.Sprintf(" %s%s%v%x", f.Name, f.DType, f.Shape, f.Data[i*per:(i+1)*per])
			}
			out = append(out, rec)
		}
	}
	return out
}

// TestReadUnitConcurrent reads every unit of a plan from four goroutines
// at once (the units of a file share its parquet-go footer and read
// buffers) and requires the batches of a sequential read.
func TestReadUnitConcurrent(t *testing.T) {
	ctx := context.Background()
	src := mustDir(t, generated(t, datagen.VariantDocumented, 6, 150, 400, 7))
	ds, want := readAll(t, src, Selection{}, Options{})
	units, err := Plan(ctx, src, ds, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*Batch, len(units))
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func() {
			for i := w; i < len(units); i += 4 {
				b, err := ReadUnit(ctx, src, ds, units[i], Options{})
				if err != nil {
					errs <- err
					return
				}
				got[i] = b
			}
			errs <- nil
		}()
	}
	for w := 0; w < 4; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("concurrent reads differ from sequential ones")
	}
}

// TestStringCache checks the per-file language string cache: a value
// seen again is the same string, values past the bounds are still
// correct (just not shared), and a nil cache makes fresh strings.
func TestStringCache(t *testing.T) {
	long := strings.Repeat("x", stringCacheLen+1)
	for _, tc := range []struct {
		name   string
		cache  *stringCache
		fill   int // distinct small strings put first
		value  string
		shared bool
	}{
		{"small value", &stringCache{}, 0, "assistant", true},
		{"after many values", &stringCache{}, stringCacheMax - 1, "user", true},
		{"empty value", &stringCache{}, 0, "", true},
		{"too long to keep", &stringCache{}, 0, long, false},
		{"cache full", &stringCache{}, stringCacheMax, "user", false},
		{"nil cache", nil, 0, "user", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < tc.fill; i++ {
				tc.cache.get([]byte(fmt.Sprint("v", i)))
			}
			a := tc.cache.get([]byte(tc.value))
			b := tc.cache.get([]byte(tc.value))
			if *a != tc.value || *b != tc.value {
				t.Fatalf("got %q and %q, want %q", truncate(*a, 20), truncate(*b, 20), truncate(tc.value, 20))
			}
			if (a == b) != tc.shared {
				t.Fatalf("shared = %v, want %v", a == b, tc.shared)
			}
			if tc.cache != nil {
				if n := len(tc.cache.m); n > stringCacheMax {
					t.Fatalf("cache holds %d strings, bound %d", n, stringCacheMax)
				}
				if m := tc.cache.snap.Load(); m != nil && len(*m) > len(tc.cache.m) {
					t.Fatalf("snapshot holds %d strings, the cache %d", len(*m), len(tc.cache.m))
				}
			}
			if tc.cache != nil && tc.shared {
				// every string the cache holds is found again, from the
				// snapshot or under the lock, as the same string
				for k, p := range tc.cache.m {
					if q := tc.cache.get([]byte(k)); q != p {
						t.Fatalf("%q: a second string", k)
					}
				}
			}
		})
	}
}

// TestLanguageStringsSharedAcrossUnits checks that the units of one file
// share the strings of their language values (stringCache) and, one after
// the other, the language columns' trees and buffers (langPool), and
// still decode the same batches as units read on their own.
func TestLanguageStringsSharedAcrossUnits(t *testing.T) {
	ctx := context.Background()
	src := mustDir(t, generated(t, datagen.VariantDocumented, 4, 50, 80, 3))
	ds, units := mustPlan(t, src)
	styles := map[string]*string{}
	shared := 0
	for _, u := range units {
		b, err := ReadUnit(ctx, src, ds, u, Options{})
		if err != nil {
			t.Fatal(err)
		}
		alone := u
		alone.pq = nil // no plan: the footer is read again, no cache
		want, err := ReadUnit(ctx, src, ds, alone, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b, want) {
			t.Fatalf("unit %d: rows differ with and without the file's string cache", u.Seq)
		}
		for _, rows := range b.Persistent {
			for _, r := range rows {
				if r.Style == nil {
					continue
				}
				if p, ok := styles[*r.Style]; ok && p != r.Style && units[0].File == u.File {
					t.Fatalf("unit %d: style %q not shared with an earlier unit of the file", u.Seq, *r.Style)
				} else if ok && p == r.Style {
					shared++
				}
				styles[*r.Style] = r.Style
			}
		}
	}
	if shared == 0 {
		t.Fatal("no style string shared between units")
	}
}

// TestAppendAlias checks appendAlias over a chunk's pages: the first page
// is aliased, later ones are copied into the leaf's own buffer (reused by
// its next row group when large enough), and the result always holds
// every page's values in order.
func TestAppendAlias(t *testing.T) {
	for _, tc := range []struct {
		name   string
		own    int // capacity of the own buffer before the chunk
		total  int // the footer's value count
		pages  [][]int32
		reused bool // the result lives in the own buffer given
	}{
		{"one page: aliased", 0, 3, [][]int32{{1, 2, 3}}, false},
		{"two pages, no own buffer", 0, 5, [][]int32{{1, 2, 3}, {4, 5}}, false},
		{"two pages, own buffer large enough", 8, 5, [][]int32{{1, 2, 3}, {4, 5}}, true},
		{"three pages, own buffer too small", 4, 7, [][]int32{{1, 2, 3}, {4, 5}, {6, 7}}, false},
		{"footer count too low", 0, 2, [][]int32{{1}, {2, 3}, {4, 5, 6}}, false},
		{"footer count above the bound", 0, pqMaxValues + 1, [][]int32{{1}, {2}}, false},
		{"empty first page", 0, 2, [][]int32{{}, {1, 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := make([]int32, 0, tc.own)
			given := own
			var got, want []int32
			for _, p := range tc.pages {
				page := slices.Clone(p)
				got = appendAlias(got, page, tc.total, &own)
				want = append(want, p...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			same := func(a, b []int32) bool { return cap(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b) }
			if len(tc.pages) == 1 && same(got, own) {
				t.Fatal("a single page was copied")
			}
			if inGiven := same(got, given); inGiven != tc.reused {
				t.Fatalf("result in the given own buffer = %v, want %v", inGiven, tc.reused)
			}
			if len(tc.pages[0]) > 0 && len(got) > len(tc.pages[0]) && !same(got, own) {
				t.Fatal("the copy is not kept as the own buffer")
			}
		})
	}
}

// TestLangPoolBounded checks that a file keeps a language column only
// while its buffers are small, and at most langPoolKept of them.
func TestLangPoolBounded(t *testing.T) {
	small := func() *pqLang { return &pqLang{name: "a", rowLen: make([]int32, 10)} }
	big := &pqLang{name: "a", rowLen: make([]int32, langPoolBytes/4+1)}
	var p langPool
	p.put(big)
	if p.get("a") != nil {
		t.Fatal("a column with large buffers was kept")
	}
	for i := 0; i < langPoolKept+3; i++ {
		p.put(small())
	}
	if len(p.free) != langPoolKept {
		t.Fatalf("%d columns kept, bound %d", len(p.free), langPoolKept)
	}
	if p.get("b") != nil || p.get("a") == nil {
		t.Fatal("get does not go by column name")
	}
	var nilPool *langPool
	nilPool.put(small()) // no pool: released, not kept
	if nilPool.get("a") != nil {
		t.Fatal("a nil pool returned a column")
	}
}
