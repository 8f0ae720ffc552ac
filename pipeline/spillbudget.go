package pipeline

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/lrstream/lrstream/order"
)

// DefaultSpillBytes is TrainOptions.SpillBytes' default, the most bytes
// one stream's spill file may hold: 64 GB. A fixed number, not a share of
// the free disk, because it sizes the shuffle buffer, and so the order:
// every node and every run (a resumed one too) must compute the same.
// It keeps the 16,384-frame buffer of two 480×640 cameras in the global
// order, whose worst case (frames counted at their batch size, one
// consumer) is 60.9 GB.
const DefaultSpillBytes = 64_000_000_000

// spillBudget is to's spill budget in bytes (negative: none).
func spillBudget(to TrainOptions) int64 {
	if to.SpillBytes == 0 {
		return DefaultSpillBytes
	}
	return to.SpillBytes
}

// spilledBytes is the most a frame of cfg takes in a spill file: its
// features at their batch size (camera frames are spilled as decoded:
// YUV 4:2:0 planes or 12-bit depth codes are smaller, RGB24 rows the
// same size, never more; the form is only known once a file is decoded,
// so the worst case comes from metadata). 0 when its samples are smaller
// than perFrameStride (held in their chunk's array, never spilled).
func spilledBytes(cfg *Config) int64 {
	n := SampleBytes(cfg) - heldFrameOverhead
	if n < perFrameStride {
		return 0
	}
	return n
}

// SpillBytes is the most bytes the spill file of a training stream of
// srcs with to (TrainOptions.Spill) holds at once, from metadata: the
// frames it holds (HeldBytes: its buffer share, the frames decoded ahead,
// the open episodes, the pieces being fed and collated, with the most
// samples a piece may have), at most the selection's frames, at their
// batch size (spilledBytes). 0 without a spill directory or when its
// samples never spill.
func SpillBytes(srcs []Mix, to TrainOptions) int64 {
	if len(srcs) == 0 || to.Spill == "" {
		return 0
	}
	z, _ := completeTrain(srcs, to)
	return spillBytesAt(srcs, z.to, z.sample)
}

// spillBytesAt is SpillBytes of a stream whose options are complete.
func spillBytesAt(srcs []Mix, to TrainOptions, sample int64) int64 {
	per := spilledSample(srcs)
	if per == 0 {
		return 0
	}
	// From metadata alone, with the most samples a piece may have
	// (cameraHeldMost), so that the buffer it sizes is the same on every
	// node.
	srcs = unmeasured(srcs)
	h := countHeld(srcs, to, sample, cameraHeldMost(srcs, to))
	return min(h.waiting+h.moving-h.free, selectedFrames(srcs)) * per
}

// spilledSample is the largest spilledBytes of srcs.
func spilledSample(srcs []Mix) int64 {
	var per int64
	for _, m := range srcs {
		per = max(per, spilledBytes(m.Config))
	}
	return per
}

// selectedFrames is the frames of srcs' selections.
func selectedFrames(srcs []Mix) int64 {
	var n int64
	for _, m := range srcs {
		f, _ := selectedMean(m.Config)
		n += f
	}
	return n
}

// spillSize lowers the buffer (and the partitioned orders' open
// episodes) of a shuffled stream of srcs with a spill directory until
// its spill fits the disk budget (spillBudget), for one consumer: the
// most any consumer holds, so that the buffer, and the order, do not
// depend on the cluster's size (with C consumers each spills about 1/C
// of it). It lowers BufferSize first; when a 1-frame buffer does not fit
// it lowers PartitionOpen, then raises BufferSize again as far as it
// fits. From metadata and options only, like bufferFrames.
func spillSize(srcs []Mix, to TrainOptions, sample int64) (TrainOptions, error) {
	budget := spillBudget(to)
	if to.Spill == "" || !to.Shuffle || budget < 0 {
		return to, nil
	}
	need := func(frames, open int) int64 {
		o := to
		o.BufferSize, o.PartitionOpen, o.Consumer, o.Consumers = frames, open, 0, 1
		return spillBytesAt(srcs, o, sample)
	}
	open := to.PartitionOpen
	if need(to.BufferSize, open) <= budget {
		return to, nil
	}
	if order.UsesPartitions(to.Order) && need(1, open) > budget {
		open = largest(1, open, func(o int) bool { return need(1, o) <= budget })
	}
	if least := need(1, open); least > budget {
		least1 := "a 1-frame shuffle buffer"
		if order.UsesPartitions(to.Order) {
			least1 += " and one open episode a partition"
		}
		return to, fmt.Errorf("--shuffle-spill-gb %g: one consumer's spill needs at least %s, with %s; raise --shuffle-spill-gb or shuffle without --shuffle-spill (docs/training.md, \"The shuffle spill\")",
			float64(budget)/1e9, gbBytes(least), least1)
	}
	to.PartitionOpen = open
	to.BufferSize = largest(1, to.BufferSize, func(n int) bool { return need(n, open) <= budget })
	return to, nil
}

