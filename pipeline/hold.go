package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/video"
)

// heldChunk holds the frames of one decoded chunk that a consumer will
// serve, copied out as soon as the chunk is decoded, so that the chunk (its
// row group's columns, language rows, render results and camera frames) is
// released at once instead of living until the shuffle order has served its
// last frame. A shuffle buffer of N frames keeps a chunk's last frames
// waiting about N·ln(frames per chunk) draws, so holding whole chunks costs
// several times the buffer; holding frames costs the buffer's frames.
//
// The frames are stored compactly, one record and one run of feature bytes
// per frame in two arrays per chunk (80 bytes besides the features, and no
// per-frame allocation, which also keeps the collector's work small).
// Frames of perFrameStride bytes or more (camera frames) get an array each
// instead, dropped as soon as the frame is served: one array for a
// chunk's frames would live until its last frame is served, which a
// shuffle buffer delays by about N·ln(frames per chunk) draws, so the
// chunks alive would hold several times the frames waiting. Their camera
// frames are held in the form the decoder gave them (Config.StoredFrames:
// YUV 4:2:0, half the bytes of RGB) with their conversions (convs), and
// converted only where the batch is written. With a spill directory
// (TrainOptions.Spill) those arrays wait in the holder's spill file
// instead and are read back when their batch is collated (spill.go).
type heldChunk struct {
	recs []heldFrame
	data []byte // the features of recs[i] at data[i*stride:(i+1)*stride]
	// own, for frames of perFrameStride bytes or more, holds each
	// record's features instead of data (nil once the frame is served):
	// feature k takes sizes[k] bytes, or with a conversion its stored
	// bytes.
	own [][]byte
	// convs[n*len(sizes)+k], when convs is set, is the conversion of
	// record n's feature k (nil: its bytes are in own).
	convs []collate.Conv
	// spillAt[n] is the offset of record n's features in the holder's
	// spill file and spillN[n] their bytes, while they wait there
	// (TrainOptions.Spill; spillN[n] 0 otherwise): own[n] is nil until
	// the batch is collated (holder.unspill).
	spillAt []int64
	spillN  []int32
	// sizes are the bytes of each output feature within a stride.
	sizes  []int
	stride int
	sized  bool // sizes and stride are set (by the first frame held)
	// lang holds recs[i]'s language rows with KeepLanguage.
	lang [][2][]schema.Row
	// errs holds the frames that cannot be served (their camera frame
	// failed after the keep index kept them), by record.
	errs map[int32]error
	src  int
	// file and rowGroup locate the frames for error messages.
	file     string
	rowGroup int
}

// heldFrame is one frame of a heldChunk.
type heldFrame struct {
	index, episode, frameIndex, task int64
	taskName                         string
	sample                           *schema.Sample
	chunk                            *heldChunk
	ts                               float32
	n                                int32 // the record's number in chunk.recs
	component                        int32
	outcome                          uint8 // a render.Outcome
	fallback                         bool
}

// result is the frame's render outcome, for Stats.
func (hf *heldFrame) result() render.Result {
	return render.Result{Outcome: render.Outcome(hf.outcome), Fallback: hf.fallback, Component: int(hf.component)}
}

// err is set when the frame cannot be served.
func (hf *heldFrame) err() error {
	if hf.chunk.errs == nil {
		return nil
	}
	return hf.chunk.errs[hf.n]
}

// frame fills f with hf for collation: its features point into the chunk.
func (hf *heldFrame) frame(f *collate.Frame, names [][]string) {
	c := hf.chunk
	f.Index, f.EpisodeIndex, f.FrameIndex, f.TaskIndex = hf.index, hf.episode, hf.frameIndex, hf.task
	f.Timestamp, f.Task, f.Sample = hf.ts, hf.taskName, hf.sample
	if cap(f.Features) < len(c.sizes) {
		f.Features = make([][]byte, len(c.sizes))
	}
	f.Features = f.Features[:len(c.sizes)]
	f.Conv = f.Conv[:0]
	data, off := c.data, int(hf.n)*c.stride
	if c.own != nil {
		data, off = c.own[hf.n], 0
	}
	convs := c.recConvs(int(hf.n))
	for k, n := range c.sizes {
		if convs != nil && convs[k] != nil {
			n, _ = convs[k].Sizes()
		}
		f.Features[k] = data[off : off+n : off+n]
		off += n
	}
	if convs != nil {
		f.Conv = append(f.Conv, convs...)
	}
	f.Owner, f.Borrow = nil, nil // the held bytes are copies, reused: never borrowed
	f.Strings = nil
	if names != nil {
		f.Strings = names[c.src]
	}
	f.Persistent, f.Events = nil, nil
	if c.lang != nil {
		f.Persistent, f.Events = c.lang[hf.n][0], c.lang[hf.n][1]
	}
}

