package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/apache/arrow-go/v18/arrow/extensions" // registers arrow.json
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// Metadata file locations inside a dataset.
const (
	InfoPath     = "meta/info.json"
	TasksPath    = "meta/tasks.parquet"
	EpisodesDir  = "meta/episodes"
	tasksColumn  = "task"
	pandasIndex  = "__index_level_0__"
	taskIndexCol = "task_index"
)

// OpenDataset reads a dataset's metadata: meta/info.json, meta/tasks.parquet
// and every meta/episodes/chunk-*/file-*.parquet. It checks info.json's
// meaning (schema.Info.Check; a dataset that is not LeRobot v3 gets a
// *schema.VersionError saying how to convert it) and the episodes index
// against itself and info.json's totals: any inconsistency is an error
// (OpenDatasetWith can tolerate them).
func OpenDataset(ctx context.Context, src fetch.Source) (ds *schema.Dataset, err error) {
	return openDataset(ctx, src, OpenOptions{})
}

// parseInfoVersion parses info.json checking only its codebase_version.
func parseInfoVersion(data []byte) (schema.Info, error) {
	in, err := schema.ParseInfoUnchecked(data)
	if err == nil {
		err = schema.CheckVersion(in.CodebaseVersion)
	}
	return in, err
}

func openDataset(ctx context.Context, src fetch.Source, opts OpenOptions) (ds *schema.Dataset, err error) {
	data, err := fetch.ReadAll(ctx, src, InfoPath)
	if err != nil {
		return nil, fileErr(src.ID(), InfoPath, err)
	}
	parse := schema.ParseInfo
	if opts.SkipInfoCheck {
		parse = parseInfoVersion
	}
	info, err := parse(data)
	if err != nil {
		return nil, fileErr(src.ID(), InfoPath, versionError(ctx, src, trimInfo(err)))
	}
	ds = &schema.Dataset{ID: src.ID(), Revision: src.Revision(), Info: info, Tolerate: opts.Tolerate}
	if ds.Tasks, err = readTasks(ctx, src); err != nil {
		return nil, err
	}
	if ds.Episodes, err = readEpisodes(ctx, src); err != nil {
		return nil, err
	}
	if err := checkIndex(ds, src); err != nil {
		return nil, err
	}
	return ds, nil
}

// goAlloc is the allocator of every parquet read. It must be Go-managed
// memory: the low-level language path keeps values that alias dictionary
// pages after their page readers are done with them, which is only safe
// when freed buffers are left to the garbage collector, never reused.
var goAlloc = memory.NewGoAllocator()

// parquetFile is an open data or metadata parquet file.
type parquetFile struct {
	f   fetch.File
	rdr *file.Reader
}

func (p *parquetFile) Close() error { return p.f.Close() }

// openParquet opens name and parses its footer (or reuses meta).
func openParquet(ctx context.Context, src fetch.Source, name string, meta *metadata.FileMetaData) (pf *parquetFile, err error) {
	f, err := src.Open(ctx, name)
	if err != nil {
		return nil, fileErr(src.ID(), name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	defer recoverTo(&err, func(e error) error { return fileErr(src.ID(), name, e) })
	opts := []file.ReadOption{file.WithReadProps(parquet.NewReaderProperties(goAlloc))}
	if meta != nil {
		opts = append(opts, file.WithMetadata(meta))
	}
	rdr, err := file.NewParquetReader(io.NewSectionReader(f, 0, f.Size()), opts...)
	if err != nil {
		return nil, fileErr(src.ID(), name, err)
	}
	if meta == nil {
		stripArrowSchema(rdr.MetaData())
		if err := checkFooter(rdr.MetaData(), f.Size()); err != nil {
			return nil, fileErr(src.ID(), name, err)
		}
	}
	return &parquetFile{f: f, rdr: rdr}, nil
}

// checkFooter rejects footers that arrow-go would crash on in goroutines
// of its own, beyond any recover: leaf columns it cannot build a reader
// for, and column chunks with negative or out-of-file byte ranges.
func checkFooter(md *metadata.FileMetaData, size int64) error {
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		rgm := md.RowGroup(rg)
		if rgm.NumRows() < 0 {
			return fmt.Errorf("row group %d: negative row count", rg)
		}
		if rgm.NumColumns() != md.Schema.NumColumns() {
			return fmt.Errorf("row group %d: %d column chunks for %d columns", rg, rgm.NumColumns(), md.Schema.NumColumns())
		}
		for c := 0; c < rgm.NumColumns(); c++ {
			cc, err := rgm.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column %d: %w", rg, c, err)
			}
			start, n := cc.DataPageOffset(), cc.TotalCompressedSize()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
				start = cc.DictionaryPageOffset()
			}
			if start < 0 || n < 0 || start > size || n > size-start || cc.NumValues() < 0 {
				return fmt.Errorf("row group %d column %s: column chunk [%d, +%d) outside the %d-byte file", rg, md.Schema.Column(c).Path(), start, n, size)
			}
		}
	}
	return checkSchema(md)
}

