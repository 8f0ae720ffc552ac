package sink

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// AppendHeader appends the msgpack header message for h to dst.
func AppendHeader(dst []byte, h Header) ([]byte, error) {
	b := mpMapHeader(dst, headerFields(&h))
	b = mpStr(b, "type")
	b = mpStr(b, TypeHeader)
	b = mpStr(b, "format")
	format := h.Format
	if format == "" {
		format = FormatVersion
	}
	b = mpStr(b, format)
	b = mpStr(b, "lrstream_version")
	b = mpStr(b, h.Version)
	b = mpStr(b, "dataset")
	b = mpStr(b, h.Dataset)
	b = mpStr(b, "revision")
	b = mpStr(b, h.Revision)
	if len(h.Pins) > 0 {
		b = mpStr(b, "pins")
		b = appendPins(b, h.Pins)
	}
	b = mpStr(b, "fps")
	b = mpInt(b, int64(h.FPS))
	b = mpStr(b, "recipe")
	b = mpStr(b, h.Recipe)
	b = mpStr(b, "recipe_sha256")
	b = mpStr(b, h.RecipeSHA256)
	b = mpStr(b, "mode")
	b = mpStr(b, h.Mode)
	b = mpStr(b, "batch_size")
	b = mpInt(b, int64(h.BatchSize))
	b = mpStr(b, "drop_last")
	b = mpBool(b, h.DropLast)
	b = mpStr(b, "keep_language")
	b = mpBool(b, h.KeepLanguage)
	b = mpStr(b, "features")
	b = appendHeaderFeatures(b, h.Features)
	b = mpStr(b, "strings")
	b = mpArrayHeader(b, len(h.Strings))
	for _, s := range h.Strings {
		b = mpStr(b, s)
	}
	var err error
	b = mpStr(b, "tools")
	if b, err = appendRawJSON(b, h.Tools); err != nil {
		return dst, fmt.Errorf("sink: header tools: %w", err)
	}
	b = mpStr(b, "options")
	if b, err = appendRawJSON(b, h.Options); err != nil {
		return dst, fmt.Errorf("sink: header options: %w", err)
	}
	b = mpStr(b, "components")
	b = mpArrayHeader(b, len(h.Components))
	for _, c := range h.Components {
		b = mpStr(b, c)
	}
	if len(h.Cameras) > 0 {
		b = mpStr(b, "cameras")
		b = mpArrayHeader(b, len(h.Cameras))
		for _, c := range h.Cameras {
			b = appendCamera(b, c)
		}
	}
	b = mpStr(b, "share")
	b = AppendShare(b, h.Share)
	if t := h.Training; t != nil {
		b = mpStr(b, "training")
		b = appendTraining(b, t)
	}
	if h.SHM {
		b = mpStr(b, "shm")
		b = mpBool(b, true)
	}
	return b, nil
}

// headerFields returns the number of fields of h's map: 18, and pins,
// training, cameras and shm when present.
func headerFields(h *Header) int {
	n := 18
	if h.Training != nil {
		n++
	}
	if len(h.Pins) > 0 {
		n++
	}
	if len(h.Cameras) > 0 {
		n++
	}
	if h.SHM {
		n++
	}
	return n
}

// appendHeaderFeatures appends the header's features: name, dtype and
// per-frame shape of each.
func appendHeaderFeatures(b []byte, features []collate.Feature) []byte {
	b = mpArrayHeader(b, len(features))
	for _, f := range features {
		b = mpMapHeader(b, 3)
		b = mpStr(b, "name")
		b = mpStr(b, f.Name)
		b = mpStr(b, "dtype")
		b = mpStr(b, f.DType)
		b = mpStr(b, "shape")
		b = mpShape(b, f.Shape)
	}
	return b
}

// appendTraining appends the header's training map.
func appendTraining(b []byte, t *Training) []byte {
	b = mpMapHeader(b, 4)
	b = mpStr(b, "fingerprint")
	b = mpStr(b, t.Fingerprint)
	b = mpStr(b, "epoch")
	b = mpInt(b, t.Epoch)
	b = mpStr(b, "epoch_batches")
	b = mpInt(b, t.EpochBatches)
	b = mpStr(b, "consumers")
	b = mpInt(b, t.Consumers)
	return b
}