// holder is the frame store of one training stream, reused across
// epochs: which served position each selected position has, the frames
// decoded but not yet served.
type holder struct {
	emitAt []int32 // per position of the keep index: its serve index, or -1
	ring   []*heldFrame
	tmp    collate.Frame
	out    collate.Frame // the frame being collated (batchOf)
	names  [][]string    // per source: its Strings value in a mixture
	keep   bool          // KeepLanguage: hold the language rows too
	// peak is the largest number of frames held at once (for tests).
	peak, held int
	// free are served frames' arrays, kept for reuse (frameBuffer) by
	// capacity, guarded by mu (batches are recycled on encoder
	// goroutines): freeBytes of them, at most freeMax (sizeChunk), that
	// is freeFrames frames of the largest batch form.
	mu                 sync.Mutex
	free               map[int][][]byte
	freeBytes, freeMax int
	freeFrames         int
	// lent are the owners of the frames batchOf collated last, by
	// position (nil: copied), released by served.
	lent []*heldOwner
	// borrow marks every feature of a frame as borrowable (batchOf).
	borrow []bool
	// spillDir, when set, is where the frames with arrays of their own
	// wait (TrainOptions.Spill), in spill, opened with the first.
	spillDir string
	spill    *spillFile
	// ahead, when spilled samples are shuffled, is how many serve
	// indices ahead of their first use pieces are decoded (spillAhead,
	// hoistPieces); 0 otherwise.
	ahead int32
}

func newHolder(srcs []Mix, keepLanguage bool, spillDir string) *holder {
	h := &holder{keep: keepLanguage, spillDir: spillDir, freeFrames: maxFreeFrames}
	if len(srcs) > 1 {
		for _, m := range srcs {
			h.names = append(h.names, []string{m.Name})
		}
	}
	return h
}

// chunk returns a new chunk for n frames. Chunks are not recycled: their
// arrays are sized for the frames a consumer serves from one chunk, which
// varies, and the collector frees a chunk once its last frame is served.
func (h *holder) chunk(n int) *heldChunk {
	h.held += n
	h.peak = max(h.peak, h.held)
	return &heldChunk{recs: make([]heldFrame, n)}
}

