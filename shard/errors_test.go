package shard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/testkit"
)

func inferredDir(t testing.TB) string {
	dir := filepath.Join(conformanceDir(t), "pub_inferred_front_wrist")
	if _, err := os.Stat(dir); err != nil {
		t.Skip(err)
	}
	return dir
}

// readAllErr is readAll returning the first error.
func readAllErr(src fetch.Source, sel Selection, opts Options) error {
	ctx := context.Background()
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		return err
	}
	units, err := Plan(ctx, src, ds, sel)
	if err != nil {
		return err
	}
	for _, u := range units {
		if _, err := ReadUnit(ctx, src, ds, u, opts); err != nil {
			return err
		}
	}
	return nil
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	t.Logf("error: %v", err)
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestErrorMissingFiles(t *testing.T) {
	dir := copyDataset(t, inferredDir(t))
	os.Remove(filepath.Join(dir, "data/chunk-001/file-000.parquet"))
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), "data/chunk-001/file-000.parquet")

	dir = copyDataset(t, inferredDir(t))
	os.Remove(filepath.Join(dir, "meta/info.json"))
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), "meta/info.json")

	dir = copyDataset(t, inferredDir(t))
	os.Remove(filepath.Join(dir, "meta/tasks.parquet"))
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), "meta/tasks.parquet")

	dir = copyDataset(t, inferredDir(t))
	os.WriteFile(filepath.Join(dir, "meta/info.json"), []byte(`{"fps": 10, "features": [}`), 0o644)
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), "meta/info.json")
}

func TestErrorTruncated(t *testing.T) {
	name := "data/chunk-000/file-001.parquet"
	for _, cut := range []int{1, 8, 100, 5000} {
		dir := copyDataset(t, inferredDir(t))
		p := filepath.Join(dir, name)
		data, _ := os.ReadFile(p)
		os.WriteFile(p, data[:len(data)-cut], 0o644)
		err := readAllErr(mustDir(t, dir), Selection{}, Options{})
		wantErr(t, err, name)
		var se *Error
		if !errors.As(err, &se) || se.File != name {
			t.Errorf("cut %d: error %v is not a *shard.Error naming the file", cut, err)
		}
	}
	// Truncated after planning: the footer was parsed by Plan, the column
	// chunks are gone when ReadUnit runs.
	dir := copyDataset(t, inferredDir(t))
	src := mustDir(t, dir)
	ctx := context.Background()
	ds, units := mustPlan(t, src)
	os.WriteFile(filepath.Join(dir, units[2].File), []byte("PAR1"), 0o644)
	_, err := ReadUnit(ctx, src, ds, units[2], Options{})
	wantErr(t, err, units[2].File, "row group 2")
}

func TestErrorCorruptPages(t *testing.T) {
	name := "data/chunk-000/file-001.parquet"
	dir := copyDataset(t, inferredDir(t))
	p := filepath.Join(dir, name)
	data, _ := os.ReadFile(p)
	// Scramble the middle of the file (column chunks, not the footer).
	for i := 200; i < len(data)/2; i += 7 {
		data[i] ^= 0x5a
	}
	os.WriteFile(p, data, 0o644)
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), name, "row group")
}

// rewriteColumn rewrites a data file, replacing column col by repl(col).
func rewriteColumn(t *testing.T, path, col string, repl func(arrow.Array) arrow.Array) {
	t.Helper()
	tbl := testkit.ReadTable(t, path)
	var fields []arrow.Field
	var cols []arrow.Array
	for i := 0; i < int(tbl.NumCols()); i++ {
		fld := tbl.Schema().Field(i)
		a, _ := oneChunk(tbl.Column(i).Data())
		if fld.Name == col {
			a = repl(a)
			fld.Type = a.DataType()
		}
		fields = append(fields, fld)
		cols = append(cols, a)
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, tbl.NumRows())
	if err := os.WriteFile(path, writeParquet(t, rec, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestErrorWrongColumnType(t *testing.T) {
	name := "data/chunk-000/file-000.parquet"
	dir := copyDataset(t, inferredDir(t))
	rewriteColumn(t, filepath.Join(dir, name), "index", func(a arrow.Array) arrow.Array {
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		for _, v := range a.(*array.Int64).Int64Values() {
			b.Append(float64(v))
		}
		return b.NewArray()
	})
	// Refused when the plan reads the footer (issue 25 item 5), naming
	// the feature, the file and both types.
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), name, "column index", "declares int64", "stores float64")

	dir = copyDataset(t, inferredDir(t))
	rewriteColumn(t, filepath.Join(dir, name), "language_events", func(a arrow.Array) arrow.Array {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for i := 0; i < a.Len(); i++ {
			b.Append(int64(i))
		}
		return b.NewArray()
	})
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), name, "column language_events", "unexpected type int64")

	dir = copyDataset(t, inferredDir(t))
	rewriteColumn(t, filepath.Join(dir, name), "action", func(a arrow.Array) arrow.Array {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := 0; i < a.Len(); i++ {
			b.Append("x")
		}
		return b.NewArray()
	})
	wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), name, "column action", "declares float32 shape [6]", "stores string")
}

func TestErrorUndeclaredLanguageColumn(t *testing.T) {
	dir := copyDataset(t, inferredDir(t))
	p := filepath.Join(dir, "meta/info.json")
	data, _ := os.ReadFile(p)
	// Rename the declaration to a string feature (undeclaring the column).
	s := strings.Replace(string(data), `"language_events": {
            "dtype": "language"`, `"language_events_renamed": {
            "dtype": "string"`, 1)
	os.WriteFile(p, []byte(s), 0o644)
	err := readAllErr(mustDir(t, dir), Selection{}, Options{})
	wantErr(t, err, "data/chunk-000/file-000.parquet", "row group 0", "language_events", "not declared")
}