// checkSchema rejects leaf columns that arrow-go cannot build a reader
// for (it would dereference a nil reader in a goroutine of its own).
func checkSchema(md *metadata.FileMetaData) error {
	for i := 0; i < md.Schema.NumColumns(); i++ {
		c := md.Schema.Column(i)
		switch c.PhysicalType() {
		case parquet.Types.Boolean, parquet.Types.Int32, parquet.Types.Int64, parquet.Types.Int96,
			parquet.Types.Float, parquet.Types.Double, parquet.Types.ByteArray:
		case parquet.Types.FixedLenByteArray:
			if c.TypeLength() <= 0 {
				return fmt.Errorf("column %s: invalid fixed_len_byte_array length %d", c.Path(), c.TypeLength())
			}
		default:
			return fmt.Errorf("column %s: invalid physical type %d", c.Path(), c.PhysicalType())
		}
	}
	return nil
}

// stripArrowSchema drops the stored ARROW:schema from freshly parsed
// footer metadata, so that pqarrow derives the Arrow types from the
// parquet schema alone. The stored schema adds nothing the reader needs
// (fixed_size_list reads back as list, arrow.json as its JSON-annotated
// text, both handled), while decoding a corrupt one can make arrow-go
// allocate without bound, which no recover can catch.
func stripArrowSchema(md *metadata.FileMetaData) {
	kv := md.FileMetaData.KeyValueMetadata
	out := kv[:0:0]
	for _, e := range kv {
		if e != nil && e.Key != "ARROW:schema" {
			out = append(out, e)
		}
	}
	md.FileMetaData.KeyValueMetadata = out
}

