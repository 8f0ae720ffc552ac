package pipeline

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// With camera columns, a unit group (whole episodes: a row group, as
// LeRobot writes one per episode) is decoded in pieces of at most
// pieceRows samples, so that the decoded frames in flight are bounded in
// bytes whatever the episode length (docs/video.md, "Memory"). The group's
// numeric and language columns are read and rendered once and shared by
// its pieces; each piece decodes the frames of its own rows, plus the rows
// its --delta-timestamps camera windows reach (the halo), in one segment —
// one seek — per (episode, camera). Output bytes do not depend on the
// piece size.

// DefaultPieceBytes is the default bound on the decoded camera frames of
// one piece (Config.PieceBytes).
const DefaultPieceBytes = 256 << 20

// minPieceRows is the fewest samples a piece of a longer group holds,
// whatever PieceBytes says: each piece costs one ffmpeg process start
// and one seek per camera.
const minPieceRows = 32

// pieceRows is the most samples one piece holds: PieceBytes over the
// bytes of a sample's camera columns, less the halo (0 without camera
// columns: a group is then never split).
func pieceRows(cfg *Config) int {
	per := CameraBytesPerSample(cfg)
	if per == 0 {
		return 0
	}
	budget := cfg.PieceBytes
	if budget <= 0 {
		budget = DefaultPieceBytes
	}
	before, after := cameraHalo(cfg)
	least := minPieceRows
	if cfg.minPieceRows > 0 {
		least = cfg.minPieceRows
	}
	return max(least, int(budget/per)-before-after)
}

// cameraHalo is how many rows before and after a sample its
// --delta-timestamps camera windows reach (LeRobot's rounding of seconds
// to frames, as ResolveDeltas).
func cameraHalo(cfg *Config) (before, after int) {
	cams := map[string]bool{}
	if cfg.Cameras != nil {
		for _, c := range cfg.Cameras.Cameras {
			cams[c.Key] = true
		}
	}
	if cfg.Images != nil {
		for _, c := range cfg.Images.Cameras {
			cams[c.Key] = true
		}
	}
	for _, d := range cfg.Deltas {
		if !cams[d.Key] {
			continue
		}
		for _, s := range d.Seconds {
			o := int(math.RoundToEven(s * cfg.Dataset.Info.FPS))
			before, after = max(before, -o), max(after, o)
		}
	}
	return before, after
}

// haloRows is the rows [flo, fhi) a piece of rows [lo, hi) of a group of
// total samples decodes: its own and its --delta-timestamps camera halo.
func haloRows(cfg *Config, total, lo, hi int) (flo, fhi int) {
	before, after := cameraHalo(cfg)
	return max(0, lo-before), min(total, hi+after)
}

// pieceCount is the number of pieces of a group of n samples.
func pieceCount(n, rows int) int {
	if rows <= 0 || n <= rows {
		return 1
	}
	return (n + rows - 1) / rows
}

// pieceRange is the rows [lo, hi) of piece k of n of a group of total
// samples: the pieces cut the group into nearly equal runs.
func pieceRange(total, n, k int) (lo, hi int) {
	return k * total / n, (k + 1) * total / n
}

// pieceOf returns the piece (of n) holding row r of a group of total
// samples.
func pieceOf(total, n, r int) int {
	return sort.Search(n, func(k int) bool { _, hi := pieceRange(total, n, k); return hi > r })
}

// groupRead is a unit group read and rendered once for all its pieces.
type groupRead struct {
	once sync.Once
	c    *Chunk // the whole group, rendered, without frames
	// enc holds the group's encoded images (image features) by camera
	// and dataset index.
	enc map[string]map[int64][]byte
	err error
	// turn, when set (plan order), makes the group's pieces decode
	// their first camera in piece order (see pieceTurn).
	turn *pieceTurn
}

// cameraTurn orders the pieces of a group at the decoder: a piece waits
// before its first camera and finishes after it (or on failure), so that a
// piece decoded just after its predecessor continues the predecessor's
// FFmpeg process instead of overtaking it and starting one of its own
// (which the predecessor would then start again).
type cameraTurn interface {
	wait(ctx context.Context, k int) error
	finish(k int)
}