func TestErrorFeatures(t *testing.T) {
	src := mustDir(t, inferredDir(t))
	wantErr(t, readAllErr(src, Selection{}, Options{Features: []string{"nope"}}), "nope", "not in info.json")
	wantErr(t, readAllErr(src, Selection{}, Options{Features: []string{"observation.images.front"}}), "not decoded")
	// An explicit empty list decodes no feature.
	ds, bs := readAll(t, src, Selection{}, Options{Features: []string{}})
	_ = ds
	for _, b := range bs {
		if len(b.Features) != 0 {
			t.Fatal("features decoded")
		}
	}
	_, bs = readAll(t, src, Selection{}, Options{Features: []string{"observation.state"}})
	if f := bs[0].Features; len(f) != 1 || f[0].Name != "observation.state" || f[0].DType != "<f4" || len(f[0].Shape) != 1 || f[0].Shape[0] != 6 {
		t.Fatalf("features %+v", f)
	}
}

// fuzzFS returns the inferred dataset's metadata plus one data file with
// the given bytes.
func fuzzBase(t testing.TB) (fstest.MapFS, string) {
	dir := inferredDir(t)
	fsys := fstest.MapFS{}
	for _, n := range []string{"meta/info.json", "meta/tasks.parquet", "meta/episodes/chunk-000/file-000.parquet"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		fsys[n] = &fstest.MapFile{Data: data}
	}
	return fsys, dir
}

// smallDataFile writes the first rows of a conformance data file (with
// persistent tool calls) as a small parquet file, the fuzz seed.
func smallDataFile(t testing.TB, dir string) []byte {
	tbl := testkit.ReadTable(t, filepath.Join(dir, "data/chunk-000/file-001.parquet"))
	tr := array.NewTableReader(tbl, 6)
	defer tr.Release()
	tr.Next()
	rec := tr.RecordBatch()
	return writeParquet(t, rec, parquet.NewWriterProperties(parquet.WithStats(true), parquet.WithMaxRowGroupLength(3)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
}

// FuzzReadParquet feeds corrupted and truncated parquet files to the
// reader (as a data file and as the episodes index): errors are fine,
// panics are not.
func FuzzReadParquet(f *testing.F) {
	base, dir := fuzzBase(f)
	seed := smallDataFile(f, dir)
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Add(seed[:len(seed)/2])
	f.Add(append([]byte(nil), seed[len(seed)/2:]...))
	flip := append([]byte(nil), seed...)
	for i := len(flip) - 200; i < len(flip)-8; i += 13 {
		flip[i] ^= 0xff
	}
	f.Add(flip)
	// Found by byte-flip sweeps: an invalid physical type and a negative
	// column chunk size in the footer made arrow-go crash in goroutines of
	// its own.
	for _, pos := range []int{5670, 6871} {
		if pos < len(seed) {
			crash := append([]byte(nil), seed...)
			crash[pos] ^= 1
			f.Add(crash)
		}
	}
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte{})
	ctx := context.Background()
	sel, _ := ParseSelection("5-9", "")
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := withFile(base, "data/chunk-000/file-001.parquet", data)
		src := fetch.NewFS("fuzz", fsys)
		ds, err := OpenDatasetWith(ctx, src, OpenOptions{Tolerate: func(error) {}}) // the seed holds the first rows only: tolerated, so the units reach ReadUnit
		if err != nil {
			t.Fatal(err)
		}
		units, err := Plan(ctx, src, ds, sel)
		if err == nil {
			for _, u := range units {
				b, err := ReadUnit(ctx, src, ds, u, Options{})
				if err == nil && len(b.Index) != len(b.Timestamp) {
					t.Fatal("inconsistent batch")
				}
			}
		}
		// The same bytes as the episodes index.
		fsys2 := withFile(base, "meta/episodes/chunk-000/file-000.parquet", data)
		OpenDataset(ctx, fetch.NewFS("fuzz", fsys2))
	})
}

// TestCorruptionSweep flips bytes across a small data file (every 149th
// byte, two flips each) and reads it through the whole path: errors are
// fine, panics and crashes are not. A full single-byte sweep found the two
// footer shapes checkFooter rejects.
func TestCorruptionSweep(t *testing.T) {
	base, dir := fuzzBase(t)
	seed := smallDataFile(t, dir)
	ctx := context.Background()
	sel, _ := ParseSelection("5-9", "")
	stride := 149
	if testing.Short() {
		stride = 499
	}
	n := 0
	for i := 0; i < len(seed); i += stride {
		for _, x := range []byte{0xff, 0x01} {
			d := append([]byte(nil), seed...)
			d[i] ^= x
			fsys := withFile(base, "data/chunk-000/file-001.parquet", d)
			src := fetch.NewFS("sweep", fsys)
			ds, err := OpenDatasetWith(ctx, src, OpenOptions{Tolerate: func(error) {}}) // the seed holds the first rows only: tolerated, so the units reach ReadUnit
			if err != nil {
				t.Fatal(err)
			}
			units, err := Plan(ctx, src, ds, sel)
			if err == nil {
				for _, u := range units {
					ReadUnit(ctx, src, ds, u, Options{})
				}
			}
			n++
		}
	}
	t.Logf("%d corrupted files read without a panic", n)
}

// oneChunk concatenates a chunked column into one array.
func oneChunk(c *arrow.Chunked) (arrow.Array, error) {
	ch := c.Chunks()
	switch len(ch) {
	case 0:
		return array.MakeArrayOfNull(memory.DefaultAllocator, c.DataType(), 0), nil
	case 1:
		ch[0].Retain()
		return ch[0], nil
	}
	return array.Concatenate(ch, memory.DefaultAllocator)
}
