package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/render"
)

// heldFrame is a frame a consumer will serve, copied out of its decoded
// chunk as soon as the chunk is decoded, so that the chunk (its row
// group's columns, language rows, render results and camera frames) is
// released at once instead of living until the shuffle order has served
// its last frame. A shuffle buffer of N frames keeps a chunk's last
// frames waiting about N·ln(frames per chunk) draws, so holding whole
// chunks costs several times the buffer; holding frames costs the
// buffer's frames.
type heldFrame struct {
	f    collate.Frame // Features point into data
	data []byte
	res  render.Result // outcome, fallback and component, for Stats
	src  int
	// file and rowGroup locate the frame for error messages.
	file     string
	rowGroup int
	// err is set when the frame cannot be served (its rendering or its
	// camera frame failed after the keep index kept it).
	err error
}

// holder is the frame store of one training stream, reused across
// epochs: which served position each selected position has, the frames
// decoded but not yet served, and a free list of frames.
type holder struct {
	emitAt []int32 // per position of the keep index: its serve index, or -1
	ring   []*heldFrame
	free   []*heldFrame
	tmp    collate.Frame
	names  [][]string // per source: its Strings value in a mixture
	keep   bool       // KeepLanguage: hold the language rows too
	// peak is the largest number of frames held at once (for tests).
	peak, held int
}

func newHolder(srcs []Mix, keepLanguage bool) *holder {
	h := &holder{keep: keepLanguage}
	if len(srcs) > 1 {
		for _, m := range srcs {
			h.names = append(h.names, []string{m.Name})
		}
	}
	return h
}

// get returns a cleared frame from the free list or a new one.
func (h *holder) get() *heldFrame {
	h.held++
	h.peak = max(h.peak, h.held)
	if n := len(h.free); n > 0 {
		hf := h.free[n-1]
		h.free = h.free[:n-1]
		return hf
	}
	return &heldFrame{}
}

// put returns served frames to the free list, dropping their references
// to samples and language rows.
func (h *holder) put(frames []*heldFrame) {
	for _, hf := range frames {
		feats, data := hf.f.Features[:0], hf.data[:0]
		*hf = heldFrame{data: data}
		hf.f.Features = feats
		h.free = append(h.free, hf)
	}
	h.held -= len(frames)
}

// slot returns the ring cell of serve index i, growing the ring (a power
// of two) when i is a ring's length or more ahead of cursor.
func (h *holder) slot(i, cursor int) **heldFrame {
	if i-cursor >= len(h.ring) {
		n := max(1024, len(h.ring))
		for i-cursor >= n {
			n *= 2
		}
		ring := make([]*heldFrame, n)
		for k := cursor; k < cursor+len(h.ring); k++ {
			ring[k&(n-1)] = h.ring[k&(len(h.ring)-1)]
		}
		h.ring = ring
	}
	return &h.ring[i&(len(h.ring)-1)]
}

// hold copies frame j of c (source src) into a held frame.
func (h *holder) hold(c *Chunk, j, src int, fl *filler, srcs []Mix) (*heldFrame, error) {
	hf := h.get()
	bt := c.Batch
	f := &hf.f
	f.Index, f.EpisodeIndex, f.FrameIndex, f.TaskIndex = bt.Index[j], bt.EpisodeIndex[j], bt.FrameIndex[j], bt.TaskIndex[j]
	f.Timestamp, f.Task = bt.Timestamp[j], c.Tasks[j]
	hf.src, hf.file, hf.rowGroup = src, c.Unit.File, c.Unit.RowGroup
	r := &c.Results[j]
	hf.res = render.Result{Outcome: r.Outcome, Fallback: r.Fallback, Component: r.Component}
	switch r.Outcome {
	case render.Rendered:
		f.Sample = r.Sample
	case render.Failed:
		// The keep index rendered this frame; only its camera frame
		// can fail now, and the training order cannot skip it.
		fe := c.FrameErr(srcs[src].Config.Dataset.ID, j)
		hf.err = fmt.Errorf("%w (the training order cannot skip a frame whose camera fails: fix the video, or stream in plan order with --on-error skip)", fe)
		return hf, nil
	}
	if h.names != nil {
		f.Strings = h.names[src]
	}
	if err := fl.fill(&h.tmp, c, j); err != nil {
		return hf, err
	}
	data := hf.data[:0]
	for _, v := range h.tmp.Features {
		data = append(data, v...)
	}
	hf.data = data
	if cap(f.Features) < len(h.tmp.Features) {
		f.Features = make([][]byte, len(h.tmp.Features))
	}
	f.Features = f.Features[:len(h.tmp.Features)]
	off := 0
	for k, v := range h.tmp.Features {
		f.Features[k] = data[off : off+len(v) : off+len(v)]
		off += len(v)
	}
	if h.keep {
		f.Persistent, f.Events = bt.PersistentRows(j), bt.EventRows(j)
	}
	return hf, nil
}

