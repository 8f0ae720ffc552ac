package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// Core frame columns, always read.
const (
	ColIndex        = "index"
	ColTimestamp    = "timestamp"
	ColEpisodeIndex = "episode_index"
	ColFrameIndex   = "frame_index"
	ColTaskIndex    = "task_index"
)

var coreColumns = []string{ColIndex, ColTimestamp, ColEpisodeIndex, ColFrameIndex, ColTaskIndex}

func isCore(name string) bool {
	for _, c := range coreColumns {
		if c == name {
			return true
		}
	}
	return false
}

// Options control ReadUnit.
type Options struct {
	// Features names the numeric features to decode, in output order. nil
	// means every numeric feature of info.json except the core columns
	// (index, timestamp, episode_index, frame_index, task_index), in
	// info.json order; an empty non-nil slice means none. Video and image
	// features are never decoded.
	Features []string
}

// Batch is the decoded, columnar content of one unit: one row group,
// restricted to the unit's selected episodes. Slices are indexed by frame
// and have Len() elements.
type Batch struct {
	// Seq, File and RowGroup identify the unit.
	Seq      int
	File     string
	RowGroup int

	Index, EpisodeIndex, FrameIndex, TaskIndex []int64
	Timestamp                                  []float32

	// HasPersistent and HasEvents say whether the file has the language
	// columns at all (a file written before annotation has neither).
	HasPersistent, HasEvents bool
	// Persistent holds the distinct language_persistent lists of the
	// batch: normally one per episode, since the writer repeats the
	// episode's list on every frame (ReadUnit verifies it, and keeps one
	// list per run of identical frames otherwise).
	Persistent [][]schema.Row
	// PersistentOf gives, per frame, the index into Persistent of the
	// frame's list, or -1 when the frame's list is empty or null. nil when
	// !HasPersistent.
	PersistentOf []int32
	// Events gives, per frame, the frame's language_events rows; nil for
	// the (usual) frames without events. nil when !HasEvents.
	Events [][]schema.Row

	// Features holds the requested numeric features, in request order.
	Features []FeatureData
}

// FeatureData is one numeric feature of a batch: Len()*prod(Shape)
// values of DType, little-endian, frame after frame.
type FeatureData struct {
	Name string
	// DType is the numpy type string of the stored values: "<f4", "<f8",
	// "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "<f2", "|b1".
	DType string
	// Shape is the per-frame shape: the info.json shape when its size
	// matches the stored values, else the stored list length ([] for a
	// scalar column).
	Shape []int
	Data  []byte
}

// Len returns the number of frames.
func (b *Batch) Len() int { return len(b.Index) }

// PersistentRows returns frame i's language_persistent rows.
func (b *Batch) PersistentRows(i int) []schema.Row {
	if b.PersistentOf == nil || b.PersistentOf[i] < 0 {
		return nil
	}
	return b.Persistent[b.PersistentOf[i]]
}

// EventRows returns frame i's language_events rows.
func (b *Batch) EventRows(i int) []schema.Row {
	if b.Events == nil {
		return nil
	}
	return b.Events[i]
}

// Feature returns the named feature's data.
func (b *Batch) Feature(name string) (*FeatureData, bool) {
	for i := range b.Features {
		if b.Features[i].Name == name {
			return &b.Features[i], true
		}
	}
	return nil, false
}

// featureList resolves Options.Features against info.json.
func featureList(ds *schema.Dataset, opts Options) ([]schema.Feature, error) {
	if opts.Features == nil {
		var out []schema.Feature
		for _, f := range ds.Info.Features {
			if f.IsNumeric() && !isCore(f.Name) {
				out = append(out, f)
			}
		}
		return out, nil
	}
	out := make([]schema.Feature, 0, len(opts.Features))
	for _, name := range opts.Features {
		f, ok := ds.Info.Feature(name)
		if !ok {
			return nil, fmt.Errorf("feature %q is not in info.json", name)
		}
		if f.IsVisual() {
			return nil, fmt.Errorf("feature %q is a %s stream: video and image features are not decoded", name, f.DType)
		}
		if !f.IsNumeric() {
			return nil, fmt.Errorf("feature %q has dtype %q, not a numeric feature", name, f.DType)
		}
		out = append(out, f)
	}
	return out, nil
}

