package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// scanColumns are the top-level columns every stage reads besides the
// numeric features.
var scanColumns = []string{"index", "timestamp", "episode_index", "frame_index", "task_index",
	schema.ColumnPersistent, schema.ColumnEvents}

// naiveScan is the baseline the issue sets: a plain arrow-go pqarrow read
// of the projected columns of every planned row group (the columns the
// pipeline reads: core, language, numeric features), touching every value
// of the resulting Arrow arrays, on workers goroutines in any order. It
// shares nothing with lrstream's reader (shard).
func naiveScan(ctx context.Context, cfg *pipeline.Config, workers int) (int64, error) {
	units, err := pipeline.PlanUnits(ctx, cfg)
	if err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, c := range scanColumns {
		want[c] = true
	}
	if cfg.Features != nil {
		for _, f := range cfg.Features {
			want[f] = true
		}
	} else {
		for _, f := range cfg.Dataset.Info.Features {
			if f.IsNumeric() {
				want[f.Name] = true
			}
		}
	}
	var (
		frames atomic.Int64
		sum    atomic.Uint64 // of the touched values: keeps the touches from being optimised away
		fc     footerCache
	)
	err = parallel(ctx, len(units), workers, func(ctx context.Context, i int) error {
		n, h, err := scanUnit(ctx, cfg, units[i], want, &fc)
		frames.Add(n)
		sum.Add(h)
		return err
	})
	return frames.Load(), err
}

// scanUnit reads one row group's wanted columns with pqarrow and touches
// every value.
func scanUnit(ctx context.Context, cfg *pipeline.Config, u shard.Unit, want map[string]bool, fc *footerCache) (n int64, h uint64, err error) {
	f, err := cfg.Source.Open(ctx, u.File)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	opts := []file.ReadOption{file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator))}
	if md := fc.get(u.File); md != nil {
		opts = append(opts, file.WithMetadata(md))
	}
	rdr, err := file.NewParquetReader(io.NewSectionReader(f, 0, f.Size()), opts...)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", u.File, err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	fc.put(u.File, md)
	var leaves []int
	for i := 0; i < md.Schema.NumColumns(); i++ {
		if want[md.Schema.ColumnRoot(i).Name()] {
			leaves = append(leaves, i)
		}
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", u.File, err)
	}
	tbl, err := fr.ReadRowGroups(ctx, leaves, []int{u.RowGroup})
	if err != nil {
		return 0, 0, fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
	}
	defer tbl.Release()
	for i := 0; i < int(tbl.NumCols()); i++ {
		for _, a := range tbl.Column(i).Data().Chunks() {
			h += touchArray(a)
		}
	}
	return tbl.NumRows(), h, nil
}

// footerCache keeps the parsed footers of the last few files, so that the
// scan parses each footer once per file rather than once per row group
// (units come in plan order, so the workers share one or two files at a
// time) without holding every footer of a large dataset.
type footerCache struct {
	mu    sync.Mutex
	m     map[string]*metadata.FileMetaData
	order []string // insertion order, oldest first
}

// footersKept bounds footerCache.
const footersKept = 4

func (c *footerCache) get(path string) *metadata.FileMetaData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[path]
}

func (c *footerCache) put(path string, md *metadata.FileMetaData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*metadata.FileMetaData{}
	}
	if _, ok := c.m[path]; ok {
		return
	}
	c.m[path] = md
	c.order = append(c.order, path)
	if len(c.order) > footersKept {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

// touchArray reads every value of an Arrow array (strings by length,
// numbers by value, nested arrays recursively) and returns a checksum.
func touchArray(a arrow.Array) uint64 {
	var h uint64
	switch x := a.(type) {
	case *array.String:
		for i := 0; i < x.Len(); i++ {
			if x.IsValid(i) {
				h += uint64(len(x.Value(i)))
			}
		}
	case *array.LargeString:
		for i := 0; i < x.Len(); i++ {
			if x.IsValid(i) {
				h += uint64(len(x.Value(i)))
			}
		}
	case *array.Binary:
		for i := 0; i < x.Len(); i++ {
			h += uint64(len(x.Value(i)))
		}
	case *array.Int64:
		for _, v := range x.Int64Values() {
			h += uint64(v)
		}
	case *array.Int32:
		for _, v := range x.Int32Values() {
			h += uint64(v)
		}
	case *array.Float32:
		for _, v := range x.Float32Values() {
			h += uint64(math.Float32bits(v))
		}
	case *array.Float64:
		for _, v := range x.Float64Values() {
			h += math.Float64bits(v)
		}
	case array.ListLike:
		for i := 0; i < x.Len(); i++ {
			if x.IsValid(i) {
				b, e := x.ValueOffsets(i)
				h += uint64(e - b)
			}
		}
		h += touchArray(x.ListValues())
	case *array.Struct:
		for i := 0; i < x.NumField(); i++ {
			h += touchArray(x.Field(i))
		}
	case array.ExtensionArray:
		h += touchArray(x.Storage())
	default:
		// Other types (null, bool, small ints): touch the raw buffers.
		for _, b := range a.Data().Buffers() {
			if b != nil {
				for _, c := range b.Bytes() {
					h += uint64(c)
				}
			}
		}
	}
	return h
}

// parallel calls fn for 0..n-1 on workers goroutines, in any order, and
// returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