// AppendShare appends the msgpack encoding of sh to dst: the value of the
// header's share field, as AppendHeader writes it (for replacing the share
// of an encoded header; see FieldSpan).
func AppendShare(dst []byte, sh Share) []byte {
	b := mpMapHeader(dst, 4)
	b = mpStr(b, "rank")
	b = mpInt(b, int64(sh.Rank))
	b = mpStr(b, "world_size")
	b = mpInt(b, int64(sh.WorldSize))
	b = mpStr(b, "worker")
	b = mpInt(b, int64(sh.Worker))
	b = mpStr(b, "num_workers")
	return mpInt(b, int64(sh.NumWorkers))
}

// AppendInt appends the msgpack encoding of v to dst, in the most compact
// form, as sink writes every integer (for example a batch's seq).
func AppendInt(dst []byte, v int64) []byte { return mpInt(dst, v) }

// AppendString appends s as a msgpack str (e.g. to splice a resume token
// into an encoded batch).
func AppendString(dst []byte, s string) []byte { return mpStr(dst, s) }

// appendRawJSON transcodes JSON text, or writes nil for an empty value.
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return mpNil(b), nil
	}
	return appendJSONAsMsgpack(b, raw)
}

// AppendEnd appends the msgpack end message for e to dst.
func AppendEnd(dst []byte, e End) []byte {
	b := mpMapHeader(dst, 10)
	b = mpStr(b, "type")
	b = mpStr(b, TypeEnd)
	for _, kv := range []struct {
		k string
		v int64
	}{{"frames", e.Frames}, {"rendered", e.Rendered}, {"dropped", e.Dropped}, {"passthrough", e.Passthrough},
		{"skipped", e.Skipped}, {"errors", e.Errors}, {"batches", e.Batches}, {"samples", e.Samples}} {
		b = mpStr(b, kv.k)
		b = mpInt(b, kv.v)
	}
	b = mpStr(b, "components")
	b = mpMapHeader(b, len(e.Components))
	for _, c := range e.Components {
		b = mpStr(b, c.Name)
		b = mpInt(b, c.Count)
	}
	return b
}

// AppendError appends the msgpack error message for msg to dst.
func AppendError(dst []byte, msg string) []byte {
	b := mpMapHeader(dst, 2)
	b = mpStr(b, "type")
	b = mpStr(b, TypeError)
	b = mpStr(b, "message")
	return mpStr(b, msg)
}

// batchKeys counts the column entries of a batch message.
func batchKeys(bt *collate.Batch) int {
	n := len(bt.Columns) + 1 + len(bt.Strings) // numeric columns, task, strings
	if bt.Samples != nil {
		n += 3
	}
	if bt.Persistent != nil {
		n++
	}
	if bt.Events != nil {
		n++
	}
	return n
}

// AppendBatch appends the msgpack batch message for bt to dst. Batches can
// be encoded concurrently (each into its own buffer) and written in order
// with Msgpack.WriteEncoded.
func AppendBatch(dst []byte, bt *collate.Batch, meta BatchMeta) ([]byte, error) {
	return appendBatch(dst, bt, meta, nil)
}

// LargeArray is the payload size (bytes) from which EncodeBatch references
// a column's data instead of copying it: camera frames (921,600 bytes per
// 480x640 frame) are, scalar and vector features are not.
const LargeArray = 64 << 10

// Encoded is one encoded batch message whose large column payloads (see
// LargeArray) are referenced from the batch, not copied: the message's
// bytes are Buf with each referenced payload inserted at its offset. It
// is valid while the batch's columns are; its buffers are reused by the
// next EncodeBatch into it.
type Encoded struct {
	// Buf is the message without the referenced payloads.
	Buf   []byte
	parts []encPart
	cols  []encCol
	// writeArena's scratch: each column's placement.
	refs []encRef
	// scratch holds a converted part while WriteTo writes it.
	scratch []byte
}

