package collate

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/lrstream/lrstream/schema"
)

// Names of the standard columns every batch carries, in wire order.
const (
	ColIndex        = "index"
	ColEpisodeIndex = "episode_index"
	ColFrameIndex   = "frame_index"
	ColTimestamp    = "timestamp"
	ColTaskIndex    = "task_index"
	ColTask         = "task"
)

// Names of the per-sample list columns.
const (
	KeyMessages           = "messages"
	KeyMessageStreams     = "message_streams"
	KeyTargetMessages     = "target_message_indices"
	KeyLanguagePersistent = "language_persistent"
	KeyLanguageEvents     = "language_events"
)

// Positions of the standard numeric columns in Batch.Columns.
const (
	PosIndex = iota
	PosEpisodeIndex
	PosFrameIndex
	PosTimestamp
	PosTaskIndex
	// NumStandard is the number of standard numeric columns; feature
	// columns follow them in Batch.Columns.
	NumStandard
)

// StandardFeatures returns the standard numeric columns (index,
// episode_index, frame_index: <i8; timestamp: <f4; task_index: <i8) as
// scalar features, in the order they appear in Batch.Columns.
func StandardFeatures() []Feature {
	return []Feature{
		{Name: ColIndex, DType: "<i8"},
		{Name: ColEpisodeIndex, DType: "<i8"},
		{Name: ColFrameIndex, DType: "<i8"},
		{Name: ColTimestamp, DType: "<f4"},
		{Name: ColTaskIndex, DType: "<i8"},
	}
}

// Column is one stacked numeric column of a batch: a C-order little-endian
// array of shape Shape (the first dimension is the batch size) and numpy
// dtype DType, stored as raw bytes: Data, or, when Parts is not empty, the
// concatenation of Parts (a column with borrowed samples, see
// Frame.Owner; parts may reference Data).
type Column struct {
	Name  string
	DType string
	// Shape is (batch size, per-sample shape...).
	Shape []int
	Data  []byte
	// Parts, when not empty, are the column's bytes in order: borrowed
	// samples' bytes (contiguous ones as one part, a sample in a stored
	// form as a part of its own with its Conv) and copied ones in Data.
	Parts []Part
}

// Part is a run of a column's bytes: Data, or, with Conv, the bytes Conv
// makes of Data (one sample in its stored form, converted where the
// column is written: see Conv).
type Part struct {
	Data []byte
	Conv Conv
}

// Len returns the part's size in the column, in bytes.
func (p *Part) Len() int {
	if p.Conv == nil {
		return len(p.Data)
	}
	_, n := p.Conv.Sizes()
	return n
}

// Fill writes the part's bytes to dst (len p.Len()): a copy, or the
// conversion.
func (p *Part) Fill(dst []byte) {
	if p.Conv == nil {
		copy(dst, p.Data)
		return
	}
	p.Conv.Convert(dst, p.Data)
}

// AppendTo appends the part's bytes to dst.
func (p *Part) AppendTo(dst []byte) []byte {
	if p.Conv == nil {
		return append(dst, p.Data...)
	}
	n := len(dst)
	dst = slices.Grow(dst, p.Len())[:n+p.Len()]
	p.Conv.Convert(dst[n:], p.Data)
	return dst
}

// Conv converts a sample's feature from the form it is stored in while it
// waits to be batched and written (a camera frame as its decoder gave it:
// YUV 4:2:0 planes are half the bytes of its RGB planes) to its bytes in
// the column. A batch converts such a sample once, where its column is
// written (sink: into the output buffer, or straight into a shared-memory
// arena), instead of holding and copying the larger form. Convert must
// write every byte of dst and may not fail: a Conv is made for stored
// bytes it has checked.
type Conv interface {
	// Sizes are the bytes Convert reads (the stored form) and writes.
	Sizes() (src, dst int)
	// Convert writes the column bytes of the sample stored in src
	// (len src) to dst (len dst).
	Convert(dst, src []byte)
}

