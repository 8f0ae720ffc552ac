package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/fetch"
	"reflect"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
)

// TestParquetGoMatches reads the conformance, real and generated datasets
// and the page layout variants through the parquet-go path and through
// the arrow-go path, and requires identical batches (frame columns and
// numeric features, frame for frame).
func TestParquetGoMatches(t *testing.T) {
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		dirs = append(dirs, generated(t, v, 6, 150, 400, 7))
	}
	dtypes := map[string]bool{}
	for _, dir := range dirs {
		_, want := readAll(t, mustDir(t, dir), Selection{}, Options{})
		_, got := readAll(t, mustDir(t, dir), Selection{}, Options{parquetGo: true})
		compareBatches(t, dir, got, want)
		for _, b := range got {
			for _, f := range b.Features {
				dtypes[f.DType+fmt.Sprint(f.Shape)] = true
			}
		}
	}
	if len(dtypes) < 2 {
		t.Fatalf("only %v numeric features compared", dtypes)
	}
	t.Logf("numeric features compared: %v", dtypes)
}

// TestParquetGoLayouts compares both paths on the page layout variants
// (page sizes, encodings, compression) and episode selections.
func TestParquetGoLayouts(t *testing.T) {
	base, variants := layoutVariants(t)
	for name, data := range variants {
		bb, be := readVariant(t, base, data, Options{})
		pb, pe := readVariant(t, base, data, Options{parquetGo: true})
		if len(be) != 0 || len(pe) != 0 {
			t.Fatalf("%s: errors %v / %v", name, be, pe)
		}
		compareBatches(t, name, pb, bb)
	}
}

func compareBatches(t *testing.T, name string, got, want []*Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d and %d batches", name, len(got), len(want))
	}
	for i := range got {
		a, b := got[i], want[i]
		for _, c := range []struct {
			col  string
			x, y any
		}{{"index", a.Index, b.Index}, {"episode_index", a.EpisodeIndex, b.EpisodeIndex}, {"frame_index", a.FrameIndex, b.FrameIndex},
			{"task_index", a.TaskIndex, b.TaskIndex}, {"timestamp", a.Timestamp, b.Timestamp}, {"features", a.Features, b.Features}} {
			if !reflect.DeepEqual(c.x, c.y) {
				t.Fatalf("%s %s rg %d: %s differs", name, a.File, a.RowGroup, c.col)
			}
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s %s rg %d: batches differ", name, a.File, a.RowGroup)
		}
	}
}

// dtypeDataset returns the inferred conformance dataset with both data
// files rewritten to carry, besides their columns, a numeric feature of
// every dtype and shape the reader supports (scalars, lists,
// fixed_size_lists, nested lists, float16, bool, dictionary-encoded and
// plain), declared in info.json.
func dtypeDataset(t testing.TB, dict bool) fetch.Source {
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
		f, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		fr, _ := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		tbl, err := fr.ReadTable(context.Background())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
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
		for _, c := range cols {
			b := array.NewBuilder(memory.DefaultAllocator, c.typ)
			for r := 0; r < n; r++ {
				c.fill(b, r)
			}
			fields = append(fields, arrow.Field{Name: c.name, Type: c.typ})
			arrs = append(arrs, b.NewArray())
		}
		rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(n))
		data := writeParquet(t, rec, parquet.NewWriterProperties(parquet.WithDictionaryDefault(dict), parquet.WithMaxRowGroupLength(40), parquet.WithDataPageSize(512)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		fsys[name] = &fstest.MapFile{Data: data}
		tbl.Release()
	}
	return fetch.NewFS("dtypes", fsys)
}

// TestParquetGoDTypes compares both paths on a feature of every dtype and
// shape, dictionary-encoded and plain, whole and with an episode
// selection.
func TestParquetGoDTypes(t *testing.T) {
	for _, dict := range []bool{true, false} {
		src := dtypeDataset(t, dict)
		for _, sel := range []Selection{{}, {Episodes: Ranges{{1, 1}, {3, 3}, {6, 6}}}} {
			_, want := readAll(t, src, sel, Options{})
			_, got := readAll(t, src, sel, Options{parquetGo: true})
			compareBatches(t, fmt.Sprint("dict ", dict), got, want)
			seen := map[string]bool{}
			for _, f := range got[0].Features {
				seen[f.DType] = true
			}
			if len(seen) < 12 {
				t.Fatalf("dtypes decoded: %v", seen)
			}
		}
	}
}

// TestParquetGoCorruption flips bytes across a small data file and reads
// it through the parquet-go path: errors are fine, panics are not, and a
// file that still reads gives the same batches as the arrow-go path.
func TestParquetGoCorruption(t *testing.T) {
	base, dir := fuzzBase(t)
	seed := smallDataFile(t, dir)
	stride := 97
	if testing.Short() {
		stride = 499
	}
	n, same, differ := 0, 0, 0
	for i := 0; i < len(seed); i += stride {
		for _, x := range []byte{0xff, 0x01} {
			d := append([]byte(nil), seed...)
			d[i] ^= x
			pb, pe := readVariant(t, base, d, Options{parquetGo: true})
			ab, ae := readVariant(t, base, d, Options{})
			if len(pe) == 0 && len(ae) == 0 {
				if !reflect.DeepEqual(pb, ab) {
					a, b := frameRecords(pb), frameRecords(ab)
					for k := range min(len(a), len(b)) {
						if a[k] != b[k] {
							t.Logf("byte %d ^ %#x: frame %d differs:\n%s\n%s", i, x, k, a[k], b[k])
							break
						}
					}
					differ++
					continue
				}
				same++
			}
			n++
		}
	}
	t.Logf("%d corrupted files read without a panic, %d read by both paths alike, %d differently", n, same, differ)
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
