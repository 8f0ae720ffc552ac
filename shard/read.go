package shard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

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

// readCounts counts, for tests, the language columns read by the
// low-level path (fast) and the leaves read by the page path (pages).
type readCounts struct {
	fast, pages atomic.Int64
}

func (c *readCounts) page() {
	if c != nil {
		c.pages.Add(1)
	}
}

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

	// noFast disables the low-level language path (tests compare both).
	noFast bool
	// noPages disables the page path of the low-level readers (pages.go),
	// leaving arrow-go's column reader (tests compare both).
	noPages bool
	// noRawPages makes the page path take every page from arrow-go's page
	// reader instead of rawPages (rawpages.go; tests compare both).
	noRawPages bool
	// counts, when set, counts the reads of the low-level paths (tests).
	counts *readCounts
	// parquetGo reads through the parquet-go path (pqgo.go, pqlang.go)
	// instead of the arrow-go paths (tests compare both).
	parquetGo bool
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
	if opts.parquetGo {
		return readUnitPQ(ctx, src, ds, u, opts, feats)
	}
	pf, err := openParquet(ctx, src, u.File, u.meta)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	defer recoverTo(&err, wrap)

	md := pf.rdr.MetaData()
	if u.RowGroup < 0 || u.RowGroup >= md.NumRowGroups() {
		return nil, wrap(fmt.Errorf("row group out of range (file has %d)", md.NumRowGroups()))
	}
	var pages *pageView // the page path's view of the file (pages.go)
	if !opts.noPages {
		pages = pf.pageView(!opts.noRawPages, opts.counts)
		defer pages.close()
	}
	present := map[string]bool{}
	root := md.Schema.Root()
	for i := 0; i < root.NumFields(); i++ {
		present[root.Field(i).Name()] = true
	}
	cols := append([]string(nil), coreColumns...)
	for _, c := range coreColumns {
		if !present[c] {
			return nil, wrap(fmt.Errorf("missing column %s", c))
		}
	}
	for _, c := range []string{schema.ColumnPersistent, schema.ColumnEvents} {
		if !present[c] {
			continue
		}
		if !ds.Info.HasLanguage(c) {
			return nil, &Error{Dataset: src.ID(), File: u.File, RowGroup: u.RowGroup, Episode: -1, Index: -1, Column: c,
				Err: errors.New("language column present in the data file but not declared in meta/info.json features")}
		}
		cols = append(cols, c)
	}
	for _, f := range feats {
		if !present[f.Name] {
			return nil, &Error{Dataset: src.ID(), File: u.File, RowGroup: u.RowGroup, Episode: -1, Index: -1, Column: f.Name,
				Err: errors.New("feature declared in meta/info.json is missing from the data file")}
		}
		if !isCore(f.Name) {
			cols = append(cols, f.Name)
		}
	}
	leaves := leafColumns(md, cols)
	if p, ok := pf.f.(fetch.Prefetcher); ok {
		if err := p.Prefetch(ctx, chunkRanges(md, leaves, []int{u.RowGroup})); err != nil {
			return nil, wrap(fmt.Errorf("prefetch: %w", err))
		}
	}
	// Language columns of a simple shape skip pqarrow (see fastlang.go).
	type fastPlan struct {
		name    string
		cols    []int
		fields  []fastField
		tcArrow []int
	}
	var fasts []fastPlan
	if !opts.noFast {
		for _, c := range []string{schema.ColumnPersistent, schema.ColumnEvents} {
			if !present[c] {
				continue
			}
			if fc, ff, tca, ok := planFastLang(md, c, leaves); ok {
				fasts = append(fasts, fastPlan{c, fc, ff, tca})
				leaves = slices.DeleteFunc(leaves, func(l int) bool {
					return md.Schema.ColumnRoot(l).Name() == c && !slices.Contains(tca, l)
				})
			}
		}
	}
	// Flat core columns too (pqarrow's per-column setup is significant for
	// short row groups).
	var flats []int
	if !opts.noFast {
		for _, c := range coreColumns {
			idx := md.Schema.ColumnIndexByName(c)
			if idx >= 0 && flatColumn(md, idx) {
				flats = append(flats, idx)
				leaves = slices.DeleteFunc(leaves, func(l int) bool { return l == idx })
			}
		}
	}
	arrs := make(map[string]arrow.Array, len(cols))
	defer releaseAll(arrs)
	owned := map[string]bool{} // arrays of fresh Go memory, see decoder.owned
	nrows := md.RowGroup(u.RowGroup).NumRows()
	// Numeric list features (list or fixed_size_list of float/double/
	// int64/int32, every value present) too; anything else stays with
	// pqarrow.
	if !opts.noFast {
		for _, f := range feats {
			if isCore(f.Name) {
				continue
			}
			idx := md.Schema.ColumnIndexByName(f.Name + ".list.element")
			if idx < 0 || !slices.Contains(leaves, idx) || !listColumn(md, idx) {
				continue
			}
			a, ok := readList(pf.rdr, pages, u.RowGroup, idx, nrows)
			if !ok {
				continue
			}
			arrs[f.Name], owned[f.Name] = a, true
			leaves = slices.DeleteFunc(leaves, func(l int) bool { return l == idx })
		}
	}
	if len(leaves) > 0 {
		fr, err := pqarrow.NewFileReader(pf.rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return nil, wrap(fmt.Errorf("parquet schema: %w", err))
		}
		tbl, err := fr.ReadRowGroups(ctx, leaves, []int{u.RowGroup})
		if err != nil {
			return nil, wrap(fmt.Errorf("read: %w", err))
		}
		defer tbl.Release()
		for i := 0; i < int(tbl.NumCols()); i++ {
			a, err := oneChunk(tbl.Column(i).Data())
			if err != nil {
				return nil, wrap(err)
			}
			arrs[tbl.Schema().Field(i).Name] = a
		}
		if tbl.NumRows() != nrows {
			return nil, wrap(fmt.Errorf("%d rows decoded, footer says %d", tbl.NumRows(), nrows))
		}
	}
	for _, idx := range flats {
		name := md.Schema.Column(idx).Name()
		a, err := readFlat(pf.rdr, pages, u.RowGroup, idx, nrows)
		if err != nil {
			return nil, &Error{Dataset: src.ID(), File: u.File, RowGroup: u.RowGroup, Episode: -1, Index: -1, Column: name, Err: err}
		}
		arrs[name], owned[name] = a, true
	}
	d := decoder{src: src, u: &u, arrs: arrs, owned: owned, n: int(nrows)}
	defer func() {
		for _, fl := range d.fast {
			fl.release()
		}
	}()
	for _, f := range fasts {
		fl, err := readFastLang(pf.rdr, pages, pf.f.Size(), u.RowGroup, f.name, f.cols, f.fields, d.n)
		if err != nil {
			e := d.colErr(f.name, err)
			if len(u.Episodes) == 1 {
				e.Episode = u.Episodes[0]
			}
			return nil, e
		}
		if len(f.tcArrow) > 0 {
			a, ok := arrs[f.name]
			if !ok {
				return nil, d.colErr(f.name, errors.New("tool_calls not read"))
			}
			if err := fl.bindToolCalls(f.name, a, d.n); err != nil {
				return nil, d.colErr(f.name, err)
			}
		}
		if d.fast == nil {
			d.fast = map[string]*fastLang{}
		}
		d.fast[f.name] = fl
		if opts.counts != nil {
			opts.counts.fast.Add(1)
		}
	}
	return frameChecker(src, ds, &u)(d.decode(feats))
}