// encRef is where writeArena placed a column (ok false: inline).
type encRef struct {
	pos uint64
	ok  bool
}

// encPart is a payload inserted into Encoded.Buf at offset at: a column
// part's bytes, or what its Conv makes of them (collate.Part).
type encPart struct {
	at int
	collate.Part
}

// encCol is a column whose payload is referenced (parts[first:first+n]
// of an Encoded): with an Arena the payload may be placed there, and
// Buf[key:at] (its "data" key and bin header) replaced by an "shm" entry.
type encCol struct {
	key, at  int
	first, n int
	bytes    int
}

// EncodeBatch encodes the batch message for bt into e (reusing e's
// buffers): the same bytes as AppendBatch, but large column payloads are
// referenced from bt's columns instead of copied, so bt's columns must not
// change until e is written.
func EncodeBatch(e *Encoded, bt *collate.Batch, meta BatchMeta) error {
	e.parts, e.cols = e.parts[:0], e.cols[:0]
	b, err := appendBatch(e.Buf[:0], bt, meta, e)
	e.Buf = b
	if err != nil {
		e.parts, e.cols = e.parts[:0], e.cols[:0]
	}
	return err
}

// Len is the size of the encoded message in bytes.
func (e *Encoded) Len() int {
	n := len(e.Buf)
	for i := range e.parts {
		n += e.parts[i].Len()
	}
	return n
}

// AppendTo appends the whole message to dst (one contiguous copy).
func (e *Encoded) AppendTo(dst []byte) []byte {
	at := 0
	for i := range e.parts {
		p := &e.parts[i]
		dst = append(dst, e.Buf[at:p.at]...)
		dst = p.AppendTo(dst)
		at = p.at
	}
	return append(dst, e.Buf[at:]...)
}

// WriteTo writes the message to w: the encoded pieces and the referenced
// payloads in order, each payload straight from the batch, or converted
// into a scratch buffer reused for every part (one Write call per piece;
// a message without large payloads is one Write call).
func (e *Encoded) WriteTo(w io.Writer) (int64, error) {
	return e.writeTo(w, &e.scratch)
}

// writeTo is WriteTo with the scratch buffer of the converted parts.
func (e *Encoded) writeTo(w io.Writer, scratch *[]byte) (int64, error) {
	cw := countWriter{w: w}
	at := 0
	for i := 0; i < len(e.parts); {
		if err := cw.write(e.Buf[at:e.parts[i].at]); err != nil {
			return cw.n, err
		}
		at = e.parts[i].at
		j := i + 1 // the parts written with nothing between them: a column's
		for j < len(e.parts) && e.parts[j].at == at {
			j++
		}
		if err := cw.parts(e.parts[i:j], scratch); err != nil {
			return cw.n, err
		}
		i = j
	}
	return cw.n, cw.write(e.Buf[at:])
}

