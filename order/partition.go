package order

import (
	"fmt"
	"slices"
)

// DefaultPartitions is the default number of canonical partitions of the
// partitioned order: 120 is divided by 1, 2, 3, 4, 5, 6, 8, 10, 12, 15,
// 20, 24, 30, 40, 60 and 120 consumers.
const DefaultPartitions = 120

// DefaultPartitionOpen is the default Options.PartitionOpen: each
// partition reads 4 of its episodes at a time (docs/training.md, "Which
// order, and shuffle quality").
const DefaultPartitionOpen = 4

// Segment is the frames [From, To) of an episode (offsets within the
// episode, from the episodes index) that a partition holds.
type Segment struct {
	Episode, From, To int64
}

// Part is one canonical partition of an epoch: its segments in streaming
// order and the global batches it holds (it serves global batches p,
// p+P, p+2P, … of the epoch; see Partitions).
type Part struct {
	Segments []Segment
	Batches  int64
}

// Frames is the number of frames of the partition's segments.
func (pt Part) Frames() int64 {
	var n int64
	for _, s := range pt.Segments {
		n += s.To - s.From
	}
	return n
}

// Episodes lists the episodes the partition holds frames of, in
// streaming order.
func (pt Part) Episodes() []int64 {
	out := make([]int64, 0, len(pt.Segments))
	for _, s := range pt.Segments {
		out = append(out, s.Episode)
	}
	return out
}

// Partitions permutes the selected episodes of src for epoch and cuts the
// concatenation of their frames, in permuted order, into P partitions
// holding whole global batches of B frames: the epoch has floor(T / B)
// global batches (T the selection's frames, from the episodes index:
// nothing is read), dealt round-robin (global batch g is batch g / P of
// partition g mod P), and partition p holds the next Batches × B frames
// of the concatenation. An episode crossing a cut is split between two
// partitions (Segment); the last T mod B frames (fewer than one batch)
// are in none. It returns the partitions in partition order.
func Partitions(src Source, seed uint64, epoch int64, P int, B int64) []Part {
	eps := src.Episodes
	perm := make([]int, len(eps))
	for i := range perm {
		perm[i] = i
	}
	shuffle(newRNG("partition", seed, epoch, src.Revision, src.Selection), perm)
	var total int64
	for _, e := range eps {
		total += e.Length
	}
	B = max(B, 1)
	nb := total / B
	parts := make([]Part, P)
	k, off := 0, int64(0) // the next frame: offset off of episode perm[k]
	for p := range parts {
		pt := &parts[p]
		pt.Batches = nb / int64(P)
		if int64(p) < nb%int64(P) {
			pt.Batches++
		}
		for need := pt.Batches * B; need > 0; {
			e := eps[perm[k]]
			take := min(need, e.Length-off)
			if take > 0 {
				pt.Segments = append(pt.Segments, Segment{Episode: e.Index, From: off, To: off + take})
			}
			need -= take
			if off += take; off == e.Length {
				k, off = k+1, 0
			}
		}
	}
	return parts
}

// partitionOrder is partition p's epoch order: its episodes (runs, in
// partition order) are permuted and their kept frames enter its share of
// the shuffle buffer, ceil(BufferSize/P) frames (the P partitions advance
// together in the round-robin, so the shares add up to one buffer), from
// o.PartitionOpen episodes at a time (streamOrder). It depends on the
// partition, never on the consumer reading it.
func partitionOrder(runs []Run, keep []bool, o Options, p int, epoch int64, revision, sel string) []int32 {
	P := max(o.Partitions, 1)
	buf := max(1, (o.BufferSize+P-1)/P)
	return streamOrder(runs, keep, o.Shuffle, buf, o.PartitionOpen,
		newRNG(fmt.Sprintf("partition-%d", p), o.Seed, epoch, revision, sel))
}

// Slot returns a consumer's place in the round-robin of the partitioned
// order: worker-major, slot = worker*worldSize + rank, so that global
// batch g is step g/worldSize of rank g%worldSize whatever num_workers is.
func Slot(o Options) (int, error) {
	R := max(o.WorldSize, 1)
	C := o.Consumers
	if C%R != 0 {
		return 0, fmt.Errorf("%d consumers is not a multiple of world size %d", C, R)
	}
	W := C / R
	rank, worker := o.Consumer/W, o.Consumer%W
	return worker*R + rank, nil
}

