package order

import (
	"cmp"
	"fmt"
	"slices"
)

// DefaultStratifiedOpen is the fewest episodes a partition of the
// stratified order interleaves at a time when it has that many
// (Options.PartitionOpen when 0; it interleaves fewer than twice as
// many): a batch of 32 then holds at least 24 episodes of a partition of
// 24 or more alike in length, and all of a smaller one's.
const DefaultStratifiedOpen = 24

// UsesPartitions reports whether the order named name cuts each epoch
// into canonical partitions (the partitioned and stratified orders):
// Partitions, PartitionOpen and the consumer slots apply to it.
func UsesPartitions(name string) bool {
	return name == Partitioned || name == Stratified
}

// stratifiedOrder is partition p's epoch order in the stratified order.
// Its n episodes (runs, in partition order) are permuted and cut into
// max(1, floor(n/open)) waves of nearly equal counts, open =
// o.PartitionOpen: a wave has at least open episodes (all n when n is
// fewer) and fewer than 2 × open. Within a wave every episode's kept frames are spread evenly
// over the wave: the j-th of episode e's m kept frames gets the key
// (j + u_e) / m, u_e uniform in [0, 1), and the wave serves its frames by
// key. So every stretch of the wave holds each of its episodes in
// proportion to its length — a batch of B holds min(B, n) episodes when
// they are about as long — the episodes of a wave end together, and two
// frames of one episode follow each other only when it is longer than all
// the others of its wave together. An episode's frames keep their order,
// so it is read piece by piece: a partition holds the pieces being read
// of its open episodes, never a buffer of whole ones. Without shuffling it
// is position order, as the partitioned order's.
func stratifiedOrder(runs []Run, keep []bool, o Options, p int, epoch int64, revision, sel string) []int32 {
	if !o.Shuffle {
		return streamOrder(runs, keep, false, 0, 0, nil)
	}
	r := newRNG(fmt.Sprintf("stratified-%d", p), o.Seed, epoch, revision, sel)
	// The partition's episodes: its runs grouped by episode, in order.
	var eps [][]Run
	for i, run := range runs {
		if i > 0 && runs[i-1].Episode == run.Episode {
			eps[len(eps)-1] = append(eps[len(eps)-1], run)
			continue
		}
		eps = append(eps, []Run{run})
	}
	shuffle(r, eps)
	open := max(o.PartitionOpen, 1)
	waves := max(1, len(eps)/open)
	out := make([]int32, 0, keptCount(runs, keep))
	type frame struct {
		key float64
		ep  int
		p   int32
	}
	var wave []frame
	for w := 0; w < waves; w++ {
		wave = wave[:0]
		lo, hi := w*len(eps)/waves, (w+1)*len(eps)/waves
		for i := lo; i < hi; i++ {
			u := r.float()
			m := keptCount(eps[i], keep)
			j := 0
			for _, run := range eps[i] {
				for q := run.Start; q < run.Start+run.Len; q++ {
					if keep[q] {
						wave = append(wave, frame{key: (float64(j) + u) / float64(m), ep: i, p: int32(q)})
						j++
					}
				}
			}
		}
		slices.SortFunc(wave, func(a, b frame) int {
			if c := cmp.Compare(a.key, b.key); c != 0 {
				return c
			}
			return cmp.Compare(a.ep, b.ep)
		})
		for _, f := range wave {
			out = append(out, f.p)
		}
	}
	return out
}
