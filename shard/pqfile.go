package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/lrstream/lrstream/fetch"
)

// This file is shard's parquet file layer, on github.com/parquet-go/parquet-go:
// a file's footer read and checked once (footer, kept by Plan in the
// units so that reading a unit does not read it again), the file opened
// for its column chunks (pfile: pages, Hub range prefetch), and typed
// reads of the columns of small metadata tables (pqtable.go).

// footer is a parquet file's parsed footer: schema, row groups, column
// chunk metadata. Its *parquet.File holds the footer alone (its reader
// serves the footer's bytes and nothing else), so it is safe to share
// between goroutines; column pages are read through a pfile.
type footer struct {
	file *parquet.File
	// size is the file's length in bytes.
	size int64
	// raw is the footer's thrift bytes; tail is raw followed by its
	// length and "PAR1" (what a footer cache keeps).
	raw, tail []byte
	// shape is what the thrift walk learnt (row groups' byte spans).
	shape footerShape
	// leaves lists the leaf columns in schema order (leaf i is column
	// chunk i of every row group).
	leaves []*parquet.Column
}

// pageReadBuffer is the read buffer of page readers (PagesFrom): a usual
// column chunk in one read.
const pageReadBuffer = 256 << 10

// errNotFooter is returned by a footer's reader for bytes outside the
// footer: column data is read from a pfile.
var errNotFooter = errors.New("parquet footer reader: column data is read through the open file")

// footerBytes serves the bytes [off, off+len(b)) of a file.
type footerBytes struct {
	off int64
	b   []byte
}

func (r *footerBytes) ReadAt(p []byte, off int64) (int, error) {
	if off < r.off || off-r.off > int64(len(r.b)) || int64(len(p)) > int64(len(r.b))-(off-r.off) {
		return 0, errNotFooter
	}
	return copy(p, r.b[off-r.off:]), nil
}

// readFooter reads and checks the footer of f. It never panics: a
// corrupt footer is an error saying what is wrong.
func readFooter(f io.ReaderAt, size int64) (ft *footer, err error) {
	if size < 12 {
		return nil, fmt.Errorf("not a parquet file (%d bytes)", size)
	}
	// The length and magic, then the footer: two reads, which a Hub file
	// serves from its tail, fetched whole by the first.
	var end [8]byte
	if _, err := f.ReadAt(end[:], size-8); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the footer: %w", err)
	}
	switch m := string(end[4:]); m {
	case "PAR1":
	case "PARE":
		return nil, errors.New("encrypted parquet files are not supported")
	default:
		return nil, fmt.Errorf("not a parquet file (ends with %q, not \"PAR1\")", m)
	}
	flen := int64(binary.LittleEndian.Uint32(end[:4]))
	if flen > size-12 {
		return nil, fmt.Errorf("corrupt footer: footer length %d exceeds the %d-byte file", flen, size)
	}
	n := flen + 8
	tail := make([]byte, n)
	copy(tail[flen:], end[:])
	if _, err := f.ReadAt(tail[:flen], size-n); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the footer: %w", err)
	}
	return parseFooter(tail, size)
}

// parseFooter parses and checks a file's tail: its footer, the footer's
// 4-byte length and "PAR1" (what readFooter reads, or a footer cache
// kept).
func parseFooter(tail []byte, size int64) (ft *footer, err error) {
	n := int64(len(tail))
	if n < 8 || string(tail[n-4:]) != "PAR1" {
		return nil, errors.New("not a parquet footer (no \"PAR1\" at its end)")
	}
	flen := int64(binary.LittleEndian.Uint32(tail[n-8:]))
	if flen != n-8 || flen > size-12 {
		return nil, fmt.Errorf("corrupt footer: footer length %d for %d footer bytes of a %d-byte file", flen, n-8, size)
	}
	raw := tail[:flen]
	shape, err := checkFooterThrift(raw)
	if err != nil {
		return nil, err
	}
	if len(shape.rgSpans) > 0 && (shape.rgList[0] <= 0 || shape.rgList[1] > len(raw)) {
		return nil, errors.New("corrupt footer: row groups outside the footer")
	}
	for rg, c := range shape.rgColumns {
		if c != shape.leaves {
			return nil, fmt.Errorf("row group %d: %d column chunks for %d columns", rg, c, shape.leaves)
		}
	}
	defer recoverTo(&err, func(e error) error { return e })
	pf, err := parquet.OpenFile(&footerBytes{off: size - n, b: tail}, size,
		parquet.SkipMagicBytes(true), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true),
		parquet.ReadBufferSize(pageReadBuffer))
	if err != nil {
		return nil, fmt.Errorf("parquet footer: %w", err)
	}
	ft = &footer{file: pf, size: size, raw: raw, tail: tail, shape: shape}
	if err := ft.check(); err != nil {
		return nil, err
	}
	return ft, nil
}