// release counts served (or dropped) frames out of the held ones.
func (h *holder) release(frames []*heldFrame) {
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

// hold copies frame j of c (source src) into record n of hc.
func (h *holder) hold(hc *heldChunk, n int, c *Chunk, j int, fl *filler, srcs []Mix) error {
	hf := &hc.recs[n]
	bt := c.Batch
	*hf = heldFrame{
		index: bt.Index[j], episode: bt.EpisodeIndex[j], frameIndex: bt.FrameIndex[j], task: bt.TaskIndex[j],
		ts: bt.Timestamp[j], taskName: c.Tasks[j], chunk: hc, n: int32(n),
	}
	r := &c.Results[j]
	hf.outcome, hf.fallback, hf.component = uint8(r.Outcome), r.Fallback, int32(r.Component)
	switch r.Outcome {
	case render.Rendered:
		hf.sample = r.Sample
	case render.Failed, render.Dropped:
		// The keep index kept this frame, and the training order cannot
		// skip it: the batch holding it fails (batchOf), after the
		// batches before it. With the keep pass only a camera frame can
		// fail now; with a keep index from metadata (every frame kept by
		// construction, metaKeepIndex) its rendering can fail too, with
		// the error the keep pass would have given.
		fe := c.FrameErr(srcs[hc.src].Config.Dataset.ID, j)
		var err error = fe
		var cam *video.FrameError
		switch {
		case r.Outcome == render.Dropped:
			// Not expected: the keep index drops such frames, and one from
			// metadata is only built when every task has a text (and the
			// reader refuses a task_index not in meta/tasks.parquet).
			err = fmt.Errorf("%s: %s row group %d: episode %d, index %d: renders to None and has no task (task_index %d), but the training order kept it", fe.Dataset, fe.File, fe.RowGroup, fe.Episode, fe.Index, bt.TaskIndex[j])
		case errors.As(r.Err, &cam):
			err = fmt.Errorf("%w (the training order cannot skip a frame whose camera fails: fix the video, or stream in plan order with --on-error skip)", fe)
		}
		if hc.errs == nil {
			hc.errs = map[int32]error{}
		}
		hc.errs[int32(n)] = err
		return nil // no features: batchOf fails on the error first
	}
	if err := fl.fill(&h.tmp, c, j); err != nil {
		return err
	}
	if !hc.sized {
		h.sizeChunk(hc, h.tmp.Features, h.tmp.Conv)
	}
	if len(h.tmp.Features) != len(hc.sizes) {
		return fmt.Errorf("%s row group %d: episode %d, index %d: %d feature values, %d for the row group's first frame", c.Unit.File, c.Unit.RowGroup, hf.episode, hf.index, len(h.tmp.Features), len(hc.sizes))
	}
	var err error
	if hc.own != nil {
		err = h.holdOwn(hc, n, c, hf)
	} else {
		err = h.holdShared(hc, n, c, hf)
	}
	if err != nil {
		return err
	}
	if h.keep {
		if hc.lang == nil {
			hc.lang = make([][2][]schema.Row, len(hc.recs))
		}
		hc.lang[n] = [2][]schema.Row{bt.PersistentRows(j), bt.EventRows(j)}
	}
	return nil
}

// holdShared appends the features of h.tmp (record n's, frame hf of c) to
// the chunk's array, converted.
func (h *holder) holdShared(hc *heldChunk, n int, c *Chunk, hf *heldFrame) error {
	data := hc.data
	if at := n * hc.stride; len(data) < at {
		// Frames before this one failed: their features stay zero.
		data = append(data, make([]byte, at-len(data))...)
	}
	for k, v := range h.tmp.Features {
		p := collate.Part{Data: v}
		if k < len(h.tmp.Conv) {
			p.Conv = h.tmp.Conv[k] // small frames are converted at once
		}
		if p.Len() != hc.sizes[k] {
			return heldSizeError(c, hf, k, p.Len(), hc.sizes[k])
		}
		data = p.AppendTo(data)
	}
	hc.data = data
	return nil
}

// holdOwn copies the features of h.tmp (record n's, frame hf of c) into
// an array of their own, camera frames in the form they are stored in
// with their conversions.
func (h *holder) holdOwn(hc *heldChunk, n int, c *Chunk, hf *heldFrame) error {
	fs, convs := h.tmp.Features, h.tmp.Conv
	total, lazy := 0, false
	for k, v := range fs {
		got := len(v)
		if k < len(convs) && convs[k] != nil {
			_, got = convs[k].Sizes()
			lazy = true
		}
		if got != hc.sizes[k] {
			return heldSizeError(c, hf, k, got, hc.sizes[k])
		}
		total += len(v)
	}
	if lazy {
		if hc.convs == nil {
			hc.convs = make([]collate.Conv, len(hc.recs)*len(hc.sizes))
		}
		copy(hc.convs[n*len(hc.sizes):(n+1)*len(hc.sizes)], convs)
	}
	if h.spillDir != "" {
		return h.spillOwn(hc, n, hf, fs, total)
	}
	data := h.frameBuffer(total)
	for _, v := range fs {
		data = append(data, v...)
	}
	hc.own[n] = data
	return nil
}

// spillOwn writes the features fs (total bytes) of record n (frame hf)
// to the holder's spill file, opening it with the first frame.
func (h *holder) spillOwn(hc *heldChunk, n int, hf *heldFrame, fs [][]byte, total int) error {
	if h.spill == nil {
		sp, err := openSpill(h.spillDir)
		if err != nil {
			return err
		}
		h.spill = sp
	}
	if hc.spillAt == nil {
		hc.spillAt, hc.spillN = make([]int64, len(hc.recs)), make([]int32, len(hc.recs))
	}
	off, err := h.spill.put(fs, total, hf)
	if err != nil {
		return err
	}
	hc.spillAt[n], hc.spillN[n] = off, int32(total)
	return nil
}

// unspill reads the spilled features of frames back into arrays of their
// own (frameBuffer), as if they had been held in memory, and frees their
// slots.
func (h *holder) unspill(frames []*heldFrame) error {
	for _, hf := range frames {
		c := hf.chunk
		if c.spillN == nil || c.spillN[hf.n] == 0 {
			continue
		}
		size := int(c.spillN[hf.n])
		buf := h.frameBuffer(size)[:size]
		if err := h.spill.get(c.spillAt[hf.n], buf, hf); err != nil {
			h.recycle(buf)
			return err
		}
		c.own[hf.n], c.spillN[hf.n] = buf, 0
	}
	return nil
}

// closeSpill closes the spill file, if one was opened.
func (h *holder) closeSpill() error {
	err := h.spill.close()
	h.spill = nil
	return err
}

// heldSizeError is the error of a frame whose feature k has got bytes
// where the chunk's first frame had want.
func heldSizeError(c *Chunk, hf *heldFrame, k, got, want int) error {
	return fmt.Errorf("%s row group %d: episode %d, index %d: feature %d has %d bytes, %d for the row group's first frame", c.Unit.File, c.Unit.RowGroup, hf.episode, hf.index, k, got, want)
}

// recConvs returns record n's conversions by feature, or nil when none of
// its features has one.
func (hc *heldChunk) recConvs(n int) []collate.Conv {
	if hc.convs == nil {
		return nil
	}
	k := len(hc.sizes)
	return hc.convs[n*k : (n+1)*k]
}

// perFrameStride is the size of a frame's features from which held frames
// get an array each (heldChunk.own): a camera frame. Smaller frames share
// their chunk's array.
const perFrameStride = 32 << 10

// size sets the chunk's feature sizes (in the batch: converted) from its
// first held frame's, and its storage.
func (hc *heldChunk) size(features [][]byte, convs []collate.Conv) {
	hc.sized = true
	hc.sizes, hc.stride = make([]int, len(features)), 0
	for k, v := range features {
		hc.sizes[k] = len(v)
		if k < len(convs) && convs[k] != nil {
			_, hc.sizes[k] = convs[k].Sizes()
		}
		hc.stride += hc.sizes[k]
	}
	if hc.stride >= perFrameStride {
		hc.own = make([][]byte, len(hc.recs))
		return
	}
	hc.data = make([]byte, 0, len(hc.recs)*hc.stride)
}

// maxFreeFrames is the least a holder keeps of served frames' arrays
// for reuse (frameBuffer): a default batch's worth of frames in their
// batch form (TrainBytes counts them), so twice as many frames held as
// YUV. A shuffled stream keeps up to its buffer's share (keepFree).
const maxFreeFrames = 32

// keepFree lets the holder keep up to frames served arrays for reuse
// (at least maxFreeFrames), in their batch form. A shuffled stream keeps
// its buffer's share: its frames are served in batches and its pieces
// decoded in bursts of many frames, and an array the holder does not
// keep is garbage that the collector lets grow the heap to twice the
// frames held (fresh memory, page faults) before reclaiming it. Keeping
// them costs no memory beyond the frames in use: an array is allocated
// only when none of its size is free, so the arrays of one size in use
// and kept together never outnumber the most of that size ever in use
// at once.
func (h *holder) keepFree(frames int) {
	h.mu.Lock()
	h.freeFrames = max(maxFreeFrames, frames)
	h.mu.Unlock()
}

// sizeChunk sizes hc from its first held frame (heldChunk.size) and lets
// the holder keep freeFrames served arrays of that frame's batch form
// for reuse.
func (h *holder) sizeChunk(hc *heldChunk, features [][]byte, convs []collate.Conv) {
	hc.size(features, convs)
	h.mu.Lock()
	h.freeMax = max(h.freeMax, h.freeFrames*hc.stride)
	h.mu.Unlock()
}

// frameBuffer returns an empty array of capacity stride for a held
// frame's features (as stored: see heldChunk.own): a served frame's, when
// one of that size is free.
// Camera frames are large (0.9 MB at 480×640): a new array each costs
// zeroing and page faults, as much CPU as copying the frame.
func (h *holder) frameBuffer(stride int) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.free[stride]; len(l) > 0 {
		n := len(l) - 1
		b := l[n][:0]
		l[n] = nil
		h.free[stride] = l[:n]
		h.freeBytes -= cap(b)
		return b
	}
	return make([]byte, 0, stride)
}

