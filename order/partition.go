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

// Partitions permutes the selected episodes of src for epoch and cuts
// them, in permuted order, into P partitions of about equal frame counts
// (from the episodes index: nothing is read). It returns each partition's
// episodes in streaming order and its frame count.
func Partitions(src Source, seed uint64, epoch int64, P int) ([][]int64, []int64) {
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
	parts := make([][]int64, P)
	frames := make([]int64, P)
	var acc int64
	for k, i := range perm {
		// An episode goes to the partition its midpoint falls in, so
		// partitions split at episode boundaries near total*p/P.
		mid := acc + eps[i].Length/2
		p := int64(0)
		if total > 0 {
			p = mid * int64(P) / total
		} else {
			p = int64(k) * int64(P) / int64(len(perm))
		}
		p = min(p, int64(P-1))
		parts[p] = append(parts[p], eps[i].Index)
		frames[p] += eps[i].Length
		acc += eps[i].Length
	}
	return parts, frames
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
// Per epoch the selected episodes are permuted and cut into P partitions
// balanced by frames (Partitions). Partition p streams its episodes, in
// that order, through its own shuffle buffer of ceil(BufferSize/P) frames
// (partitionOrder), and serves exactly nbp = floor(min over partitions of
// metadata frames / batch size) full batches; the frames of a partition
// beyond nbp batches are not served that epoch. The global batch sequence
// is round-robin over partitions: global batch g is batch g/P of
// partition g%P. Consumer slot s of C (see Slot; C must divide P) serves
// partitions s, s+C, ..., in round-robin, so its own batch j is global
// batch j*C+s. A resume token holds the number of global batches
// consumed, which resumes exactly on any shape whose C divides P.
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
	parts, frames := Partitions(pt.s.srcs[0], o.Seed, e, P)
	nbp := slices.Min(frames) / B
	if nbp == 0 {
		neps := 0
		for _, p := range parts {
			neps += len(p)
		}
		return nil, false, fmt.Errorf("--order %s: the smallest of %d partitions has %d frames, less than one batch of %d (partitions hold whole episodes, and the selection has %d episodes of %d frames: use fewer --partitions or a smaller --batch-size)", o.Order, P, slices.Min(frames), B, neps, sum64(frames))
	}
	if pos := o.Position; pos != nil && e > pos.Epoch {
		return nil, false, nil
	}
	pe := &partEpoch{e: e, parts: parts, nbp: nbp, perCons: nbp * int64(P) / C} // own batches per epoch
	ep := &Epoch{Epoch: e, Batches: nbp * int64(P)}
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
	// Read only this consumer's partitions' episodes.
	ep.Episodes = []int64{}
	for p := pt.slot; p < P; p += int(C) {
		ep.Episodes = append(ep.Episodes, parts[p]...)
	}
	return ep, true, nil
}

// partEpoch is an epoch of the partitioned order: its partitions, the
// batches each serves (nbp), the consumer's own batches (perCons) and the
// first of them it serves.
type partEpoch struct {
	e                   int64
	parts               [][]int64
	nbp, perCons, first int64
}

// plan is the consumer's batches of ep, over the keep index of exactly
// the epoch's Episodes: own batch j comes from its partition j%(P/C),
// batch j/(P/C) of that partition. Each partition's order is copied in as
// soon as it is computed, so one partition's order is held besides this
// consumer's.
func (pt *partitioned) plan(ep *partEpoch, ix *Index) (*Plan, error) {
	o := pt.s.o
	P, C, B := o.Partitions, o.Consumers, o.BatchSize
	src := pt.s.srcs[0]
	runOf := map[int64][]Run{}
	for _, r := range ix.Runs[0] {
		runOf[r.Episode] = append(runOf[r.Episode], r)
	}
	per := int64(P / C)
	order := make([]int32, ep.perCons*B)
	for q, p := int64(0), pt.slot; p < P; q, p = q+1, p+C {
		var runs []Run
		for _, e := range ep.parts[p] {
			runs = append(runs, runOf[e]...)
		}
		var po []int32
		if o.Order == Stratified {
			po = stratifiedOrder(runs, ix.Keep, o, p, ep.e, src.Revision, src.Selection)
		} else {
			po = partitionOrder(runs, ix.Keep, o, p, ep.e, src.Revision, src.Selection)
		}
		if int64(len(po)) < ep.nbp*B {
			return nil, fmt.Errorf("--order %s: epoch %d partition %d keeps %d frames, fewer than the %d batches of %d every partition serves (frames dropped by rendering; use --mode fallback or fewer partitions)", o.Order, ep.e, p, len(po), ep.nbp, B)
		}
		for r := int64(0); r < ep.nbp; r++ {
			j := r*per + q
			copy(order[j*B:(j+1)*B], po[r*B:(r+1)*B])
		}
	}
	epochBatches := ep.nbp * int64(P)
	pl := &Plan{Epoch: ep.e, Batches: epochBatches, Order: order, B: B, Unkept: UnkeptIndex}
	for j := ep.first; j < ep.perCons; j++ {
		pl.Mine = append(pl.Mine, j)
	}
	sl, e, perCons := int64(pt.slot), ep.e, ep.perCons
	R := int64(max(o.WorldSize, 1))
	pl.after = func(j int64) State {
		if next := j*int64(C) + sl + 1; next < epochBatches {
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

// sum64 returns the sum of xs.
func sum64(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
