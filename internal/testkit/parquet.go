package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Frames holds, per dataset index, values read straight from a dataset's
// data files with pqarrow — independently of lrstream's reader, to check
// it against.
type Frames struct {
	// Episode is each frame's episode_index.
	Episode map[int64]int64
	// Values holds each requested float32 fixed-size-list feature.
	Values map[int64]map[string][]float32
}

// ReadTable reads the parquet file at path whole into an Arrow table
// (through pyarrow-compatible pqarrow, independent of the reader under
// test). The caller releases it.
func ReadTable(t testing.TB, path string) arrow.Table {
	t.Helper()
	f, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tbl
}

// ReadFrames reads the episode index and the named float32
// fixed_size_list features of every frame of the dataset at dir.
func ReadFrames(t testing.TB, dir string, names ...string) Frames {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
	if len(files) == 0 {
		t.Fatalf("no data files under %s", dir)
	}
	out := Frames{Episode: map[int64]int64{}, Values: map[int64]map[string][]float32{}}
	for _, path := range files {
		tbl := ReadTable(t, path)
		col := func(name string) *arrow.Chunked {
			ix := tbl.Schema().FieldIndices(name)
			if len(ix) != 1 {
				t.Fatalf("%s: no column %s", path, name)
			}
			return tbl.Column(ix[0]).Data()
		}
		var idx, eps []int64
		for _, c := range col("index").Chunks() {
			idx = append(idx, c.(*array.Int64).Int64Values()...)
		}
		for _, c := range col("episode_index").Chunks() {
			eps = append(eps, c.(*array.Int64).Int64Values()...)
		}
		for i, ix := range idx {
			out.Episode[ix] = eps[i]
			out.Values[ix] = map[string][]float32{}
		}
		for _, name := range names {
			row := 0
			for _, c := range col(name).Chunks() {
				l := c.(*array.FixedSizeList)
				w := int(l.DataType().(*arrow.FixedSizeListType).Len())
				vals := l.ListValues().(*array.Float32).Float32Values()
				for i := 0; i < l.Len(); i++ {
					off := (l.Offset() + i) * w
					out.Values[idx[row]][name] = vals[off : off+w]
					row++
				}
			}
		}
		tbl.Release()
	}
	return out
}