// freeCount is how many arrays the holder keeps for reuse.
func (h *holder) freeCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.free {
		n += len(l)
	}
	return n
}

// recycle keeps b for reuse (frameBuffer), up to freeMax bytes of
// arrays. Any goroutine may call it (a batch is recycled by its encoder).
func (h *holder) recycle(b []byte) {
	h.mu.Lock()
	if h.freeBytes+cap(b) <= h.freeMax {
		if h.free == nil {
			h.free = make(map[int][][]byte)
		}
		h.free[cap(b)] = append(h.free[cap(b)], b)
		h.freeBytes += cap(b)
	}
	h.mu.Unlock()
}

// served drops the holder's reference to the features of frames that are
// served, when they have arrays of their own: an array a batch borrows
// (batchOf: lent) goes back for reuse once that batch is recycled, any
// other at once.
func (h *holder) served(frames []*heldFrame) {
	lent := len(h.lent) == len(frames)
	for i, f := range frames {
		own := f.chunk.own
		if own == nil || own[f.n] == nil {
			continue // no array (a failed or still spilled frame)
		}
		switch {
		case lent && h.lent[i] != nil:
			h.lent[i].Release()
		case len(own[f.n]) == cap(own[f.n]):
			h.recycle(own[f.n]) // an array of frameBuffer's
		}
		own[f.n] = nil
	}
	clear(h.lent)
	h.lent = h.lent[:0]
}

