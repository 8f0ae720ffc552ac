package collate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/lrstream/lrstream/schema"
)

// Config configures a Batcher.
type Config struct {
	// BatchSize is the number of kept samples per batch (>= 1).
	BatchSize int
	// DropLast drops a final batch shorter than BatchSize.
	DropLast bool
	// Features are the stacked numeric columns besides the standard ones
	// (index, episode_index, frame_index, timestamp, task_index), in
	// output order. Names must be unique and must not be a standard or
	// per-sample column name.
	Features []Feature
	// Strings names extra per-sample string columns (e.g. "dataset"),
	// written after task; Frame.Strings supplies their values.
	Strings []string
	// KeepLanguage keeps the raw language_persistent / language_events
	// rows of every sample as per-sample list columns.
	KeepLanguage bool
}

// Owner keeps the buffers of borrowed feature bytes valid: a batch
// retains the owner of the samples it borrows and releases it when it is
// recycled (Batcher.Recycle), so the owner may reuse its buffers once
// every Retain is matched by a Release. Owners must be comparable (a
// pointer).
type Owner interface {
	Retain()
	Release()
}

// BorrowMin is the per-sample size (bytes) from which a feature marked in
// Frame.Borrow is referenced rather than copied: camera frames are;
// small values cost less to copy than to reference.
const BorrowMin = 64 << 10

// Frame is one kept sample handed to Batcher.Add. The batcher copies the
// scalars and feature bytes — except those it borrows (Owner, Borrow) —
// and retains Sample and the row slices (which must not be modified
// afterwards) until the batch is recycled.
type Frame struct {
	Index, EpisodeIndex, FrameIndex, TaskIndex int64
	Timestamp                                  float32
	Task                                       string
	// Sample is the rendered sample; nil when the frame carries no
	// messages key (a passthrough frame).
	Sample *schema.Sample
	// Features[i] holds the raw little-endian bytes of Config.Features[i]
	// for this frame, typically a sub-slice of a decoded row group's
	// buffer; its length must be Config.Features[i].FrameBytes().
	Features [][]byte
	// Owner, when set, keeps valid the features marked in Borrow: the
	// batch references those bytes (at least BorrowMin of them) instead
	// of copying them, and retains Owner until it is recycled.
	Owner Owner
	// Borrow[i] marks Features[i] as owned by Owner (missing: false).
	Borrow []bool
	// Conv[i], when set (missing: nil), says Features[i] is stored in
	// another form that Conv[i] converts to the feature's bytes: a
	// borrowed one is converted where the batch is written (a Part with
	// its Conv), a copied one into the batch at once. Its Sizes must be
	// len(Features[i]) and the feature's FrameBytes.
	Conv []Conv
	// Strings holds the values of Config.Strings for this frame.
	Strings []string
	// Persistent and Events are the frame's raw language rows, used only
	// with Config.KeepLanguage.
	Persistent, Events []schema.Row
}

// Counts summarizes what a Batcher has seen.
type Counts struct {
	// Kept is the number of samples added to batches; None the number of
	// None samples counted by AddNone; Batches the number of batches
	// emitted; DroppedLast the number of samples dropped by DropLast.
	Kept, None, Batches, DroppedLast int64
}

// Batcher accumulates kept samples into batches of Config.BatchSize.
// Add, AddNone and Flush must be called from one goroutine; Recycle may be
// called from any goroutine.
type Batcher struct {
	cfg    Config
	feats  []Feature // standard + cfg.Features
	fbytes []int     // per-frame bytes of each column
	cur    *Batch
	counts Counts
	mu     sync.Mutex
	free   []*Batch
}

// reserved are column names features may not use.
var reserved = map[string]bool{
	ColIndex: true, ColEpisodeIndex: true, ColFrameIndex: true, ColTimestamp: true,
	ColTaskIndex: true, ColTask: true, KeyMessages: true, KeyMessageStreams: true,
	KeyTargetMessages: true, KeyLanguagePersistent: true, KeyLanguageEvents: true,
}

// NewBatcher validates cfg and returns a Batcher.
func NewBatcher(cfg Config) (*Batcher, error) {
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("collate: batch size must be at least 1, got %d", cfg.BatchSize)
	}
	b := &Batcher{cfg: cfg, feats: StandardFeatures()}
	seen := map[string]bool{}
	for _, f := range cfg.Features {
		if err := f.Validate(); err != nil {
			return nil, err
		}
		if reserved[f.Name] {
			return nil, fmt.Errorf("collate: feature %q collides with a standard column", f.Name)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("collate: duplicate feature %q", f.Name)
		}
		seen[f.Name] = true
		b.feats = append(b.feats, f)
	}
	for _, name := range cfg.Strings {
		if name == "" || reserved[name] || seen[name] {
			return nil, fmt.Errorf("collate: invalid or duplicate string column %q", name)
		}
		seen[name] = true
	}
	for _, f := range b.feats {
		b.fbytes = append(b.fbytes, f.FrameBytes())
	}
	return b, nil
}