type decoder struct {
	src  fetch.Source
	u    *Unit
	arrs map[string]arrow.Array
	// owned names the arrays whose value buffers are fresh Go memory that
	// nothing else refers to (readList's and readFlat's): a feature or
	// frame column taking all of such a buffer keeps it instead of a copy.
	owned map[string]bool
	n     int
	keep  []int // selected rows when filtering; nil = all
	fast  map[string]*fastLang
	langs map[string]langReader // the parquet-go path's language columns
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

func (d *decoder) ints(col string) ([]int64, error) {
	a := d.arrs[col]
	if a.Len() != d.n {
		return nil, d.colErr(col, fmt.Errorf("%d values for %d rows", a.Len(), d.n))
	}
	if i, ok := a.(*array.Int64); ok && d.owned[col] && a.NullN() == 0 && a.Data().Offset() == 0 {
		return i.Int64Values(), nil
	}
	out := make([]int64, d.n)
	if err := appendInts(out, a); err != nil {
		return nil, d.colErr(col, fmt.Errorf("unexpected column: %w", err))
	}
	return out, nil
}

func (d *decoder) decode(feats []schema.Feature) (*Batch, error) {
	u := d.u
	b := &Batch{Seq: u.Seq, File: u.File, RowGroup: u.RowGroup}
	d.b = b
	var err error
	if b.EpisodeIndex, err = d.ints(ColEpisodeIndex); err != nil {
		return nil, err
	}
	if u.Partial {
		d.keep = make([]int, 0, d.n)
		for i, ep := range b.EpisodeIndex {
			if containsSorted(u.Episodes, ep) {
				d.keep = append(d.keep, i)
			}
		}
		if len(d.keep) == d.n {
			d.keep = nil
		} else {
			b.EpisodeIndex = gatherInts(b.EpisodeIndex, d.keep)
		}
	}
	for _, c := range []struct {
		name string
		dst  *[]int64
	}{{ColIndex, &b.Index}, {ColFrameIndex, &b.FrameIndex}, {ColTaskIndex, &b.TaskIndex}} {
		v, err := d.ints(c.name)
		if err != nil {
			return nil, err
		}
		if d.keep != nil {
			v = gatherInts(v, d.keep)
		}
		*c.dst = v
	}
	if b.Timestamp, err = d.timestamps(); err != nil {
		return nil, err
	}
	if err := d.language(); err != nil {
		return nil, err
	}
	for _, f := range feats {
		fd, err := d.feature(f)
		if err != nil {
			return nil, err
		}
		b.Features = append(b.Features, fd)
	}
	return b, nil
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

func (d *decoder) timestamps() ([]float32, error) {
	a := d.arrs[ColTimestamp]
	if a.Len() != d.n {
		return nil, d.colErr(ColTimestamp, fmt.Errorf("%d values for %d rows", a.Len(), d.n))
	}
	if a.NullN() > 0 {
		return nil, d.colErr(ColTimestamp, fmt.Errorf("%d null values", a.NullN()))
	}
	out := make([]float32, d.rows())
	switch t := a.(type) {
	case *array.Float32:
		v := t.Float32Values()
		for i := range out {
			out[i] = v[d.row(i)]
		}
	case *array.Float64:
		v := t.Float64Values()
		for i := range out {
			out[i] = float32(v[d.row(i)])
		}
	default:
		return nil, d.colErr(ColTimestamp, fmt.Errorf("unexpected type %s, want float32", a.DataType()))
	}
	return out, nil
}

// langReader returns the reader of language column name, or nil when the
// file does not have it.
func (d *decoder) langReader(name string) (langReader, error) {
	if d.langs != nil {
		return d.langs[name], nil
	}
	if fl, ok := d.fast[name]; ok {
		return fl, nil
	}
	a, ok := d.arrs[name]
	if !ok {
		return nil, nil
	}
	c, err := newLangColumn(name, a)
	if err != nil {
		return nil, d.colErr(name, err)
	}
	return c, nil
}

func (d *decoder) language() error {
	b := d.b
	var buf jsonBuf
	lr, err := d.langReader(schema.ColumnPersistent)
	if err != nil {
		return err
	}
	if lr != nil {
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
			rows, err := lr.decodeFrame(r, &buf)
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
	lr, err = d.langReader(schema.ColumnEvents)
	if err != nil {
		return err
	}
	if lr != nil {
		b.HasEvents = true
		b.Events = make([][]schema.Row, d.rows())
		for i := range b.Events {
			r := d.row(i)
			if lr.frameLen(r) == 0 {
				continue
			}
			rows, err := lr.decodeFrame(r, &buf)
			if err != nil {
				return d.frameErr(schema.ColumnEvents, i, err)
			}
			b.Events[i] = rows
		}
	}
	return nil
}