// ReadUnit reads and decodes one unit: the core columns, the language
// columns and the requested numeric features of one row group, keeping
// only frames of the unit's selected episodes. Errors are *Error values
// naming the file, row group and, where known, episode, index and column.
func ReadUnit(ctx context.Context, src fetch.Source, ds *schema.Dataset, u Unit, opts Options) (b *Batch, err error) {
	wrap := func(e error) error {
		var se *Error
		if errors.As(e, &se) {
			return e
		}
		ep := int64(-1)
		if len(u.Episodes) == 1 {
			ep = u.Episodes[0]
		}
		return &Error{Dataset: src.ID(), File: u.File, RowGroup: u.RowGroup, Episode: ep, Index: -1, Err: e}
	}
	feats, err := featureList(ds, opts)
	if err != nil {
		return nil, wrap(err)
	}
	defer recoverTo(&err, wrap)
	return frameChecker(src, ds, &u)(readUnit(ctx, src, ds, u, feats))
}

// readUnit reads u through parquet-go: each leaf column chunk page by
// page (decoded levels, dictionary indices), straight into the batch.
func readUnit(ctx context.Context, src fetch.Source, ds *schema.Dataset, u Unit, feats []schema.Feature) (*Batch, error) {
	g, f, err := pqOpen(ctx, src, &u)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := unitReader{src: src, u: &u, g: g, root: g.pf.Root(), ep: -1}
	if len(u.Episodes) == 1 {
		r.ep = u.Episodes[0]
	}
	if g.rg < 0 || g.rg >= len(g.pf.RowGroups()) {
		return nil, r.err(fmt.Errorf("row group out of range (file has %d)", len(g.pf.RowGroups())))
	}
	if err := r.checkColumns(ds, feats); err != nil {
		return nil, err
	}
	// The columns to read: the core ones, the language ones present and
	// the requested features (built here so that they stay on the stack).
	cols := append([]string(nil), coreColumns...)
	var langs []string
	for _, c := range []string{schema.ColumnPersistent, schema.ColumnEvents} {
		if r.root.Column(c) != nil {
			langs = append(langs, c)
		}
	}
	cols = append(cols, langs...)
	for _, f := range feats {
		cols = append(cols, f.Name)
	}
	if p, ok := f.(fetch.Prefetcher); ok {
		if err := p.Prefetch(ctx, pqRanges(g.ft, g.rg, cols)); err != nil {
			return nil, r.err(fmt.Errorf("prefetch: %w", err))
		}
	} else {
		var bufs *readBuffers
		if u.pq != nil {
			bufs = u.pq.bufs
		}
		m := readRanges(f, f.Size(), pqRanges(g.ft, g.rg, cols), bufs.get())
		defer bufs.put(m.buf)
		g.r = m
	}
	r.nrows = int(g.pf.RowGroups()[g.rg].NumRows())
	b := &Batch{Seq: u.Seq, File: u.File, RowGroup: u.RowGroup}
	keep, err := r.readCore(b)
	if err != nil {
		return nil, err
	}
	d := decoder{src: src, u: &u, n: r.nrows, keep: keep, b: b, langs: map[string]langReader{}}
	for _, name := range langs {
		fl, err := pqReadLang(g, name, r.nrows)
		if err != nil {
			e := r.colErr(name, err)
			e.Episode = r.ep
			return nil, e
		}
		defer g.langs.put(fl)
		d.langs[name] = fl
	}
	if err := d.language(); err != nil {
		return nil, err
	}
	if err := r.readFeatures(b, feats, keep); err != nil {
		return nil, err
	}
	return b, nil
}