// check rejects what parquet-go would read wrongly or crash on: leaf
// columns whose physical type is invalid or disagrees with the type
// parquet-go reads them as (it goes by the logical annotation), negative
// counts, and column chunks whose bytes are not inside the file.
func (ft *footer) check() error {
	md := ft.file.Metadata()
	var elems []*format.SchemaElement
	for i := range md.Schema {
		if md.Schema[i].Type.Valid {
			elems = append(elems, &md.Schema[i])
		}
	}
	var walk func(c *parquet.Column)
	walk = func(c *parquet.Column) {
		if c.Leaf() {
			ft.leaves = append(ft.leaves, c)
			return
		}
		for _, k := range c.Columns() {
			walk(k)
		}
	}
	walk(ft.file.Root())
	if len(ft.leaves) != len(elems) {
		return fmt.Errorf("corrupt schema: %d leaf columns, %d typed schema elements", len(ft.leaves), len(elems))
	}
	for i, c := range ft.leaves {
		e := elems[i]
		kind := parquet.Kind(e.Type.V)
		switch kind {
		case parquet.Boolean, parquet.Int32, parquet.Int64, parquet.Int96, parquet.Float, parquet.Double, parquet.ByteArray:
		case parquet.FixedLenByteArray:
			if !e.TypeLength.Valid || e.TypeLength.V <= 0 {
				return fmt.Errorf("column %s: invalid fixed_len_byte_array length %d", columnPath(c), e.TypeLength.V)
			}
		default:
			return fmt.Errorf("column %s: invalid physical type %d", columnPath(c), e.Type.V)
		}
		_, isNull := e.LogicalType.Value.(*format.NullType) // allowed on any physical type
		if k := c.Type().Kind(); k != kind && !isNull {
			return fmt.Errorf("column %s: type %s on physical type %s", columnPath(c), c.Type(), kind)
		}
		if c.Index() != i {
			return fmt.Errorf("corrupt schema: leaf %s has index %d, want %d", columnPath(c), c.Index(), i)
		}
	}
	for rg := range md.RowGroups {
		g := &md.RowGroups[rg]
		if g.NumRows < 0 {
			return fmt.Errorf("row group %d: negative row count", rg)
		}
		for i := range g.Columns {
			cc := &g.Columns[i]
			path := func() string { return columnPath(ft.leaves[i]) } // for errors only: no string per row group × leaf
			if cc.FilePath != "" {
				return fmt.Errorf("row group %d column %s: column chunk in another file (%q) is not supported", rg, path(), cc.FilePath)
			}
			m := &cc.MetaData
			if m.DictionaryPageOffset != 0 && m.DictionaryPageOffset > m.DataPageOffset {
				return fmt.Errorf("row group %d column %s: dictionary page offset %d after data page offset %d", rg, path(), m.DictionaryPageOffset, m.DataPageOffset)
			}
			if err := checkCodec(m.Codec); err != nil {
				return fmt.Errorf("row group %d column %s: %w", rg, path(), err)
			}
			off, n := chunkSpan(m)
			if off < 0 || n < 0 || off > ft.size || n > ft.size-off || m.NumValues < 0 {
				return fmt.Errorf("row group %d column %s: column chunk [%d, +%d) outside the %d-byte file", rg, path(), off, n, ft.size)
			}
		}
	}
	return nil
}

// checkCodec accepts the compression codecs parquet-go decodes correctly.
// LZ4_RAW is refused: parquet-go v0.32's lz4 codec returns a new buffer
// when the page compresses less than 3×, and its page reader keeps the
// buffer it passed in, so such pages decode as zeros (levels fail to
// decode, or a required column reads zeros). pyarrow's compression="lz4"
// writes LZ4_RAW. The deprecated Hadoop-framed LZ4 and LZO are not
// implemented by parquet-go.
func checkCodec(c format.CompressionCodec) error {
	switch c {
	case format.Uncompressed, format.Snappy, format.Gzip, format.Brotli, format.Zstd:
		return nil
	case format.Lz4Raw:
		return fmt.Errorf("LZ4_RAW compression is not read (parquet-go v0.32 decodes LZ4_RAW pages that compress less than 3x wrongly); rewrite the file with another codec, e.g. pyarrow's compression=\"snappy\" (LeRobot's default) or \"zstd\"")
	default:
		return fmt.Errorf("compression %s is not supported (snappy, gzip, brotli, zstd or none are); rewrite the file with e.g. pyarrow's compression=\"snappy\" (LeRobot's default) or \"zstd\"", c)
	}
}

// columnPath is a column's dotted path, as errors name columns.
func columnPath(c *parquet.Column) string {
	s := ""
	for i, p := range c.Path() {
		if i > 0 {
			s += "."
		}
		s += p
	}
	return s
}

// chunkSpan is the byte range parquet-go reads for a column chunk: from
// its dictionary page when it has one, over its compressed size.
func chunkSpan(m *format.ColumnMetaData) (off, n int64) {
	off = m.DataPageOffset
	if m.DictionaryPageOffset != 0 {
		off = m.DictionaryPageOffset
	}
	return off, m.TotalCompressedSize
}