// heldOwner lends a held camera frame's array to the batches collated
// from it (collate.Owner): the batch references its camera columns
// instead of copying them, and the array goes back to the holder
// (recycle) once the frame is served and the batch recycled.
type heldOwner struct {
	refs atomic.Int64
	h    *holder
	buf  []byte
}

// Retain implements collate.Owner.
func (o *heldOwner) Retain() { o.refs.Add(1) }

// Release implements collate.Owner.
func (o *heldOwner) Release() {
	switch n := o.refs.Add(-1); {
	case n == 0:
		o.h.recycle(o.buf)
		o.buf = nil
	case n < 0:
		panic("pipeline: a held frame released more often than retained")
	}
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
	bs := &batchServer{srcs: srcs, idx: idx, h: h, mine: mine, B: B, n: int64(len(order)), start: start, emit: emit}
	bs.plan(order)
	// order is not used past this point (nor by the callers after this
	// call), so the collector can free it while the batches are served.
	cams := false
	for _, m := range srcs {
		if m.Config.Cameras != nil {
			cams = true
			m.Config.Cameras.Start(ctx)
			defer m.Config.Cameras.Release()
		}
	}
	workers := workerCount(srcs[0].Config)
	if cams {
		// Pieces cut from groups, decoded by processes kept between them:
		// take turns, and prepare the next ones (prestart).
		bs.linkTurns(workers + 1)
		defer bs.prep.wait() // before the cameras' Release
	}
	clear(h.ring)
	defer bs.drop()
	return ordered(ctx, len(bs.units), workers, chunkWindow(srcs[0].Config, workers),
		func(ctx context.Context, i int) (*Chunk, error) {
			if !cams {
				return bs.pi.decode(ctx, bs.units[i], nil)
			}
			bs.prep.take(ctx, i, prepWidth(workers), len(bs.units), func(ctx context.Context, j int) {
				if !bs.follows(j) {
					bs.pi.prestart(ctx, bs.units[j])
				}
			})
			return bs.pi.decode(ctx, bs.units[i], bs.turns[i])
		},
		func(i int, c *Chunk) error {
			if err := bs.take(i, c); err != nil {
				return err
			}
			return bs.serveReady()
		})
}