// serveBatches decodes the units that the global batches mine need, in
// order of first use, on cfg.Workers goroutines, and calls emit with each
// batch's frames in order. start is called with every decoded chunk
// before its frames are taken and returns the stream's fillers (it sets
// the stream up at the first chunk). Each decoded chunk's frames that mine
// serves are copied out at once (heldFrame) and the chunk is released, so
// memory is the frames waiting to be served, not their chunks.
func serveBatches(ctx context.Context, srcs []Mix, idx *keepIndex, h *holder, order []int32, mine []int64, B int64,
	start func(c *Chunk) ([]*filler, error), emit func(frames []*heldFrame, k int64) error) error {
	if len(mine) == 0 {
		return nil
	}
	n := int64(len(order))
	// Serve index of each position, and the pieces of unit groups
	// (whole groups without cameras, see pieces.go) in order of first use.
	if cap(h.emitAt) < len(idx.keep) {
		h.emitAt = make([]int32, len(idx.keep))
	}
	emitAt := h.emitAt[:len(idx.keep)]
	for i := range emitAt {
		emitAt[i] = -1
	}
	pi := newPieceIndex(srcs, idx)
	for _, m := range srcs {
		if m.Config.Cameras != nil && m.Config.Cameras.ReleaseFiles != nil {
			defer m.Config.Cameras.ReleaseFiles()
		}
	}
	seen := make([]bool, pi.base[len(pi.base)-1])
	var units []int
	total := 0
	for _, k := range mine {
		for _, p := range order[k*B : min((k+1)*B, n)] {
			emitAt[p] = int32(total)
			total++
			if u, _ := pi.at(int64(p)); !seen[u] {
				seen[u] = true
				units = append(units, u)
				pi.use(u)
			}
		}
	}
	// order is not used past this point (nor by the callers after this
	// call), so the collector can free it while the batches are served.
	workers := srcs[0].Config.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	clear(h.ring)
	cursor := 0 // next serve index
	bi := 0     // next batch of mine
	var fillers []*filler
	var picks []*heldFrame
	defer func() {
		// An error or cancellation: drop what is still held.
		for i := cursor; i < cursor+len(h.ring); i++ {
			if c := &h.ring[i&(len(h.ring)-1)]; *c != nil {
				h.put([]*heldFrame{*c})
				*c = nil
			}
		}
		h.put(picks)
	}()
	return ordered(ctx, len(units), workers, chunkWindow(srcs[0].Config, workers),
		func(ctx context.Context, i int) (*Chunk, error) {
			return pi.decode(ctx, units[i])
		},
		func(i int, c *Chunk) error {
			// The piece's positions: rows [plo, phi) of its group.
			id := units[i]
			g := pi.group(id)
			rows := int(idx.unitStart[g+1] - idx.unitStart[g])
			plo, phi := pieceRange(rows, pi.base[g+1]-pi.base[g], id-pi.base[g])
			lo, hi := idx.unitStart[g]+int64(plo), idx.unitStart[g]+int64(phi)
			if got := int64(c.Batch.Len()); got != hi-lo {
				return fmt.Errorf("%s row group %d: %d frames in a piece of %d (the dataset changed during the run?)", c.Unit.File, c.Unit.RowGroup, got, hi-lo)
			}
			var err error
			if fillers, err = start(c); err != nil {
				return err
			}
			src := pi.src(id)
			for p := lo; p < hi; p++ {
				e := emitAt[p]
				if e < 0 {
					continue
				}
				hf, err := h.hold(c, int(p-lo), src, fillers[src], srcs)
				if err != nil {
					h.put([]*heldFrame{hf})
					return err
				}
				*h.slot(int(e), cursor) = hf
			}
			// The chunk's frames are copied: its camera buffers go back
			// for reuse.
			c.releaseFrames(srcs[src].Config)
			// Serve every frame whose unit is now decoded.
			for cursor < total && len(h.ring) > 0 {
				cell := &h.ring[cursor&(len(h.ring)-1)]
				if *cell == nil {
					break
				}
				picks = append(picks, *cell)
				*cell = nil
				cursor++
				k := mine[bi]
				if int64(len(picks)) == min(B, n-k*B) {
					err := emit(picks, k)
					h.put(picks)
					picks = picks[:0]
					if err != nil {
						return err
					}
					bi++
				}
			}
			return nil
		})
}

// batchOf collates held frames into one batch.
func batchOf(b *collate.Batcher, frames []*heldFrame) (*collate.Batch, error) {
	var out *collate.Batch
	for i, hf := range frames {
		if hf.err != nil {
			return nil, hf.err
		}
		f := &hf.f
		var err error
		if i == len(frames)-1 && len(frames) < b.Config().BatchSize {
			if _, err = b.Add(f); err == nil {
				out, err = b.Flush()
			}
		} else {
			out, err = b.Add(f)
		}
		if err != nil {
			return nil, fmt.Errorf("%s row group %d: episode %d, index %d: %w", hf.file, hf.rowGroup, f.EpisodeIndex, f.Index, err)
		}
	}
	if out == nil {
		return nil, errors.New("internal error: batch did not complete")
	}
	return out, nil
}