// unitReader holds what the steps of readUnit share: the open row group
// and the unit's identity for errors.
type unitReader struct {
	src   fetch.Source
	u     *Unit
	g     *pqGroup
	root  *parquet.Column
	ep    int64 // the unit's episode when it has one, else -1
	nrows int   // rows of the row group
}

// err is an error of the whole unit.
func (r *unitReader) err(err error) *Error {
	return &Error{Dataset: r.src.ID(), File: r.u.File, RowGroup: r.u.RowGroup, Episode: r.ep, Index: -1, Err: err}
}

// colErr is an error of one column.
func (r *unitReader) colErr(col string, err error) *Error {
	return &Error{Dataset: r.src.ID(), File: r.u.File, RowGroup: r.u.RowGroup, Episode: -1, Index: -1, Column: col, Err: err}
}

// checkColumns checks that the file has the core columns and the
// requested features, and that its language columns are declared.
func (r *unitReader) checkColumns(ds *schema.Dataset, feats []schema.Feature) error {
	for _, c := range coreColumns {
		if r.root.Column(c) == nil {
			return r.err(fmt.Errorf("missing column %s", c))
		}
	}
	for _, c := range []string{schema.ColumnPersistent, schema.ColumnEvents} {
		if r.root.Column(c) != nil && !ds.Info.HasLanguage(c) {
			return r.colErr(c, errors.New("language column present in the data file but not declared in meta/info.json features"))
		}
	}
	for _, f := range feats {
		if r.root.Column(f.Name) == nil {
			return r.colErr(f.Name, errors.New("feature declared in meta/info.json is missing from the data file"))
		}
	}
	return nil
}

// read decodes the named leaf column of the row group.
func (r *unitReader) read(name string) (*pqColumn, error) {
	leaf, err := pqLeaf(r.root, name)
	if err != nil {
		return nil, r.colErr(name, err)
	}
	c, err := pqRead(r.g, leaf, r.nrows)
	if err != nil {
		return nil, r.colErr(name, err)
	}
	return c, nil
}

// readCore fills b's core columns and returns keep: the rows of the
// selected episodes, nil when every row is kept.
func (r *unitReader) readCore(b *Batch) (keep []int, err error) {
	epc, err := r.read(ColEpisodeIndex)
	if err != nil {
		return nil, err
	}
	eps, err := pqInts(epc)
	if err != nil {
		return nil, r.colErr(ColEpisodeIndex, err)
	}
	b.EpisodeIndex = eps
	if r.u.Partial {
		for i, e := range eps {
			if containsSorted(r.u.Episodes, e) {
				keep = append(keep, i)
			}
		}
		if len(keep) == r.nrows {
			keep = nil
		} else {
			if keep == nil {
				keep = []int{}
			}
			b.EpisodeIndex = gatherInts(eps, keep)
		}
	}
	for _, c := range []struct {
		name string
		dst  *[]int64
	}{{ColIndex, &b.Index}, {ColFrameIndex, &b.FrameIndex}, {ColTaskIndex, &b.TaskIndex}} {
		col, err := r.read(c.name)
		if err != nil {
			return nil, err
		}
		v, err := pqInts(col)
		if err != nil {
			return nil, r.colErr(c.name, err)
		}
		if keep != nil {
			v = gatherInts(v, keep)
		}
		*c.dst = v
	}
	ts, err := r.read(ColTimestamp)
	if err != nil {
		return nil, err
	}
	if b.Timestamp, err = pqFloats(ts, keep); err != nil {
		return nil, r.colErr(ColTimestamp, err)
	}
	return keep, nil
}

// readFeatures appends the requested numeric features to b, restricted to
// the rows in keep (all rows when nil).
func (r *unitReader) readFeatures(b *Batch, feats []schema.Feature, keep []int) error {
	for _, f := range feats {
		c, err := r.read(f.Name)
		if err != nil {
			return err
		}
		per := c.size
		for _, d := range c.dims {
			per *= d
		}
		data := c.data
		if keep != nil {
			data = make([]byte, 0, len(keep)*per)
			for _, row := range keep {
				data = append(data, c.data[row*per:(row+1)*per]...)
			}
		}
		if data == nil {
			data = []byte{}
		}
		b.Features = append(b.Features, FeatureData{Name: f.Name, DType: c.dtype, Shape: frameShape(f.Shape, c.dims), Data: data})
	}
	return nil
}