// continues returns the input, among the within inputs before j, that
// decodes the piece before input j's in its group (-1: none): decoded just
// before it, by a decoder that then continues to j (video.FFmpeg keeps its
// process), so j waits for its first camera (linkTurns) and needs no
// prestart (follows).
func (bs *batchServer) continues(j, within int) int {
	id := bs.units[j]
	if id == 0 || bs.pi.group(id-1) != bs.pi.group(id) {
		return -1
	}
	for t := j - 1; t >= max(0, j-within); t-- {
		if bs.units[t] == id-1 {
			return t
		}
	}
	return -1
}

// linkTurns gives each input that continues its predecessor's decoder
// (continues) a turn after the predecessor's first camera: the workers
// take them at once, and the piece that won the race to the decoder would
// start a process of its own, its predecessor another.
func (bs *batchServer) linkTurns(within int) {
	bs.turns = make([]cameraTurn, len(bs.units))
	for j := range bs.units {
		t := bs.continues(j, within)
		if t < 0 {
			continue
		}
		prev, ok := bs.turns[t].(*pieceAfter)
		if !ok {
			prev = &pieceAfter{}
			bs.turns[t] = prev
		}
		prev.done = make(chan struct{})
		bs.turns[j] = &pieceAfter{prev: prev.done}
	}
}

// follows reports whether input j continues its predecessor's decoder
// (linkTurns gave it a turn after it): it needs no prestart.
func (bs *batchServer) follows(j int) bool {
	t, ok := bs.turns[j].(*pieceAfter)
	return ok && t.prev != nil
}

// batchServer is one serveBatches call: the serve index of every position
// the batches take, the pieces to decode in order of first use, and the
// frames held until their batch is complete.
type batchServer struct {
	srcs  []Mix
	idx   *keepIndex
	h     *holder
	pi    *pieceIndex
	mine  []int64
	B, n  int64 // batch size, and the epoch order's length
	start func(c *Chunk) ([]*filler, error)
	emit  func(frames []*heldFrame, k int64) error

	emitAt  []int32 // per position: its serve index, or -1
	units   []int   // pieces, in order of first use
	sizes   []int32 // frames of each batch of mine (holes left out)
	total   int     // frames to serve
	cursor  int     // next serve index
	bi      int     // next batch of mine
	fillers []*filler
	picks   []*heldFrame
	prep    lookahead    // with cameras: prestarts the pieces after those being decoded
	turns   []cameraTurn // with cameras: per input, its turn at the decoder (nil: none)
}

// prepWidth is how many inputs after the one a worker takes are prepared:
// half the workers (at least one). On 2 cores with 2 workers, preparing 1
// input ahead took 3.58–3.64 s for a shuffled bench480 stream, 2 ahead
// 3.54–3.80 s and 3 ahead 3.79–4.12 s (4 rounds, CPU 6.7, 6.9 and 7.2 s):
// processes started further ahead decode alongside the workers' and cost
// more than the waits they save.
func prepWidth(workers int) int { return max(1, workers/2) }

// lookahead prepares the inputs the workers take next while they decode:
// when a worker takes input i, each input after it up to i+width not yet
// prepared is (pieceIndex.prestart), in input order, one at a time, in
// the background: a piece's preparation sees its predecessors' (a
// process prestarted for piece k of an episode can continue to piece
// k+1, which then needs none).
type lookahead struct {
	mu   sync.Mutex
	next int           // the first input neither prepared nor taken
	tail chan struct{} // closed when the inputs prepared so far are
	wg   sync.WaitGroup
}

// take records that input i (of n) is taken — decoded now, not prepared —
// and prepares the inputs after the last prepared, up to i+width, with job
// once those before them are.
func (l *lookahead) take(ctx context.Context, i, width, n int, job func(context.Context, int)) {
	l.mu.Lock()
	from, last := max(l.next, i+1), min(i+width, n-1)
	if from > last {
		l.mu.Unlock()
		return
	}
	l.next = last + 1
	prev, done := l.tail, make(chan struct{})
	l.tail = done
	l.mu.Unlock()
	l.wg.Go(func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		for j := from; j <= last && ctx.Err() == nil; j++ {
			job(ctx, j)
		}
	})
}

func (l *lookahead) wait() { l.wg.Wait() }