// partitioned is the partitioned order (one source).
//
// Per epoch the selected episodes are permuted and their frames cut into
// P partitions of whole global batches (Partitions): the epoch's
// floor(T/B) global batches are dealt round-robin, global batch g being
// batch g/P of partition g%P. Partition p streams its segments through
// its own shuffle buffer of ceil(BufferSize/P) frames (partitionOrder) or
// spreads them evenly (stratifiedOrder). Consumer slot s of C (see Slot;
// C must divide P) serves partitions s, s+C, ..., so its own batch j is
// global batch j*C+s; every consumer serves floor(nb/C) batches, so the
// last nb mod C global batches and the last T mod B frames are not
// served: fewer than C × B frames an epoch. A resume token holds the
// number of global batches consumed, which resumes exactly on any shape
// whose C divides P.
type partitioned struct {
	s    *Stream
	slot int
	// posW is the workers per rank of a Position (0 without one).
	posW int64
}

// newPartitioned checks a position against the shape and places the
// consumer. A hello position (epoch, next): the stream serves
// rank-sequence indices next, next+W, ... of one epoch. Index m is own
// batch m/W of the rank's worker m%W (slot (m%W)*R + rank), so they are
// all own batches of one slot, from next/W on: the stream serves that
// slot's partitions (whichever worker asks; the workers of a rank asking
// next+w for w = 0..W-1 get distinct slots).
func newPartitioned(s *Stream) (*partitioned, error) {
	o := s.o
	sl, err := Slot(o)
	if err != nil {
		return nil, err
	}
	pt := &partitioned{s: s, slot: sl}
	if pos := o.Position; pos != nil {
		R := max(o.WorldSize, 1)
		pt.posW = int64(max(o.Workers, 1))
		var shape error
		if int64(o.Consumers) != int64(R)*pt.posW {
			shape = fmt.Errorf("%d consumers is not world size %d × %d workers", o.Consumers, R, pt.posW)
		}
		if err := checkPosition(o, shape, "shuffle, seed, order, partitions or batch options"); err != nil {
			return nil, err
		}
		rank := int64(o.Consumer) / pt.posW
		pt.slot = int(pos.Next%pt.posW)*R + int(rank)
	}
	return pt, nil
}

func (pt *partitioned) epoch(e int64) (*Epoch, bool, error) {
	o := pt.s.o
	P, C, B := o.Partitions, int64(o.Consumers), o.BatchSize
	src := pt.s.srcs[0]
	parts := Partitions(src, o.Seed, e, P, B)
	var total int64
	for _, ep := range src.Episodes {
		total += ep.Length
	}
	nb := total / B
	perCons := nb / C // own batches per epoch
	if perCons == 0 {
		return nil, false, fmt.Errorf("--order %s: an epoch has %d frames in %d episodes: %d batches of %d cannot give each of %d consumers a batch (use a smaller --batch-size or fewer consumers)", o.Order, total, len(src.Episodes), nb, B, C)
	}
	if pos := o.Position; pos != nil && e > pos.Epoch {
		return nil, false, nil
	}
	pe := &partEpoch{e: e, parts: parts, nb: nb, perCons: perCons, total: total}
	ep := &Epoch{Epoch: e, Batches: nb}
	ep.plan = func(ix *Index) (*Plan, error) { return pt.plan(pe, ix) }
	start := pt.s.start
	if e == start.Epoch && start.Batch > 0 {
		// The first own batch j with j*C+slot >= start.Batch.
		pe.first = max(0, (start.Batch-int64(pt.slot)+C-1)/C)
	}
	if o.Position != nil {
		pe.first = o.Position.Next / pt.posW
	}
	if pe.first >= pe.perCons {
		ep.Skip = true
		return ep, true, nil
	}
	// Read only this consumer's partitions' episodes (each once: an
	// episode split between two of them is indexed whole).
	ep.Episodes = []int64{}
	seen := map[int64]bool{}
	for p := pt.slot; p < P; p += int(C) {
		for _, x := range parts[p].Episodes() {
			if !seen[x] {
				seen[x] = true
				ep.Episodes = append(ep.Episodes, x)
			}
		}
	}
	return ep, true, nil
}

// partEpoch is an epoch of the partitioned order: its partitions, its
// global batches (nb), the selection's frames, the consumer's own batches
// (perCons) and the first of them it serves.
type partEpoch struct {
	e              int64
	parts          []Part
	nb, total      int64
	perCons, first int64
}