// logSpillBudget warns when the spill's disk budget lowered the buffer
// or the partitioned orders' open episodes below what the byte budget
// gave (mem), with the spill's worst case for one consumer and the
// budget; like the byte budget's warning, only when the buffer is
// smaller than the selection.
func logSpillBudget(srcs []Mix, ts trainStart, mem TrainOptions) {
	to := ts.to
	if to.BufferSize >= mem.BufferSize && to.PartitionOpen >= mem.PartitionOpen {
		return
	}
	if int64(to.BufferSize) >= selectedFrames(srcs) && to.PartitionOpen >= mem.PartitionOpen {
		return
	}
	log := to.Log
	if log == nil {
		log = slog.Default()
	}
	one := to
	one.Consumer, one.Consumers = 0, 1
	args := []any{"frames", to.BufferSize, "asked_frames", mem.BufferSize, "spill_bytes_per_sample", spilledSample(srcs),
		"spill_bytes", spillBytesAt(srcs, one, ts.sample), "budget_bytes", spillBudget(to)}
	if order.UsesPartitions(to.Order) {
		args = append(args, "open", to.PartitionOpen, "asked_open", mem.PartitionOpen)
	}
	log.Warn("shuffle buffer lowered to its spill's disk budget (--shuffle-spill-gb; the worst case of one consumer, frames at their batch size)", args...)
}

// largest is the largest x in [lo, hi] with ok(x), for ok true up to
// some x and false beyond it (lo when none).
func largest(lo, hi int, ok func(int) bool) int {
	return lo + sort.Search(hi-lo+1, func(i int) bool { return !ok(lo + i) }) - 1
}

// gbBytes formats a byte count as bytes and GB (1e9 bytes).
func gbBytes(n int64) string {
	return fmt.Sprintf("%d bytes (%.2f GB)", n, float64(n)/1e9)
}

// SpillSpace shares the free space of a spill directory between the
// training streams of one process that spill into it (TrainOptions.
// SpillSpace: serve's clients): a stream starts only when its worst case
// (SpillBytes) fits the directory's free space less what the streams
// already spilling there may still write, each its worst case less its
// file's size now (what it wrote is no longer free). The zero value is
// ready to use; without one a stream is checked against the free space
// alone.
type SpillSpace struct {
	mu   sync.Mutex
	uses map[*spillUse]bool
}

// spillUse is one stream's reservation of its spill directory's space:
// its worst case and its file's size now (set by the spill file).
type spillUse struct {
	space *SpillSpace
	dir   string
	need  int64
	size  atomic.Int64
}

// reserve admits a stream whose spill in dir needs up to need bytes, when
// they fit the free space (free: statfs) less what the other streams
// spilling there may still write.
func (s *SpillSpace) reserve(dir string, need int64, free func(string) (int64, error)) (*spillUse, error) {
	u := &spillUse{space: s, dir: dir, need: need}
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	avail, err := free(dir)
	if err != nil {
		return nil, fmt.Errorf("shuffle spill: %w", err)
	}
	pending, others := s.pending(dir)
	if need > avail-pending {
		msg := fmt.Sprintf("shuffle spill directory %s has %s free, but this stream's spill file may grow to %s (its worst case: the frames it may hold at their batch size)",
			dir, gbBytes(avail), gbBytes(need))
		if others > 0 {
			msg += fmt.Sprintf(", and the %d other streams spilling there may still write %s", others, gbBytes(pending))
		}
		return nil, fmt.Errorf("%s: free space there, use another --shuffle-spill directory, or lower --shuffle-spill-gb or --shuffle-buffer (a smaller buffer spills less)", msg)
	}
	if s != nil {
		if s.uses == nil {
			s.uses = map[*spillUse]bool{}
		}
		s.uses[u] = true
	}
	return u, nil
}

// pending is what the streams spilling into dir may still write, and how
// many they are (s.mu held).
func (s *SpillSpace) pending(dir string) (bytes int64, streams int) {
	if s == nil {
		return 0, 0
	}
	for u := range s.uses {
		if u.dir == dir {
			bytes += max(u.need-u.size.Load(), 0)
			streams++
		}
	}
	return bytes, streams
}

// release gives u's reservation back.
func (u *spillUse) release() {
	if u == nil || u.space == nil {
		return
	}
	u.space.mu.Lock()
	delete(u.space.uses, u)
	u.space.mu.Unlock()
}

// startSpill opens the spill file of a training stream of srcs with ts's
// options once its worst case fits the directory's free space
// (reserveSpill), so that a full disk fails the stream at its start
// rather than mid-run: nil when it spills nothing. release gives the
// reservation back (closing the file is the holder's).
func startSpill(srcs []Mix, ts trainStart) (sp *spillFile, release func(), err error) {
	u, err := reserveSpill(srcs, ts, ts.to.SpillSpace)
	if u == nil || err != nil {
		return nil, func() {}, err
	}
	if sp, err = openSpill(ts.to.Spill); err != nil {
		u.release()
		return nil, func() {}, err
	}
	sp.use = u
	if ts.to.spillOpened != nil {
		ts.to.spillOpened(sp)
	}
	return sp, u.release, nil
}

// checkSpillSpace refuses a stream whose spill's worst case does not fit
// its directory's free space (what startSpill refuses), reserving
// nothing.
func checkSpillSpace(srcs []Mix, ts trainStart) error {
	u, err := reserveSpill(srcs, ts, nil)
	u.release()
	return err
}

// reserveSpill reserves in space (nil: checks only) the worst case of a
// stream of srcs with ts's options in its spill directory (SpillBytes);
// nil when it has no spill directory or spills nothing.
func reserveSpill(srcs []Mix, ts trainStart, space *SpillSpace) (*spillUse, error) {
	to := ts.to
	if to.Spill == "" {
		return nil, nil
	}
	need := spillBytesAt(srcs, to, ts.sample)
	if need == 0 {
		return nil, nil
	}
	free := to.freeSpace
	if free == nil {
		free = freeBytes
	}
	return space.reserve(to.Spill, need, free)
}