// pqRanges returns the byte ranges of the column chunks of the named
// top-level columns in row group rg.
func pqRanges(ft *footer, rg int, names []string) []fetch.Range {
	md := ft.file.Metadata()
	if rg >= len(md.RowGroups) {
		return nil
	}
	cols := md.RowGroups[rg].Columns
	rs := make([]fetch.Range, 0, len(ft.leaves))
	for i, c := range ft.leaves {
		if i >= len(cols) || !slices.Contains(names, c.Path()[0]) {
			continue
		}
		if off, n := chunkSpan(&cols[i].MetaData); n > 0 {
			rs = append(rs, fetch.Range{Off: off, Len: n})
		}
	}
	return mergeRanges(rs)
}

// decoder assembles the language columns of a batch.
type decoder struct {
	src   fetch.Source
	u     *Unit
	n     int
	keep  []int // selected rows when filtering; nil = all
	langs map[string]langReader
	b     *Batch
}

func (d *decoder) colErr(col string, err error) *Error {
	return &Error{Dataset: d.src.ID(), File: d.u.File, RowGroup: d.u.RowGroup, Episode: -1, Index: -1, Column: col, Err: err}
}

func (d *decoder) frameErr(col string, i int, err error) *Error {
	e := d.colErr(col, err)
	e.Episode, e.Index = d.b.EpisodeIndex[i], d.b.Index[i]
	return e
}

func containsSorted(s []int64, v int64) bool {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(s) && s[lo] == v
}

func gatherInts(v []int64, keep []int) []int64 {
	out := make([]int64, len(keep))
	for i, k := range keep {
		out[i] = v[k]
	}
	return out
}

// rows returns the number of output frames.
func (d *decoder) rows() int {
	if d.keep != nil {
		return len(d.keep)
	}
	return d.n
}

// row maps output frame i to its row in the row group.
func (d *decoder) row(i int) int {
	if d.keep != nil {
		return d.keep[i]
	}
	return i
}

// langReader reads a language column of a row group.
type langReader interface {
	// frameLen returns the number of rows of row-group row r.
	frameLen(r int) int
	// sameFrames reports whether rows r1 and r2 hold identical lists.
	sameFrames(r1, r2 int) bool
	// repeats reports whether rows r+1..end-1 all hold row r's list
	// (false: not proven).
	repeats(r, end int) bool
	// decodeFrame decodes row r's list, into the front of *slab when it
	// has room (nil: allocated).
	decodeFrame(r int, buf *jsonBuf, slab *[]schema.Row) ([]schema.Row, error)
}