// plan is the consumer's batches of ep, over the keep index of exactly
// the epoch's Episodes: own batch j is global batch g = j*C+slot, batch
// g/P of partition g%P. Each partition's order is copied in as soon as it
// is computed, so one partition's order is held besides this consumer's.
func (pt *partitioned) plan(ep *partEpoch, ix *Index) (*Plan, error) {
	o := pt.s.o
	P, C, B := int64(o.Partitions), int64(o.Consumers), o.BatchSize
	src := pt.s.srcs[0]
	runOf := map[int64][]Run{}
	for _, r := range ix.Runs[0] {
		runOf[r.Episode] = append(runOf[r.Episode], r)
	}
	served := ep.perCons * C // global batches served this epoch
	order := make([]int32, ep.perCons*B)
	var own []Run
	sl := int64(pt.slot)
	for p := sl; p < P; p += C {
		runs, err := segmentRuns(runOf, ep.parts[p].Segments, ep.e, p)
		if err != nil {
			return nil, err
		}
		own = append(own, runs...)
		var po []int32
		if o.Order == Stratified {
			po = stratifiedOrder(runs, ix.Keep, o, int(p), ep.e, src.Revision, src.Selection)
		} else {
			po = partitionOrder(runs, ix.Keep, o, int(p), ep.e, src.Revision, src.Selection)
		}
		nbp := ep.parts[p].Batches
		if int64(len(po)) < nbp {
			return nil, fmt.Errorf("--order %s: epoch %d partition %d keeps %d of its %d frames, fewer than its %d batches (frames dropped by rendering; use --mode fallback or fewer partitions)", o.Order, ep.e, p, len(po), ep.parts[p].Frames(), nbp)
		}
		for r := int64(0); r < nbp; r++ {
			g := r*P + p
			if g >= served {
				break
			}
			// Batch r: the partition's kept frames cut into nbp batches
			// as evenly as possible (B each when every frame is kept;
			// with dropped frames the rest of the batch is a hole, -1).
			lo, hi := r*int64(len(po))/nbp, (r+1)*int64(len(po))/nbp
			j := (g - sl) / C
			n := copy(order[j*B:(j+1)*B], po[lo:hi])
			for i := j*B + int64(n); i < (j+1)*B; i++ {
				order[i] = -1
			}
		}
	}
	pl := &Plan{Epoch: ep.e, Batches: ep.nb, Order: order, B: B, Unkept: UnkeptRuns, Owned: own,
		Unserved: ep.total - served*B, EpochFrames: ep.perCons * B}
	for j := ep.first; j < ep.perCons; j++ {
		pl.Mine = append(pl.Mine, j)
	}
	pl.Frames = int64(len(pl.Mine)) * B
	// Every epoch serves the consumer perCons full batches when every
	// frame is kept (no holes).
	pl.Uniform = !slices.Contains(ix.Keep, false)
	e, perCons := ep.e, ep.perCons
	R := int64(max(o.WorldSize, 1))
	pl.after = func(j int64) State {
		if next := j*C + sl + 1; next < served {
			return State{Epoch: e, Batch: next}
		}
		return State{Epoch: e + 1}
	}
	pl.seq = func(j int64) int64 {
		if o.Position != nil {
			// The batch's index in the rank's sequence of the epoch.
			return j*pt.posW + sl/R
		}
		return e*perCons + j
	}
	return pl, nil
}

// segmentRuns returns the runs of positions of partition p's segments, in
// order: segment [From, To) of an episode is its frames From..To-1 in the
// episode's runs (which hold every frame of it, kept or not).
func segmentRuns(runOf map[int64][]Run, segs []Segment, epoch, p int64) ([]Run, error) {
	var out []Run
	for _, sg := range segs {
		off := int64(0) // the episode's frame at the start of run
		for _, r := range runOf[sg.Episode] {
			lo, hi := max(sg.From, off), min(sg.To, off+r.Len)
			if lo < hi {
				out = append(out, Run{Episode: r.Episode, Start: r.Start + lo - off, Len: hi - lo})
			}
			off += r.Len
		}
		if off < sg.To {
			return nil, fmt.Errorf("epoch %d partition %d: episode %d has %d frames in the data, the episodes index says at least %d", epoch, p, sg.Episode, off, sg.To)
		}
	}
	return out, nil
}