// Len returns the column's size in bytes.
func (c *Column) Len() int {
	if len(c.Parts) == 0 {
		return len(c.Data)
	}
	n := 0
	for i := range c.Parts {
		n += c.Parts[i].Len()
	}
	return n
}

// Bytes returns the column's bytes: Data, or a new concatenation of Parts
// (converted).
func (c *Column) Bytes() []byte {
	if len(c.Parts) == 0 {
		return c.Data
	}
	out := make([]byte, 0, c.Len())
	for i := range c.Parts {
		out = c.Parts[i].AppendTo(out)
	}
	return out
}

// Int64At returns element i of an "<i8" column.
func (c *Column) Int64At(i int) int64 {
	return int64(binary.LittleEndian.Uint64(c.Data[8*i:]))
}

// Float32At returns element i of an "<f4" column.
func (c *Column) Float32At(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(c.Data[4*i:]))
}

// StringColumn is a per-sample string column: one value per sample.
type StringColumn struct {
	Name   string
	Values []string
}

// Batch is N collated samples in columnar form. Columns holds the standard
// numeric columns (positions PosIndex..PosTaskIndex) followed by the feature
// columns in Config.Features order. The per-sample list columns are Task,
// Strings,
// Samples (nil when no sample of the batch carries messages) and, with
// Config.KeepLanguage, Persistent and Events.
//
// A Batch returned by a Batcher belongs to the caller until it hands it back
// with Batcher.Recycle.
type Batch struct {
	// N is the number of samples.
	N       int
	Columns []Column
	Task    []string
	// Strings are the extra per-sample string columns of Config.Strings
	// (e.g. "dataset" when mixing datasets), in that order.
	Strings []StringColumn
	// Samples holds each sample's rendered messages and sidecars; nil when
	// no sample of the batch carries messages (passthrough batch).
	Samples []*schema.Sample
	// Persistent and Events are the raw language rows per sample; nil
	// unless the batcher keeps language.
	Persistent [][]schema.Row
	Events     [][]schema.Row

	// samples backs Samples while the batch fills, including nil entries.
	samples []*schema.Sample
	// owners are the Owners of the borrowed samples, each retained once
	// per run of consecutive samples it owns; reset releases them.
	owners []Owner
}

// Column returns the column with the given name, or nil.
func (b *Batch) Column(name string) *Column {
	for i := range b.Columns {
		if b.Columns[i].Name == name {
			return &b.Columns[i]
		}
	}
	return nil
}

// Index returns sample i's dataset index.
func (b *Batch) Index(i int) int64 { return b.Columns[PosIndex].Int64At(i) }

// EpisodeIndex returns sample i's episode index.
func (b *Batch) EpisodeIndex(i int) int64 { return b.Columns[PosEpisodeIndex].Int64At(i) }

// FrameIndex returns sample i's frame index within its episode.
func (b *Batch) FrameIndex(i int) int64 { return b.Columns[PosFrameIndex].Int64At(i) }

// Timestamp returns sample i's timestamp.
func (b *Batch) Timestamp(i int) float32 { return b.Columns[PosTimestamp].Float32At(i) }

// TaskIndex returns sample i's task index.
func (b *Batch) TaskIndex(i int) int64 { return b.Columns[PosTaskIndex].Int64At(i) }

// reset empties b for reuse, keeping its buffers.
func (b *Batch) reset() {
	b.N = 0
	for i := range b.Columns {
		b.Columns[i].Data = b.Columns[i].Data[:0]
		clear(b.Columns[i].Parts)
		b.Columns[i].Parts = b.Columns[i].Parts[:0]
	}
	for _, o := range b.owners {
		o.Release()
	}
	clear(b.owners)
	b.owners = b.owners[:0]
	clear(b.Task)
	b.Task = b.Task[:0]
	for i := range b.Strings {
		clear(b.Strings[i].Values)
		b.Strings[i].Values = b.Strings[i].Values[:0]
	}
	clear(b.samples)
	b.samples = b.samples[:0]
	b.Samples = nil
	clear(b.Persistent)
	b.Persistent = b.Persistent[:0]
	clear(b.Events)
	b.Events = b.Events[:0]
}