// readSmallTable reads the named top-level columns (all row groups) of a
// small metadata parquet file. Absent columns are skipped; the returned
// map holds the present ones, each concatenated into one array.
func readSmallTable(ctx context.Context, src fetch.Source, name string, cols []string) (out map[string]arrow.Array, err error) {
	pf, err := openParquet(ctx, src, name, nil)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	defer recoverTo(&err, func(e error) error { return fileErr(src.ID(), name, e) })
	leaves := leafColumns(pf.rdr.MetaData(), cols)
	if len(leaves) == 0 {
		return map[string]arrow.Array{}, nil
	}
	if p, ok := pf.f.(fetch.Prefetcher); ok {
		var rgs []int
		for i := 0; i < pf.rdr.NumRowGroups(); i++ {
			rgs = append(rgs, i)
		}
		if err := p.Prefetch(ctx, chunkRanges(pf.rdr.MetaData(), leaves, rgs)); err != nil {
			return nil, fileErr(src.ID(), name, err)
		}
	}
	fr, err := pqarrow.NewFileReader(pf.rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, fileErr(src.ID(), name, fmt.Errorf("parquet schema: %w", err))
	}
	rgs := make([]int, pf.rdr.NumRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	tbl, err := fr.ReadRowGroups(ctx, leaves, rgs)
	if err != nil {
		return nil, fileErr(src.ID(), name, fmt.Errorf("read: %w", err))
	}
	defer tbl.Release()
	out = map[string]arrow.Array{}
	for i := 0; i < int(tbl.NumCols()); i++ {
		arr, err := oneChunk(tbl.Column(i).Data())
		if err != nil {
			return nil, fileErr(src.ID(), name, err)
		}
		out[tbl.Schema().Field(i).Name] = arr
	}
	return out, nil
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

// leafColumns returns the parquet leaf column indices under the named
// top-level fields, in schema order.
func leafColumns(md *metadata.FileMetaData, names []string) []int {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []int
	for i := 0; i < md.Schema.NumColumns(); i++ {
		if want[md.Schema.ColumnRoot(i).Name()] {
			out = append(out, i)
		}
	}
	return out
}

// chunkRange returns the byte range of a column chunk in its file: from
// its dictionary page, if it has one before its first data page, over its
// compressed size (as arrow-go computes it for its page reader).
func chunkRange(cc *metadata.ColumnChunkMetaData) (off, n int64) {
	off = cc.DataPageOffset()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
		off = cc.DictionaryPageOffset()
	}
	return off, cc.TotalCompressedSize()
}

// chunkRanges lists the byte ranges of the column chunks (leaves × row
// groups), merged where adjacent.
func chunkRanges(md *metadata.FileMetaData, leaves, rowGroups []int) []fetch.Range {
	var rs []fetch.Range
	for _, rg := range rowGroups {
		rgm := md.RowGroup(rg)
		for _, c := range leaves {
			cc, err := rgm.ColumnChunk(c)
			if err != nil {
				continue
			}
			off, n := chunkRange(cc)
			if off < 0 || n <= 0 {
				continue
			}
			rs = append(rs, fetch.Range{Off: off, Len: n})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Off < rs[j].Off })
	out := rs[:0]
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.Off <= out[k].Off+out[k].Len {
			if end := r.Off + r.Len; end > out[k].Off+out[k].Len {
				out[k].Len = end - out[k].Off
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func readTasks(ctx context.Context, src fetch.Source) ([]schema.Task, error) {
	cols, err := readSmallTable(ctx, src, TasksPath, []string{taskIndexCol, tasksColumn, pandasIndex})
	if err != nil {
		return nil, err
	}
	defer releaseAll(cols)
	idx, ok := cols[taskIndexCol]
	if !ok {
		return nil, fileErr(src.ID(), TasksPath, errors.New("no task_index column"))
	}
	txt, ok := cols[tasksColumn]
	if !ok {
		txt, ok = cols[pandasIndex]
	}
	if !ok {
		return nil, fileErr(src.ID(), TasksPath, errors.New("no task column (neither \"task\" nor the pandas index \"__index_level_0__\")"))
	}
	ints, err := int64Values(idx)
	if err != nil {
		return nil, fileErr(src.ID(), TasksPath, fmt.Errorf("task_index: %w", err))
	}
	strs, ok := txt.(interface {
		Value(int) string
		IsNull(int) bool
	})
	if !ok {
		return nil, fileErr(src.ID(), TasksPath, fmt.Errorf("task column has type %s, want string", txt.DataType()))
	}
	tasks := make([]schema.Task, len(ints))
	for i, v := range ints {
		tasks[i] = schema.Task{Index: v, Text: strings.Clone(strs.Value(i))}
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Index < tasks[j].Index })
	for i := 1; i < len(tasks); i++ {
		if tasks[i].Index == tasks[i-1].Index {
			return nil, fileErr(src.ID(), TasksPath, fmt.Errorf("task_index %d listed twice", tasks[i].Index))
		}
	}
	return tasks, nil
}

func releaseAll(m map[string]arrow.Array) {
	for _, a := range m {
		a.Release()
	}
}

// int64Values converts a non-null integer array to int64s.
func int64Values(a arrow.Array) ([]int64, error) {
	out := make([]int64, a.Len())
	if err := appendInts(out, a); err != nil {
		return nil, err
	}
	return out, nil
}

// appendInts fills dst (len a.Len()) from an integer array.
func appendInts(dst []int64, a arrow.Array) error {
	if a.NullN() > 0 {
		return fmt.Errorf("%d null values", a.NullN())
	}
	switch a := a.(type) {
	case *array.Int64:
		copy(dst, a.Int64Values())
	case *array.Int32:
		for i, v := range a.Int32Values() {
			dst[i] = int64(v)
		}
	case *array.Int16:
		for i, v := range a.Int16Values() {
			dst[i] = int64(v)
		}
	case *array.Int8:
		for i, v := range a.Int8Values() {
			dst[i] = int64(v)
		}
	case *array.Uint32:
		for i, v := range a.Uint32Values() {
			dst[i] = int64(v)
		}
	case *array.Uint16:
		for i, v := range a.Uint16Values() {
			dst[i] = int64(v)
		}
	case *array.Uint8:
		for i, v := range a.Uint8Values() {
			dst[i] = int64(v)
		}
	case *array.Uint64:
		for i, v := range a.Uint64Values() {
			if v > 1<<63-1 {
				return fmt.Errorf("value %d overflows int64", v)
			}
			dst[i] = int64(v)
		}
	default:
		return fmt.Errorf("type %s, want an integer", a.DataType())
	}
	return nil
}

var episodeColumns = []string{
	"episode_index", "length", "dataset_from_index", "dataset_to_index",
	"data/chunk_index", "data/file_index", "tasks",
}

func readEpisodes(ctx context.Context, src fetch.Source) ([]schema.Episode, error) {
	names, err := src.List(ctx, EpisodesDir)
	if err != nil {
		return nil, fileErr(src.ID(), EpisodesDir, err)
	}
	var eps []schema.Episode
	n := 0
	for _, name := range names {
		if !strings.HasSuffix(name, ".parquet") {
			continue
		}
		n++
		part, err := readEpisodeFile(ctx, src, name)
		if err != nil {
			return nil, err
		}
		eps = append(eps, part...)
	}
	if n == 0 {
		return nil, fileErr(src.ID(), EpisodesDir, errors.New("no episodes index (meta/episodes/chunk-*/file-*.parquet)"))
	}
	sort.SliceStable(eps, func(i, j int) bool { return eps[i].Index < eps[j].Index })
	for i := 1; i < len(eps); i++ {
		if eps[i].Index == eps[i-1].Index {
			return nil, fileErr(src.ID(), EpisodesDir, fmt.Errorf("episode %d listed twice", eps[i].Index))
		}
	}
	return eps, nil
}

func readEpisodeFile(ctx context.Context, src fetch.Source, name string) ([]schema.Episode, error) {
	cols, err := readSmallTable(ctx, src, name, episodeColumns)
	if err != nil {
		return nil, err
	}
	defer releaseAll(cols)
	get := func(col string, required bool) ([]int64, error) {
		a, ok := cols[col]
		if !ok {
			if required {
				return nil, fileErr(src.ID(), name, fmt.Errorf("missing column %s", col))
			}
			return nil, nil
		}
		v, err := int64Values(a)
		if err != nil {
			return nil, fileErr(src.ID(), name, fmt.Errorf("column %s: %w", col, err))
		}
		return v, nil
	}
	epi, err := get("episode_index", true)
	if err != nil {
		return nil, err
	}
	from, err := get("dataset_from_index", true)
	if err != nil {
		return nil, err
	}
	to, err := get("dataset_to_index", true)
	if err != nil {
		return nil, err
	}
	chunk, err := get("data/chunk_index", true)
	if err != nil {
		return nil, err
	}
	fileIdx, err := get("data/file_index", true)
	if err != nil {
		return nil, err
	}
	length, err := get("length", false)
	if err != nil {
		return nil, err
	}
	eps := make([]schema.Episode, len(epi))
	for i := range eps {
		e := &eps[i]
		e.Index, e.FromIndex, e.ToIndex = epi[i], from[i], to[i]
		e.DataChunk, e.DataFile, e.IndexFile = chunk[i], fileIdx[i], name
		if length != nil {
			e.Length = length[i]
		} else {
			e.Length = to[i] - from[i]
		}
		if e.ToIndex < e.FromIndex {
			return nil, fileErr(src.ID(), name, fmt.Errorf("episode %d: dataset_to_index %d < dataset_from_index %d", e.Index, e.ToIndex, e.FromIndex))
		}
	}
	if a, ok := cols["tasks"]; ok {
		if err := fillEpisodeTasks(eps, a); err != nil {
			return nil, fileErr(src.ID(), name, fmt.Errorf("column tasks: %w", err))
		}
	}
	return eps, nil
}

func fillEpisodeTasks(eps []schema.Episode, a arrow.Array) error {
	var offs func(i int) (int64, int64)
	var vals arrow.Array
	switch l := a.(type) {
	case *array.List:
		offs, vals = l.ValueOffsets, l.ListValues()
	case *array.LargeList:
		offs, vals = l.ValueOffsets, l.ListValues()
	case *array.String:
		for i := range eps {
			if !l.IsNull(i) {
				eps[i].Tasks = []string{strings.Clone(l.Value(i))}
			}
		}
		return nil
	default:
		return fmt.Errorf("type %s, want list<string>", a.DataType())
	}
	s, ok := vals.(*array.String)
	if !ok {
		if vals.DataType().ID() == arrow.NULL {
			return nil
		}
		return fmt.Errorf("type %s, want list<string>", a.DataType())
	}
	for i := range eps {
		if a.IsNull(i) {
			continue
		}
		b, e := offs(i)
		for j := b; j < e; j++ {
			eps[i].Tasks = append(eps[i].Tasks, strings.Clone(s.Value(int(j))))
		}
	}
	return nil
}