// Config returns the batcher's configuration.
func (b *Batcher) Config() Config { return b.cfg }

// Columns returns the schema of every numeric column of the batches, the
// standard ones first, with per-sample shapes.
func (b *Batcher) Columns() []Feature { return append([]Feature(nil), b.feats...) }

// Counts returns the counts so far.
func (b *Batcher) Counts() Counts { return b.counts }

// Pending returns the number of samples in the batch being filled.
func (b *Batcher) Pending() int {
	if b.cur == nil {
		return 0
	}
	return b.cur.N
}

// AddNone counts a None sample (one whose rendering returned None); it never
// enters a batch.
func (b *Batcher) AddNone() { b.counts.None++ }

// Add appends one kept sample. When the batch reaches Config.BatchSize it
// is checked and returned; otherwise Add returns nil. An error means the
// frame is malformed (feature sizes disagree with the schema) or the full
// batch violates the collate invariants; the batch is then discarded.
func (b *Batcher) Add(f *Frame) (*Batch, error) {
	if len(f.Features) != len(b.cfg.Features) {
		return nil, fmt.Errorf("collate: frame index %d (episode %d) has %d feature values, want %d", f.Index, f.EpisodeIndex, len(f.Features), len(b.cfg.Features))
	}
	if len(f.Strings) != len(b.cfg.Strings) {
		return nil, fmt.Errorf("collate: frame index %d (episode %d) has %d string values, want %d (%v)", f.Index, f.EpisodeIndex, len(f.Strings), len(b.cfg.Strings), b.cfg.Strings)
	}
	for i, v := range f.Features {
		if err := b.checkSize(f, i, v); err != nil {
			return nil, err
		}
	}
	if b.cur == nil {
		b.cur = b.get()
	}
	c := b.cur
	cols := c.Columns
	le := binary.LittleEndian
	cols[PosIndex].Data = le.AppendUint64(cols[PosIndex].Data, uint64(f.Index))
	cols[PosEpisodeIndex].Data = le.AppendUint64(cols[PosEpisodeIndex].Data, uint64(f.EpisodeIndex))
	cols[PosFrameIndex].Data = le.AppendUint64(cols[PosFrameIndex].Data, uint64(f.FrameIndex))
	cols[PosTimestamp].Data = le.AppendUint32(cols[PosTimestamp].Data, math.Float32bits(f.Timestamp))
	cols[PosTaskIndex].Data = le.AppendUint64(cols[PosTaskIndex].Data, uint64(f.TaskIndex))
	for i, v := range f.Features {
		col := &cols[NumStandard+i]
		conv := convOf(f, i)
		if f.Owner != nil && i < len(f.Borrow) && f.Borrow[i] && b.fbytes[NumStandard+i] >= BorrowMin {
			b.borrow(c, col, Part{Data: v, Conv: conv}, f.Owner)
			continue
		}
		if cap(col.Data) == 0 {
			col.Data = make([]byte, 0, b.cfg.BatchSize*b.fbytes[NumStandard+i])
		}
		at := len(col.Data)
		// Within capacity: never moves.
		col.Data = (&Part{Data: v, Conv: conv}).AppendTo(col.Data)
		if len(col.Parts) > 0 {
			col.Parts = appendPart(col.Parts, Part{Data: col.Data[at:]})
		}
	}
	c.Task = append(c.Task, f.Task)
	for i, v := range f.Strings {
		c.Strings[i].Values = append(c.Strings[i].Values, v)
	}
	c.samples = append(c.samples, f.Sample)
	if b.cfg.KeepLanguage {
		c.Persistent = append(c.Persistent, f.Persistent)
		c.Events = append(c.Events, f.Events)
	}
	c.N++
	b.counts.Kept++
	if c.N < b.cfg.BatchSize {
		return nil, nil
	}
	return b.finish()
}

// checkSize checks feature i's bytes v of f against the schema: its
// size, or with a Conv the sizes the Conv reads and writes.
func (b *Batcher) checkSize(f *Frame, i int, v []byte) error {
	want, got, what := b.fbytes[NumStandard+i], len(v), ""
	if conv := convOf(f, i); conv != nil {
		src, dst := conv.Sizes()
		if src != len(v) {
			return fmt.Errorf("collate: frame index %d (episode %d): feature %s: %d stored bytes, its conversion reads %d", f.Index, f.EpisodeIndex, b.cfg.Features[i].Name, len(v), src)
		}
		got, what = dst, " converted"
	}
	if got != want {
		ft := b.cfg.Features[i]
		return &MismatchError{Key: ft.Name, What: "size", Position: b.Pending(), Index: f.Index, Episode: f.EpisodeIndex, HasIndex: true,
			Got: strconv.Itoa(got) + " bytes" + what, Want: fmt.Sprintf("%d bytes (dtype %s, shape %v)", want, ft.DType, ft.Shape)}
	}
	return nil
}