func (d *decoder) language() error {
	b := d.b
	var buf jsonBuf
	if lr := d.langs[schema.ColumnPersistent]; lr != nil {
		b.HasPersistent = true
		b.PersistentOf = make([]int32, d.rows())
		prevEp, prevR, prevK := int64(math.MinInt64), 0, int32(-1)
		// The writer broadcasts an episode's persistent rows on every one of
		// its frames: at an episode's first frame the whole episode is
		// checked at once (repeats), then frame by frame if that fails.
		epEnd := 0 // end of the episode of frame i (spans: keep == nil)
		for i := 0; i < len(b.PersistentOf); i++ {
			r := d.row(i)
			ep := b.EpisodeIndex[i]
			first := d.keep == nil && i >= epEnd
			if first {
				for epEnd = i + 1; epEnd < len(b.EpisodeIndex) && b.EpisodeIndex[epEnd] == ep; epEnd++ {
				}
			}
			if lr.frameLen(r) == 0 {
				b.PersistentOf[i] = -1
				continue
			}
			if prevK >= 0 && ep == prevEp && lr.sameFrames(prevR, r) {
				b.PersistentOf[i] = prevK
				continue
			}
			rows, err := lr.decodeFrame(r, &buf, nil)
			if err != nil {
				return d.frameErr(schema.ColumnPersistent, i, err)
			}
			prevEp, prevR, prevK = ep, r, int32(len(b.Persistent))
			b.Persistent = append(b.Persistent, rows)
			b.PersistentOf[i] = prevK
			if first && lr.repeats(r, epEnd) {
				for i++; i < epEnd; i++ {
					b.PersistentOf[i] = prevK
				}
				i--
			}
		}
	}
	if lr := d.langs[schema.ColumnEvents]; lr != nil {
		b.HasEvents = true
		b.Events = make([][]schema.Row, d.rows())
		// the frames' rows in one allocation (most frames of an annotated
		// episode have events)
		total := 0
		for i := range b.Events {
			total += lr.frameLen(d.row(i))
		}
		slab := make([]schema.Row, total)
		for i := range b.Events {
			r := d.row(i)
			if lr.frameLen(r) == 0 {
				continue
			}
			rows, err := lr.decodeFrame(r, &buf, &slab)
			if err != nil {
				return d.frameErr(schema.ColumnEvents, i, err)
			}
			b.Events[i] = rows
		}
	}
	return nil
}

// pqFile is what a data file's units share (Plan hands every unit of a
// file the same pqFile): the footer Plan read and checked (pqfile.go),
// from which each ReadUnit reads pages of its own open file
// (FileColumnChunk.PagesFrom), and the plan's read buffers.
type pqFile struct {
	footer *footer
	size   int64        // the file's size, when footer is nil (units keep their row group's, footers.go)
	head   []byte       // the footer before its row_groups list, when footer is nil
	foot   []byte       // the footer after its row_groups list, when footer is nil
	store  *Footers     // the store the footer was read through, when footer is nil
	bufs   *readBuffers // the plan's read buffers (nil: none kept)
	strs   stringCache  // language strings shared by the file's units
	langs  langPool     // language columns' trees and buffers, between units
}

// stringCache shares the short strings of a file's language values
// between the units that read it: the same roles, styles and cameras
// recur in every row group (one dictionary per column chunk), and each
// row group would make them again. Longer texts (contents) are mostly
// distinct and are not kept: hashing them costs more than making them.
// The strings are immutable; the rows of every batch point at them.
// Lookups read an immutable snapshot without locking; a string not in it
// is looked up (and added) under the lock, and the snapshot is renewed
// each time the strings have doubled. Bounded: stringCacheMax strings of
// at most stringCacheLen bytes per file.
type stringCache struct {
	snap atomic.Pointer[map[string]*string]
	mu   sync.Mutex
	m    map[string]*string // every string kept (the snapshot's and newer)
}

const (
	stringCacheMax = 1024
	stringCacheLen = 32
)