// pieceAfter is the cameraTurn of a training order's piece: it waits for
// prev (the first camera of its predecessor in its group, when that is
// among the pieces decoded just before it; nil: no wait) and closes done
// (when a later piece waits for it).
type pieceAfter struct {
	prev <-chan struct{}
	done chan struct{}
	once sync.Once
}

func (t *pieceAfter) wait(ctx context.Context, _ int) error {
	if t.prev == nil {
		return nil
	}
	select {
	case <-t.prev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *pieceAfter) finish(int) {
	if t.done != nil {
		t.once.Do(func() { close(t.done) })
	}
}

// pieceTurn makes piece k of a group start decoding its first camera only
// once piece k-1 has decoded its own. The pieces of a group wait for its
// read together and then race to the decoder; when a camera's file has
// one lane (video.FFmpeg.Lanes) piece k would wait for piece k-1's process
// anyway, and if it won the race it would start a process of its own,
// leaving piece k-1 to start another. Only for plan order, where every
// piece of a group is decoded and piece k-1 is handed to a worker before
// piece k.
type pieceTurn struct {
	mu   sync.Mutex
	done int           // pieces whose first camera is decoded (or failed)
	wake chan struct{} // closed when done grows
}

// wait blocks until the pieces before k have had their turn.
func (t *pieceTurn) wait(ctx context.Context, k int) error {
	for {
		t.mu.Lock()
		if t.done >= k {
			t.mu.Unlock()
			return nil
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		ch := t.wake
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finish records that piece k had its turn.
func (t *pieceTurn) finish(k int) {
	t.mu.Lock()
	t.done = max(t.done, k+1)
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
	t.mu.Unlock()
}

// get reads and renders g once.
func (gr *groupRead) get(ctx context.Context, cfg *Config, g []shard.Unit) error {
	gr.once.Do(func() {
		b, err := readGroup(ctx, cfg, g, shard.Options{Features: cfg.Features})
		if err != nil {
			gr.err = err
			return
		}
		gr.c = renderBatch(cfg, g[0], b)
		gr.c.episodeBounds() // computed here: pieces read them concurrently
		if gr.enc, err = readImages(ctx, cfg, g); err != nil {
			gr.err = err
		}
	})
	return gr.err
}

// piece is the input of one decoding job: piece K of N of a unit group.
type piece struct {
	g    []shard.Unit
	gr   *groupRead
	turn cameraTurn // when not nil, the piece's turn (else gr.turn's, if any)
	k, n int
	// want is the group's length as the keep index counted it (-1: not
	// known; it is checked when known).
	want int64
}

// pieceExt lets the filler gather --delta-timestamps windows of a piece
// beyond its own rows: from the group's numeric columns and from the
// piece's decoded halo frames.
type pieceExt struct {
	lo         int     // the piece's first row in the group
	start, end []int32 // the group's episode bounds (episodeBounds)
	// data[k] holds feature k's values from group row first[k] on.
	data  [][]byte
	first []int
}

// decodePiece reads (once per group) and renders the group, and decodes
// the camera frames of the piece's rows.
func decodePiece(ctx context.Context, cfg *Config, pc piece) (*Chunk, error) {
	turn := pc.turn
	if turn == nil && pc.gr.turn != nil {
		turn = pc.gr.turn
	}
	if turn != nil {
		defer turn.finish(pc.k) // also on failure: the next piece goes on
	}
	if err := pc.gr.get(ctx, cfg, pc.g); err != nil {
		return nil, err
	}
	whole := pc.gr.c
	total := whole.Batch.Len()
	if pc.want >= 0 && int64(total) != pc.want {
		return nil, fmt.Errorf("%s row group %d: %d frames, %d when first read (the dataset changed during the run?)", whole.Unit.File, whole.Unit.RowGroup, total, pc.want)
	}
	if pc.n <= 1 {
		// The whole group: frames are attached to the group's chunk.
		if err := attachFrames(ctx, cfg, pc.gr, turn, whole, 0, total, 0); err != nil {
			return nil, err
		}
		return whole, nil
	}
	lo, hi := pieceRange(total, pc.n, pc.k)
	c := &Chunk{Unit: whole.Unit, Batch: sliceBatch(whole.Batch, lo, hi), Results: whole.Results[lo:hi:hi], Tasks: whole.Tasks[lo:hi:hi]}
	if err := attachFrames(ctx, cfg, pc.gr, turn, c, lo, hi, pc.k); err != nil {
		return nil, err
	}
	return c, nil
}

// sliceBatch returns rows [lo, hi) of b, sharing b's arrays (its Features
// slice is its own, so columns may be appended).
func sliceBatch(b *shard.Batch, lo, hi int) *shard.Batch {
	s := *b
	s.Index, s.EpisodeIndex, s.FrameIndex, s.TaskIndex = b.Index[lo:hi:hi], b.EpisodeIndex[lo:hi:hi], b.FrameIndex[lo:hi:hi], b.TaskIndex[lo:hi:hi]
	s.Timestamp = b.Timestamp[lo:hi:hi]
	if b.PersistentOf != nil {
		s.PersistentOf = b.PersistentOf[lo:hi:hi]
	}
	if b.Events != nil {
		s.Events = b.Events[lo:hi:hi]
	}
	s.Features = make([]shard.FeatureData, len(b.Features))
	for k, f := range b.Features {
		size := 0
		if n := b.Len(); n > 0 {
			size = len(f.Data) / n
		}
		f.Data = f.Data[lo*size : hi*size : hi*size]
		s.Features[k] = f
	}
	return &s
}

// pieceFeed turns a source of unit groups into pieces (Run's inputs).
type pieceFeed struct {
	cfg  *Config
	next func(context.Context) ([]shard.Unit, bool, error)
	rows int
	cur  piece
}

// nextPiece returns the next piece. The number of pieces of a group is
// planned from the episodes index's lengths; the rows are cut from the
// group's actual length (pieceRange), so the pieces cover it exactly
// whatever the index says (a piece may be empty).
func (f *pieceFeed) nextPiece(ctx context.Context) (piece, bool, error) {
	if f.cur.gr == nil || f.cur.k+1 >= f.cur.n {
		g, ok, err := f.next(ctx)
		if err != nil || !ok {
			return piece{}, ok, err
		}
		f.cur = piece{g: g, gr: &groupRead{}, n: pieceCount(int(indexedLength(f.cfg.Dataset, g)), f.rows), want: -1}
		if set := f.cfg.Cameras; set != nil && f.cur.n > 1 {
			if ff, ok := set.Decoder.(*video.FFmpeg); ok && ff.Lanes <= 1 {
				f.cur.gr.turn = &pieceTurn{}
			}
		}
		return f.cur, true, nil
	}
	f.cur.k++
	return f.cur, true, nil
}

// indexedLength is the number of frames the episodes index gives the
// selected episodes of group g.
func indexedLength(ds *schema.Dataset, g []shard.Unit) int64 {
	var n int64
	seen := map[int64]bool{}
	for _, u := range g {
		for _, e := range u.Episodes {
			if seen[e] {
				continue
			}
			seen[e] = true
			if ep, ok := ds.Episode(e); ok {
				n += ep.Length
			}
		}
	}
	return n
}

// pieceIndex cuts the keep index's unit groups into the pieces that
// serveBatches decodes: piece id base[u]+k is piece k of group u.
type pieceIndex struct {
	idx  *keepIndex
	srcs []Mix
	base []int // len(units)+1
	mu   sync.Mutex
	// uses counts, per group, the pieces still to be decoded that share
	// its read (groups[u]), which is dropped after the last.
	uses   map[int]int
	groups map[int]*groupRead
}

func newPieceIndex(srcs []Mix, idx *keepIndex) *pieceIndex {
	rows := make([]int, len(srcs))
	for d, m := range srcs {
		rows[d] = pieceRows(m.Config)
	}
	pi := &pieceIndex{idx: idx, srcs: srcs, base: make([]int, len(idx.units)+1), uses: map[int]int{}, groups: map[int]*groupRead{}}
	for u := range idx.units {
		n := idx.unitStart[u+1] - idx.unitStart[u]
		pi.base[u+1] = pi.base[u] + pieceCount(int(n), rows[idx.src[u]])
	}
	return pi
}

// at returns the piece holding position p and p's offset in it.
func (pi *pieceIndex) at(p int64) (id, off int) {
	u := pi.idx.unitOf(p)
	total := int(pi.idx.unitStart[u+1] - pi.idx.unitStart[u])
	n := pi.base[u+1] - pi.base[u]
	r := int(p - pi.idx.unitStart[u])
	k := pieceOf(total, n, r)
	lo, _ := pieceRange(total, n, k)
	return pi.base[u] + k, r - lo
}

// group returns the unit group of piece id.
func (pi *pieceIndex) group(id int) int {
	return sort.Search(len(pi.base)-1, func(u int) bool { return pi.base[u+1] > id })
}

// src is the source (Mix index) of piece id.
func (pi *pieceIndex) src(id int) int { return pi.idx.src[pi.group(id)] }

// episode is the episode of piece id's first frame.
func (pi *pieceIndex) episode(id int) int64 {
	g := pi.group(id)
	rows := int(pi.idx.unitStart[g+1] - pi.idx.unitStart[g])
	lo, _ := pieceRange(rows, pi.base[g+1]-pi.base[g], id-pi.base[g])
	p := pi.idx.unitStart[g] + int64(lo)
	runs := pi.idx.runs[pi.idx.src[g]]
	// Positions number every source's frames, source after source: the
	// run holding p is the last starting at or before it.
	k := sort.Search(len(runs), func(i int) bool { return runs[i].Start > p }) - 1
	if k < 0 {
		return -1
	}
	return runs[k].Episode
}

// use records that piece id will be decoded (once).
func (pi *pieceIndex) use(id int) { pi.uses[pi.group(id)]++ }

// prestart reads (once) the group of piece id, if pieces of it are still
// to be decoded, and has the cameras get ready for the piece's segments
// (video.Set.Prestart), so that its decoding does not wait for a decoder
// to start. It changes no output: the group's read is the one decode
// uses, and a prestarted decoder gives the frames a new one would.
func (pi *pieceIndex) prestart(ctx context.Context, id int) {
	u := pi.group(id)
	cfg := pi.srcs[pi.idx.src[u]].Config
	set := cfg.Cameras
	if set == nil {
		return
	}
	pi.mu.Lock()
	gr := pi.groups[u]
	if gr == nil && pi.uses[u] > 0 {
		gr = &groupRead{}
		pi.groups[u] = gr
	}
	pi.mu.Unlock()
	if gr == nil || gr.get(ctx, cfg, pi.idx.units[u]) != nil {
		return // every piece of it decoded already, or the read failed (decode reports it)
	}
	wb := gr.c.Batch
	total, n := wb.Len(), pi.base[u+1]-pi.base[u]
	flo, fhi := 0, total
	if n > 1 {
		lo, hi := pieceRange(total, n, id-pi.base[u])
		flo, fhi = haloRows(cfg, total, lo, hi)
	}
	if flo >= fhi {
		return
	}
	for cam := range set.Cameras {
		set.Prestart(ctx, cam, wb.EpisodeIndex[flo:fhi], wb.Timestamp[flo:fhi])
	}
}

// decode decodes piece id in its turn (nil: none); the group's read is
// shared with its other used pieces and dropped after the last of them.
func (pi *pieceIndex) decode(ctx context.Context, id int, turn cameraTurn) (*Chunk, error) {
	u := pi.group(id)
	pi.mu.Lock()
	gr := pi.groups[u]
	if gr == nil {
		gr = &groupRead{}
		pi.groups[u] = gr
	}
	if pi.uses[u]--; pi.uses[u] <= 0 {
		delete(pi.groups, u)
		delete(pi.uses, u)
	}
	pi.mu.Unlock()
	pc := piece{g: pi.idx.units[u], gr: gr, turn: turn, k: id - pi.base[u], n: pi.base[u+1] - pi.base[u],
		want: pi.idx.unitStart[u+1] - pi.idx.unitStart[u]}
	return decodePiece(ctx, pi.srcs[pi.idx.src[u]].Config, pc)
}