// plan gives each position mine serves its serve index, and lists the
// pieces of unit groups (whole groups without cameras, see pieces.go) in
// order of first use.
func (bs *batchServer) plan(order []int32) {
	h, idx := bs.h, bs.idx
	if cap(h.emitAt) < len(idx.keep) {
		h.emitAt = make([]int32, len(idx.keep))
	}
	bs.emitAt = h.emitAt[:len(idx.keep)]
	for i := range bs.emitAt {
		bs.emitAt[i] = -1
	}
	bs.pi = newPieceIndex(bs.srcs, idx)
	seen := make([]bool, bs.pi.base[len(bs.pi.base)-1])
	first := make([]int32, len(seen)) // each used piece's first serve index
	bs.sizes = make([]int32, len(bs.mine))
	for i, k := range bs.mine {
		for _, p := range order[k*bs.B : min((k+1)*bs.B, bs.n)] {
			if p < 0 {
				continue // a hole: the batch is short of a dropped frame
			}
			bs.sizes[i]++
			bs.emitAt[p] = int32(bs.total)
			bs.total++
			if u, _ := bs.pi.at(int64(p)); !seen[u] {
				seen[u] = true
				first[u] = int32(bs.total - 1)
				bs.units = append(bs.units, u)
				bs.pi.use(u)
			}
		}
	}
	bs.units = hoistPieces(bs.pi, bs.units, seen, first, func(src int) int32 {
		return max(int32(pieceRows(bs.srcs[src].Config)), h.ahead)
	}, h.ahead > 0)
}

// hoistPieces returns the pieces of units (in order of first use) in
// decoding order: each piece preceded by the used pieces just before it
// in its group and episode that are first used later, but within a
// piece's samples of serve indices (pieceRows). A shuffle buffer serves
// an episode's pieces mostly in order, but now and then one after its
// successor (about a third of them with 36-sample pieces and a
// 582-frame buffer): decoded in order of first use, each such piece
// would start an FFmpeg process and seek, since the process that decoded
// its predecessor has moved on. Hoisted, it continues that process. Its
// frames entered the buffer before its successor's, so it adds at most
// the window's frames to what is held.
//
// With a spill (ahead set: the holder's ahead), waiting frames cost disk,
// not memory: the window is the buffer's frames, and the used pieces
// just after each piece in its group and episode, first used within
// the window, follow it (successors too), so that an episode is decoded
// in one run of its FFmpeg process rather than piece by piece between
// other episodes' pieces.
func hoistPieces(pi *pieceIndex, units []int, used []bool, first []int32, rows func(src int) int32, successors bool) []int {
	if pi.base[len(pi.base)-1] == len(pi.base)-1 {
		return units // one piece a group: nothing to hoist
	}
	done := make([]bool, len(used))
	out := make([]int, 0, len(units))
	var early []int
	for _, u := range units {
		if done[u] {
			continue
		}
		g := pi.group(u)
		window := rows(pi.idx.src[g])
		ep := pi.episode(u)
		early = early[:0]
		for v := u - 1; v >= pi.base[g] && !done[v]; v-- {
			if !used[v] {
				continue
			}
			if first[v]-first[u] > window || pi.episode(v) != ep {
				break
			}
			early = append(early, v)
		}
		for i := len(early) - 1; i >= 0; i-- {
			out = append(out, early[i])
			done[early[i]] = true
		}
		out = append(out, u)
		done[u] = true
		if !successors {
			continue
		}
		for v := u + 1; v < pi.base[g+1] && !done[v]; v++ {
			if !used[v] {
				continue
			}
			if first[v]-first[u] > window || pi.episode(v) != ep {
				break
			}
			out = append(out, v)
			done[v] = true
		}
	}
	return out
}