// get returns a string holding v, shared when the cache has or can take it.
func (c *stringCache) get(v []byte) *string {
	if c == nil || len(v) > stringCacheLen {
		s := string(v)
		return &s
	}
	if m := c.snap.Load(); m != nil {
		if p := (*m)[string(v)]; p != nil {
			return p
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.m[string(v)]; p != nil {
		return p
	}
	s := string(v)
	if len(c.m) >= stringCacheMax {
		return &s
	}
	if c.m == nil {
		c.m = make(map[string]*string)
	}
	c.m[s] = &s
	if old := c.snap.Load(); old == nil || len(c.m) >= 2*len(*old) {
		snap := make(map[string]*string, len(c.m))
		for k, p := range c.m {
			snap[k] = p
		}
		c.snap.Store(&snap)
	}
	return &s
}

// readBuffers keeps a few read buffers (memRanges) for the next units of a
// plan: a plan keeps at most readBuffersKept, however many files it has.
type readBuffers struct{ free chan []byte }

// readBuffersKept is about one buffer per worker.
const readBuffersKept = 4

func newReadBuffers() *readBuffers {
	return &readBuffers{free: make(chan []byte, readBuffersKept)}
}

// get returns a buffer to reuse, or nil.
func (r *readBuffers) get() []byte {
	if r == nil {
		return nil
	}
	select {
	case b := <-r.free:
		return b
	default:
		return nil
	}
}

// put keeps b for a later unit (nothing refers to it once the unit is
// decoded: parquet-go copies page bytes out of it); when enough are kept,
// b is left to the garbage collector.
func (r *readBuffers) put(b []byte) {
	if r == nil || b == nil {
		return
	}
	select {
	case r.free <- b:
	default:
	}
}

// pqGroup is one row group of an opened file: where ReadUnit reads pages.
type pqGroup struct {
	ft    *footer
	strs  *stringCache // nil: none
	langs *langPool    // nil: none
	pf    *parquet.File
	rg    int
	r     io.ReaderAt
}

// pages returns a page reader of leaf column c's chunk.
func (g *pqGroup) pages(c int) *parquet.FilePages {
	return g.pf.RowGroups()[g.rg].ColumnChunks()[c].(*parquet.FileColumnChunk).PagesFrom(g.r)
}

// numValues returns the footer's value count of leaf column c's chunk.
func (g *pqGroup) numValues(c int) int64 {
	return g.pf.RowGroups()[g.rg].ColumnChunks()[c].NumValues()
}

// pqOpen opens u's data file for reading u's row group: it is the read
// path's one dependency on the footer, the one Plan read (u.pq); a unit
// without one (not from Plan) has its footer read from the file.
func pqOpen(ctx context.Context, src fetch.Source, u *Unit) (*pqGroup, fetch.File, error) {
	p, rg, err := openUnitFile(ctx, src, u)
	if err != nil {
		if se := (*Error)(nil); errors.As(err, &se) && se.RowGroup < 0 {
			se.RowGroup = u.RowGroup
		}
		return nil, nil, err
	}
	g := &pqGroup{ft: p.footer, pf: p.file, rg: rg, r: p.f}
	if u.pq != nil {
		g.strs, g.langs = &u.pq.strs, &u.pq.langs
	}
	return g, p.f, nil
}

// memRanges serves reads inside its byte ranges from memory, others from
// the file: a unit's column chunks are read with one ReadAt per run of
// adjacent chunks, not a few per page.
type memRanges struct {
	f    io.ReaderAt
	rs   []fetch.Range
	bufs [][]byte
	buf  []byte // holds bufs
}

// readRanges reads the ranges (sorted, disjoint) of f that lie inside
// the file into buf (replaced when too small); a range that cannot be
// read is left to the file.
func readRanges(f io.ReaderAt, size int64, rs []fetch.Range, buf []byte) *memRanges {
	total := int64(0)
	for _, r := range rs {
		if r.Off >= 0 && r.Len > 0 && r.Off+r.Len <= size {
			total += r.Len
		}
	}
	if int64(cap(buf)) < total {
		// headroom: a kept buffer serves the next units, whose row groups
		// are rarely all the same size
		buf = make([]byte, total, total+total/2)
	}
	buf = buf[:total]
	m := &memRanges{f: f, buf: buf, rs: make([]fetch.Range, 0, len(rs)), bufs: make([][]byte, 0, len(rs))}
	at := int64(0)
	for _, r := range rs {
		if r.Off < 0 || r.Len <= 0 || r.Off+r.Len > size {
			continue
		}
		b := buf[at : at+r.Len : at+r.Len]
		if n, err := f.ReadAt(b, r.Off); err != nil || n != len(b) {
			continue
		}
		at += r.Len
		m.rs, m.bufs = append(m.rs, r), append(m.bufs, b)
	}
	return m
}

func (m *memRanges) ReadAt(p []byte, off int64) (int, error) {
	for i, r := range m.rs {
		if off >= r.Off && off+int64(len(p)) <= r.Off+r.Len {
			return copy(p, m.bufs[i][off-r.Off:]), nil
		}
	}
	return m.f.ReadAt(p, off)
}