// numRowGroups is the file's row group count.
func (ft *footer) numRowGroups() int { return len(ft.file.Metadata().RowGroups) }

// rowGroup returns row group rg's metadata.
func (ft *footer) rowGroup(rg int) *format.RowGroup { return &ft.file.Metadata().RowGroups[rg] }

// column returns the top-level column name, or nil.
func (ft *footer) column(name string) *parquet.Column { return ft.file.Root().Column(name) }

// topLevel returns the names of the top-level columns.
func (ft *footer) topLevel() map[string]bool {
	out := map[string]bool{}
	for _, c := range ft.file.Root().Columns() {
		out[c.Name()] = true
	}
	return out
}

// leafIndex returns the leaf index of the top-level column name when it is
// a leaf (a flat column), else -1.
func (ft *footer) leafIndex(name string) int {
	c := ft.column(name)
	if c == nil || !c.Leaf() {
		return -1
	}
	return c.Index()
}

// leavesUnder returns the leaf indices under the named top-level columns,
// in schema order (absent names are skipped).
func (ft *footer) leavesUnder(names []string) []int {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []int
	for i, c := range ft.leaves {
		if want[c.Path()[0]] {
			out = append(out, i)
		}
	}
	return out
}

// ranges lists the byte ranges of the column chunks (leaves × row
// groups), sorted and merged where they touch.
func (ft *footer) ranges(leaves, rowGroups []int) []fetch.Range {
	var rs []fetch.Range
	for _, rg := range rowGroups {
		g := ft.rowGroup(rg)
		for _, c := range leaves {
			if off, n := chunkSpan(&g.Columns[c].MetaData); n > 0 {
				rs = append(rs, fetch.Range{Off: off, Len: n})
			}
		}
	}
	return mergeRanges(rs)
}

// mergeRanges sorts byte ranges and merges those that overlap or touch.
func mergeRanges(rs []fetch.Range) []fetch.Range {
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

// int64Stats returns the min and max statistics of leaf column leaf in
// row group rg when the footer has them and the column is a signed INT64
// (min_value/max_value, or the deprecated min/max, whose order is the
// same for signed integers).
func (ft *footer) int64Stats(rg, leaf int) (lo, hi int64, ok bool) {
	if leaf < 0 || leaf >= len(ft.leaves) || ft.leaves[leaf].Type().Kind() != parquet.Int64 {
		return 0, 0, false
	}
	if isInt, unsigned := intType(ft.leaves[leaf].Type()); !isInt || unsigned {
		return 0, 0, false
	}
	st := &ft.rowGroup(rg).Columns[leaf].MetaData.Statistics
	min, max := st.MinValue, st.MaxValue
	if len(min) != 8 || len(max) != 8 {
		min, max = st.Min, st.Max
	}
	if len(min) != 8 || len(max) != 8 {
		return 0, 0, false
	}
	lo, hi = int64(binary.LittleEndian.Uint64(min)), int64(binary.LittleEndian.Uint64(max))
	return lo, hi, lo <= hi
}

// pfile is a parquet file open for reading its column chunks.
type pfile struct {
	*footer
	f    fetch.File
	src  fetch.Source
	name string
}

// openFile opens the parquet file name of src, reading its footer unless ft
// (from an earlier read of the same file) is given. Errors are *Error
// values naming the file.
func openFile(ctx context.Context, src fetch.Source, name string, ft *footer) (*pfile, error) {
	f, err := src.Open(ctx, name)
	if err != nil {
		return nil, fileErr(src.ID(), name, err)
	}
	if ft == nil {
		if ft, err = readFooter(f, f.Size()); err != nil {
			f.Close()
			return nil, fileErr(src.ID(), name, err)
		}
	} else if f.Size() != ft.size {
		f.Close()
		return nil, fileErr(src.ID(), name, fmt.Errorf("file changed: %d bytes, %d when its footer was read", f.Size(), ft.size))
	}
	return &pfile{footer: ft, f: f, src: src, name: name}, nil
}

// Close closes the file.
func (p *pfile) Close() error { return p.f.Close() }

// prefetch announces the column chunks of leaves × rowGroups to a remote
// file, which fetches them in few range requests.
func (p *pfile) prefetch(ctx context.Context, leaves, rowGroups []int) error {
	pf, ok := p.f.(fetch.Prefetcher)
	if !ok || len(leaves) == 0 {
		return nil
	}
	if err := pf.Prefetch(ctx, p.ranges(leaves, rowGroups)); err != nil {
		return fileErr(p.src.ID(), p.name, fmt.Errorf("prefetch: %w", err))
	}
	return nil
}

// pages returns a reader of the pages of leaf column leaf in row group rg.
// The caller closes it.
func (p *pfile) pages(rg, leaf int) *parquet.FilePages {
	cc := p.file.RowGroups()[rg].ColumnChunks()[leaf].(*parquet.FileColumnChunk)
	return cc.PagesFrom(p.f)
}