// parts writes parts, adjacent in the message: each one's data, and a run of
// parts to convert (a camera column's frames) converted into scratch at once,
// by several goroutines when large (fillParts), then written with one Write
// call.
func (c *countWriter) parts(parts []encPart, scratch *[]byte) error {
	for i := 0; i < len(parts); {
		if parts[i].Conv == nil {
			if err := c.write(parts[i].Data); err != nil {
				return err
			}
			i++
			continue
		}
		j, n := i, 0
		for ; j < len(parts) && parts[j].Conv != nil; j++ {
			n += parts[j].Len()
		}
		if cap(*scratch) < n {
			*scratch = make([]byte, n)
		}
		b := (*scratch)[:n]
		fillParts(b, parts[i:j])
		if err := c.write(b); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// parallelFill is the size from which fillParts splits its parts among
// goroutines: a batch's camera column (32 frames of 224×224 RGB are 4.8
// MB), not a single frame.
const parallelFill = 1 << 20

// fillParts writes the bytes of parts (copied, or converted where they
// have a Conv) to dst, one after another. Converting a column is the
// one serial stage of a cached stream's writer (each frame's conversion
// from its stored form), so a large one is split among up to GOMAXPROCS
// goroutines, each filling every k-th part.
func fillParts(dst []byte, parts []encPart) {
	workers := min(runtime.GOMAXPROCS(0), len(parts))
	if workers < 2 || len(dst) < parallelFill {
		for i := range parts {
			n := parts[i].Len()
			parts[i].Fill(dst[:n])
			dst = dst[n:]
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			off := 0
			for i := range parts {
				n := parts[i].Len()
				if i%workers == w {
					parts[i].Fill(dst[off : off+n])
				}
				off += n
			}
		})
	}
	wg.Wait()
}

// countWriter writes pieces of a message to w, one Write call each,
// counting the bytes written.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	k, err := c.w.Write(p)
	c.n += int64(k)
	if err == nil && k < len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// writeArena is WriteTo with each referenced column offered to a: a
// placed column's parts are written (converted) straight into the arena,
// and the column as "shm": [pos, bytes] instead of its "data"
// (docs/wire-format.md "Shared memory"). Every column is placed before
// the first byte is written, so an arena error never cuts a message. It
// reports whether a column was placed.
func (e *Encoded) writeArena(w io.Writer, a Arena, scratch *[]byte) (int64, bool, error) {
	placed := false
	e.refs = e.refs[:0]
	for _, c := range e.cols {
		parts := e.parts[c.first : c.first+c.n]
		pos, ok, err := a.Place(c.bytes, func(dst []byte) { fillParts(dst, parts) })
		if err != nil {
			return 0, false, err
		}
		e.refs = append(e.refs, encRef{pos, ok})
		placed = placed || ok
	}
	cw := countWriter{w: w}
	var ref [40]byte
	at := 0
	for i, c := range e.cols {
		if r := e.refs[i]; r.ok {
			if err := cw.write(e.Buf[at:c.key]); err != nil {
				return cw.n, placed, err
			}
			b := mpBin(ref[:0], []byte("shm"))
			b = mpArrayHeader(b, 2)
			b = mpUint(b, r.pos)
			b = mpUint(b, uint64(c.bytes))
			if err := cw.write(b); err != nil {
				return cw.n, placed, err
			}
			at = c.at
			continue
		}
		if err := cw.write(e.Buf[at:c.at]); err != nil {
			return cw.n, placed, err
		}
		if err := cw.parts(e.parts[c.first:c.first+c.n], scratch); err != nil {
			return cw.n, placed, err
		}
		at = c.at
	}
	return cw.n, placed, cw.write(e.Buf[at:])
}

// appendBatch is AppendBatch; with e set, large column payloads are
// recorded in e's parts and columns (at their offset in the returned
// bytes) instead of being appended.
func appendBatch(dst []byte, bt *collate.Batch, meta BatchMeta, e *Encoded) ([]byte, error) {
	b := appendBatchHead(dst, bt, meta)
	b = appendColumns(b, bt, e)
	var err error
	if bt.Samples != nil {
		if b, err = appendSamples(b, bt, meta); err != nil {
			return dst, err
		}
	}
	if b, err = appendLanguage(b, bt, meta); err != nil {
		return dst, err
	}
	return b, nil
}

// appendBatchHead appends the batch map's header and its fields before
// the columns: type, seq, epoch, size and resume.
func appendBatchHead(dst []byte, bt *collate.Batch, meta BatchMeta) []byte {
	b := mpMapHeader(dst, 6)
	b = mpStr(b, "type")
	b = mpStr(b, TypeBatch)
	b = mpStr(b, "seq")
	b = mpInt(b, meta.Seq)
	b = mpStr(b, "epoch")
	b = mpInt(b, meta.Epoch)
	b = mpStr(b, "size")
	b = mpInt(b, int64(bt.N))
	b = mpStr(b, "resume")
	if meta.Resume == "" {
		b = mpNil(b)
	} else {
		b = mpStr(b, meta.Resume)
	}
	return b
}

// appendColumns appends the columns map's header, the numeric and camera
// columns as ndarrays, the tasks and the string columns.
func appendColumns(b []byte, bt *collate.Batch, e *Encoded) []byte {
	b = mpStr(b, "columns")
	b = mpMapHeader(b, batchKeys(bt))
	for i := range bt.Columns {
		c := &bt.Columns[i]
		b = mpStr(b, c.Name)
		b = appendNDArray(b, c, e)
	}
	b = mpStr(b, collate.ColTask)
	b = mpArrayHeader(b, len(bt.Task))
	for _, s := range bt.Task {
		b = mpStr(b, s)
	}
	for i := range bt.Strings {
		sc := &bt.Strings[i]
		b = mpStr(b, sc.Name)
		b = mpArrayHeader(b, len(sc.Values))
		for _, s := range sc.Values {
			b = mpStr(b, s)
		}
	}
	return b
}

// appendSamples appends the rendered samples' messages, message streams
// and target messages.
func appendSamples(b []byte, bt *collate.Batch, meta BatchMeta) ([]byte, error) {
	// Frames of an episode mostly share their rendered sample (the
	// renderer returns the same *Sample for identical renders), so a
	// sample met again in this batch is copied from its first encoding
	// instead of being encoded again: same bytes, less work. first[i]
	// is the first frame of the batch holding frame i's sample.
	var seen sampleSpans
	first := make([]int32, len(bt.Samples))
	for i, s := range bt.Samples {
		first[i] = int32(i)
		if k, ok := seen.find(s); ok {
			first[i] = int32(k)
			continue
		}
		seen.add(s, i)
	}
	spans := make([][2]int, len(bt.Samples)) // encoding of frame i's sample in this part
	part := func(key string, enc func(b []byte, s *schema.Sample) ([]byte, error)) error {
		b = mpStr(b, key)
		b = mpArrayHeader(b, len(bt.Samples))
		for i, s := range bt.Samples {
			if k := first[i]; int(k) != i {
				b = append(b, b[spans[k][0]:spans[k][1]]...)
				continue
			}
			from := len(b)
			var err error
			if b, err = enc(b, s); err != nil {
				return fmt.Errorf("sink: batch %d sample %d (index %d) %w", meta.Seq, i, bt.Index(i), err)
			}
			spans[i] = [2]int{from, len(b)}
		}
		return nil
	}
	if err := part(collate.KeyMessages, func(b []byte, s *schema.Sample) ([]byte, error) {
		b = mpArrayHeader(b, len(s.Messages))
		for j := range s.Messages {
			var err error
			if b, err = appendMessage(b, &s.Messages[j]); err != nil {
				return b, fmt.Errorf("message %d: %w", j, err)
			}
		}
		return b, nil
	}); err != nil {
		return b, err
	}
	part(collate.KeyMessageStreams, func(b []byte, s *schema.Sample) ([]byte, error) {
		b = mpArrayHeader(b, len(s.Streams))
		for _, st := range s.Streams {
			b = mpStr(b, st)
		}
		return b, nil
	})
	part(collate.KeyTargetMessages, func(b []byte, s *schema.Sample) ([]byte, error) {
		b = mpArrayHeader(b, len(s.Targets))
		for _, t := range s.Targets {
			b = mpInt(b, int64(t))
		}
		return b, nil
	})
	return b, nil
}

// appendLanguage appends the language_persistent and language_events
// rows of the batch's frames, when the batch has them.
func appendLanguage(b []byte, bt *collate.Batch, meta BatchMeta) ([]byte, error) {
	var err error
	for _, lang := range []struct {
		key  string
		rows [][]schema.Row
	}{{collate.KeyLanguagePersistent, bt.Persistent}, {collate.KeyLanguageEvents, bt.Events}} {
		if lang.rows == nil {
			continue
		}
		b = mpStr(b, lang.key)
		b = mpArrayHeader(b, len(lang.rows))
		for i, rows := range lang.rows {
			b = mpArrayHeader(b, len(rows))
			for j := range rows {
				if b, err = appendRow(b, &rows[j]); err != nil {
					return b, fmt.Errorf("sink: batch %d sample %d (index %d) %s row %d: %w", meta.Seq, i, bt.Index(i), lang.key, j, err)
				}
			}
		}
	}
	return b, nil
}

// sampleSpans remembers the first frame of the last few distinct samples
// of a batch (a small ring: a batch typically holds a handful of distinct
// samples, one per blend component and subtask).
type sampleSpans struct {
	ent  [16]sampleFirst
	n    int // entries used
	next int // ring position of the next add
	last int // entry of the last hit or add: consecutive frames often share a sample
}

type sampleFirst struct {
	s     *schema.Sample
	frame int
}

func (c *sampleSpans) find(s *schema.Sample) (int, bool) {
	if c.n > 0 && c.ent[c.last].s == s {
		return c.ent[c.last].frame, true
	}
	for i := 0; i < c.n; i++ {
		if c.ent[i].s == s {
			c.last = i
			return c.ent[i].frame, true
		}
	}
	return 0, false
}

func (c *sampleSpans) add(s *schema.Sample, frame int) {
	c.ent[c.next] = sampleFirst{s, frame}
	c.last = c.next
	c.next = (c.next + 1) % len(c.ent)
	c.n = min(c.n+1, len(c.ent))
}

// appendNDArray writes a column the msgpack-numpy way: a map with bin keys
// nd, type, kind, shape, data.
func appendNDArray(b []byte, c *collate.Column, e *Encoded) []byte {
	b = mpMapHeader(b, 5)
	b = mpBin(b, []byte("nd"))
	b = mpBool(b, true)
	b = mpBin(b, []byte("type"))
	b = mpStr(b, c.DType)
	b = mpBin(b, []byte("kind"))
	b = mpBin(b, nil)
	b = mpBin(b, []byte("shape"))
	b = mpShape(b, c.Shape)
	key := len(b)
	b = mpBin(b, []byte("data"))
	if len(c.Parts) > 0 {
		// A column with borrowed samples: its bytes are its parts.
		n := c.Len()
		b = mpBinHeader(b, n)
		if e == nil || n < LargeArray {
			for i := range c.Parts {
				b = c.Parts[i].AppendTo(b)
			}
			return b
		}
		e.cols = append(e.cols, encCol{key: key, at: len(b), first: len(e.parts), n: len(c.Parts), bytes: n})
		for _, p := range c.Parts {
			e.parts = append(e.parts, encPart{at: len(b), Part: p})
		}
		return b
	}
	if e != nil && len(c.Data) >= LargeArray {
		b = mpBinHeader(b, len(c.Data))
		e.cols = append(e.cols, encCol{key: key, at: len(b), first: len(e.parts), n: 1, bytes: len(c.Data)})
		e.parts = append(e.parts, encPart{at: len(b), Part: collate.Part{Data: c.Data}})
		return b
	}
	return mpBin(b, c.Data)
}

// appendMessage writes one chat message: role, then content when present,
// then tool_calls when present.
func appendMessage(b []byte, m *schema.Message) ([]byte, error) {
	n := 1
	if m.Kind != schema.NoContent {
		n++
	}
	if m.ToolCalls != nil {
		n++
	}
	b = mpMapHeader(b, n)
	b = mpStr(b, "role")
	b = mpStr(b, m.Role)
	var err error
	switch m.Kind {
	case schema.TextContent:
		b = mpStr(b, "content")
		b = mpStr(b, m.Text)
	case schema.BlockContent:
		b = mpStr(b, "content")
		b = mpArrayHeader(b, len(m.Blocks))
		for i := range m.Blocks {
			if b, err = appendMap(b, &m.Blocks[i]); err != nil {
				return b, fmt.Errorf("content block: %w", err)
			}
		}
	}
	if m.ToolCalls != nil {
		b = mpStr(b, "tool_calls")
		if b, err = appendJSONAsMsgpack(b, m.ToolCalls); err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendRow writes one raw language row with LeRobot's field names;
// timestamp only for persistent rows.
func appendRow(b []byte, r *schema.Row) ([]byte, error) {
	n := 5
	if r.HasTimestamp {
		n++
	}
	b = mpMapHeader(b, n)
	b = mpStr(b, "role")
	b = mpStr(b, r.Role)
	b = mpStr(b, "content")
	b = mpOptStr(b, r.Content)
	b = mpStr(b, "style")
	b = mpOptStr(b, r.Style)
	if r.HasTimestamp {
		b = mpStr(b, "timestamp")
		b = mpFloat64(b, r.Timestamp)
	}
	b = mpStr(b, "camera")
	b = mpOptStr(b, r.Camera)
	b = mpStr(b, "tool_calls")
	if r.ToolCalls == nil {
		return mpNil(b), nil
	}
	return appendJSONAsMsgpack(b, r.ToolCalls)
}

func mpOptStr(b []byte, s *string) []byte {
	if s == nil {
		return mpNil(b)
	}
	return mpStr(b, *s)
}

// appendMap writes an ordered JSON object.
func appendMap(b []byte, m *schema.Map) ([]byte, error) {
	if len(m.Keys) != len(m.Values) {
		return b, fmt.Errorf("malformed map: %d keys, %d values", len(m.Keys), len(m.Values))
	}
	var err error
	b = mpMapHeader(b, len(m.Keys))
	for i, k := range m.Keys {
		b = mpStr(b, k)
		if b, err = appendValue(b, m.Values[i]); err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendValue writes a JSON-like value: nil, bool, integers, floats,
// string, []any, schema.Map, json.RawMessage.
func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return mpNil(b), nil
	case bool:
		return mpBool(b, x), nil
	case int64:
		return mpInt(b, x), nil
	case int:
		return mpInt(b, int64(x)), nil
	case int32:
		return mpInt(b, int64(x)), nil
	case uint64:
		return mpUint(b, x), nil
	case float64:
		return mpFloat64(b, x), nil
	case float32:
		return mpFloat64(b, float64(x)), nil
	case string:
		return mpStr(b, x), nil
	case json.Number:
		return appendJSONAsMsgpack(b, []byte(x))
	case json.RawMessage:
		return appendJSONAsMsgpack(b, x)
	case []any:
		b = mpArrayHeader(b, len(x))
		for _, e := range x {
			if b, err = appendValue(b, e); err != nil {
				return b, err
			}
		}
		return b, nil
	case schema.Map:
		return appendMap(b, &x)
	case *schema.Map:
		return appendMap(b, x)
	case []schema.Map:
		b = mpArrayHeader(b, len(x))
		for i := range x {
			if b, err = appendMap(b, &x[i]); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("unsupported value type %T", v)
}

// appendCamera appends one entry of the header's cameras: key and decoded,
// and for a decoded camera its kind, dtype, shape and (depth) unit.
func appendCamera(b []byte, c Camera) []byte {
	n := 2
	if c.Decoded && c.Kind != "" {
		n += 3
		if c.Unit != "" {
			n++
		}
	}
	b = mpMapHeader(b, n)
	b = mpStr(b, "key")
	b = mpStr(b, c.Key)
	b = mpStr(b, "decoded")
	b = mpBool(b, c.Decoded)
	if n == 2 {
		return b
	}
	b = mpStr(b, "kind")
	b = mpStr(b, c.Kind)
	b = mpStr(b, "dtype")
	b = mpStr(b, c.DType)
	b = mpStr(b, "shape")
	b = mpShape(b, c.Shape)
	if c.Unit != "" {
		b = mpStr(b, "unit")
		b = mpStr(b, c.Unit)
	}
	return b
}

// mpShape appends a shape as a msgpack array of ints (the header's
// features and cameras, the batch's camera entries).
func mpShape(b []byte, shape []int) []byte {
	b = mpArrayHeader(b, len(shape))
	for _, d := range shape {
		b = mpInt(b, int64(d))
	}
	return b
}