// take checks decoded piece i (chunk c) against the keep index and holds
// the frames of it that the batches serve.
func (bs *batchServer) take(i int, c *Chunk) error {
	h, idx, pi := bs.h, bs.idx, bs.pi
	// The piece's positions: rows [plo, phi) of its group.
	id := bs.units[i]
	g := pi.group(id)
	rows := int(idx.unitStart[g+1] - idx.unitStart[g])
	plo, phi := pieceRange(rows, pi.base[g+1]-pi.base[g], id-pi.base[g])
	lo, hi := idx.unitStart[g]+int64(plo), idx.unitStart[g]+int64(phi)
	if got := int64(c.Batch.Len()); got != hi-lo {
		return fmt.Errorf("%s row group %d: %d frames in a piece of %d (the dataset changed during the run?)", c.Unit.File, c.Unit.RowGroup, got, hi-lo)
	}
	src := pi.src(id)
	if err := idx.checkRows(bs.srcs[src].Config.Dataset.ID, c, src, lo, hi); err != nil {
		return err
	}
	var err error
	if bs.fillers, err = bs.start(c); err != nil {
		return err
	}
	cnt := 0
	for p := lo; p < hi; p++ {
		if bs.emitAt[p] >= 0 {
			cnt++
		}
	}
	if cnt > 0 {
		hc := h.chunk(cnt)
		hc.src, hc.file, hc.rowGroup = src, c.Unit.File, c.Unit.RowGroup
		r := 0
		for p := lo; p < hi; p++ {
			e := bs.emitAt[p]
			if e < 0 {
				continue
			}
			if err := h.hold(hc, r, c, int(p-lo), bs.fillers[src], bs.srcs); err != nil {
				h.held -= cnt - r
				return err
			}
			*h.slot(int(e), bs.cursor) = &hc.recs[r]
			r++
		}
	}
	// The chunk's frames are copied: its camera buffers go back for reuse.
	c.releaseFrames(bs.srcs[src].Config)
	return nil
}

// serveReady emits every batch whose frames are all decoded.
func (bs *batchServer) serveReady() error {
	h := bs.h
	for bs.cursor < bs.total && len(h.ring) > 0 {
		cell := &h.ring[bs.cursor&(len(h.ring)-1)]
		if *cell == nil {
			break
		}
		bs.picks = append(bs.picks, *cell)
		*cell = nil
		bs.cursor++
		k := bs.mine[bs.bi]
		if len(bs.picks) == int(bs.sizes[bs.bi]) {
			err := bs.emit(bs.picks, k)
			h.served(bs.picks)
			h.release(bs.picks)
			bs.picks = bs.picks[:0]
			if err != nil {
				return err
			}
			bs.bi++
		}
	}
	return nil
}

// drop releases what is still held after an error or cancellation.
func (bs *batchServer) drop() {
	h := bs.h
	for i := bs.cursor; i < bs.cursor+len(h.ring); i++ {
		if c := &h.ring[i&(len(h.ring)-1)]; *c != nil {
			h.release([]*heldFrame{*c})
			*c = nil
		}
	}
	h.release(bs.picks)
}

// lend lets the batch borrow the camera features of hf (f, its collate
// frame) when they have an array of their own (heldOwner), and records
// the owner for served.
func (h *holder) lend(hf *heldFrame, f *collate.Frame) {
	c := hf.chunk
	if c.own == nil || c.own[hf.n] == nil {
		h.lent = append(h.lent, nil)
		return
	}
	o := &heldOwner{h: h, buf: c.own[hf.n]}
	o.refs.Store(1) // the holder's, until served
	for len(h.borrow) < len(f.Features) {
		h.borrow = append(h.borrow, true)
	}
	f.Owner, f.Borrow = o, h.borrow[:len(f.Features)]
	h.lent = append(h.lent, o)
}

// batchOf collates held frames into one batch.
func (h *holder) batchOf(b *collate.Batcher, frames []*heldFrame) (*collate.Batch, error) {
	var out *collate.Batch
	f := &h.out
	if err := h.unspill(frames); err != nil {
		return nil, err
	}
	for i, hf := range frames {
		if err := hf.err(); err != nil {
			return nil, err
		}
		hf.frame(f, h.names)
		h.lend(hf, f)
		var err error
		if i == len(frames)-1 && len(frames) < b.Config().BatchSize {
			if _, err = b.Add(f); err == nil {
				out, err = b.Flush()
			}
		} else {
			out, err = b.Add(f)
		}
		if err != nil {
			return nil, fmt.Errorf("%s row group %d: episode %d, index %d: %w", hf.chunk.file, hf.chunk.rowGroup, f.EpisodeIndex, f.Index, err)
		}
	}
	// The frame's references go with the batch.
	*f = collate.Frame{Features: f.Features[:0]}
	if out == nil {
		return nil, errors.New("internal error: batch did not complete")
	}
	return out, nil
}