// convOf returns f's Conv of feature i, or nil.
func convOf(f *Frame, i int) Conv {
	if i < len(f.Conv) {
		return f.Conv[i]
	}
	return nil
}

// borrow appends p (owned by o) to column col of batch c by reference,
// retaining o for c unless it owns c's previous borrowed sample too.
func (b *Batcher) borrow(c *Batch, col *Column, p Part, o Owner) {
	if len(col.Parts) == 0 && len(col.Data) > 0 {
		col.Parts = append(col.Parts, Part{Data: col.Data}) // the samples copied so far
	}
	col.Parts = appendPart(col.Parts, p)
	if n := len(c.owners); n == 0 || c.owners[n-1] != o {
		o.Retain()
		c.owners = append(c.owners, o)
	}
}

// appendPart appends p to parts, extending the last part instead when
// both are plain bytes and p continues it in memory.
func appendPart(parts []Part, p Part) []Part {
	if n := len(parts); n > 0 && len(p.Data) > 0 && p.Conv == nil && parts[n-1].Conv == nil {
		last := parts[n-1].Data
		if len(last) > 0 && cap(last)-len(last) >= len(p.Data) && &last[:len(last)+1][len(last)] == &p.Data[0] {
			parts[n-1].Data = last[:len(last)+len(p.Data)]
			return parts
		}
	}
	return append(parts, p)
}

// Flush returns the last, short batch: nil when nothing is pending or when
// Config.DropLast drops it (the dropped samples are counted in
// Counts.DroppedLast).
func (b *Batcher) Flush() (*Batch, error) {
	if b.cur == nil || b.cur.N == 0 {
		return nil, nil
	}
	if b.cfg.DropLast {
		b.counts.DroppedLast += int64(b.cur.N)
		b.cur.reset()
		return nil, nil
	}
	return b.finish()
}

// finish checks the current batch's invariants and hands it out.
func (b *Batcher) finish() (*Batch, error) {
	c := b.cur
	b.cur = nil
	have := 0
	for _, s := range c.samples {
		if s != nil {
			have++
		}
	}
	if e := checkPresence(KeyMessages, have, c.N, func(i int) bool { return c.samples[i] != nil }); e != nil {
		for _, p := range e.Positions {
			e.Indices = append(e.Indices, c.Index(p))
			e.Episodes = append(e.Episodes, c.EpisodeIndex(p))
		}
		b.Recycle(c)
		return nil, fmt.Errorf("collate: %w", e)
	}
	for i := range c.Columns {
		col := &c.Columns[i]
		col.Shape = append(col.Shape[:0], c.N)
		col.Shape = append(col.Shape, b.feats[i].Shape...)
	}
	if have > 0 {
		c.Samples = c.samples
	}
	b.counts.Batches++
	return c, nil
}

// get returns an empty batch, reusing a recycled one when available.
func (b *Batcher) get() *Batch {
	b.mu.Lock()
	n := len(b.free)
	if n > 0 {
		c := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return c
	}
	b.mu.Unlock()
	bs := b.cfg.BatchSize
	c := &Batch{
		Columns: make([]Column, len(b.feats)),
		Task:    make([]string, 0, bs),
		samples: make([]*schema.Sample, 0, bs),
	}
	for _, name := range b.cfg.Strings {
		c.Strings = append(c.Strings, StringColumn{Name: name, Values: make([]string, 0, bs)})
	}
	for i, f := range b.feats {
		c.Columns[i] = Column{Name: f.Name, DType: f.DType, Shape: make([]int, 0, 1+len(f.Shape))}
		if b.fbytes[i] < BorrowMin {
			// Large (borrowable) columns get their buffer when a sample
			// is copied into them (Add).
			c.Columns[i].Data = make([]byte, 0, bs*b.fbytes[i])
		}
	}
	if b.cfg.KeepLanguage {
		c.Persistent = make([][]schema.Row, 0, bs)
		c.Events = make([][]schema.Row, 0, bs)
	}
	return c
}

// maxFree bounds the recycled batches a Batcher keeps.
const maxFree = 64

// Recycle hands a batch back for reuse once its consumer (an encoder) is
// done with it. It is safe to call from any goroutine; recycling a batch
// from another Batcher or twice is a programming error.
func (b *Batcher) Recycle(c *Batch) {
	if c == nil {
		return
	}
	if len(c.Columns) != len(b.feats) {
		panic(errors.New("collate: Recycle of a batch from another Batcher"))
	}
	c.reset()
	b.mu.Lock()
	if len(b.free) < maxFree {
		b.free = append(b.free, c)
	}
	b.mu.Unlock()
}
