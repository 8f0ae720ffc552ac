package order

import "fmt"

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
	var wave waveHeap
	for w := 0; w < waves; w++ {
		wave.items = wave.items[:0]
		lo, hi := w*len(eps)/waves, (w+1)*len(eps)/waves
		for i := lo; i < hi; i++ {
			u := r.float()
			it := waveItem{ep: int32(i), u: u, start: -1}
			if len(eps[i]) == 1 && keptCount(eps[i], keep) == int(eps[i][0].Len) {
				// One run, every frame kept: positions start, start+1, ….
				it.start, it.m = int32(eps[i][0].Start), int32(eps[i][0].Len)
			} else {
				for _, run := range eps[i] {
					for q := run.Start; q < run.Start+run.Len; q++ {
						if keep[q] {
							it.kept = append(it.kept, int32(q))
						}
					}
				}
				it.m = int32(len(it.kept))
			}
			if it.m > 0 {
				wave.items = append(wave.items, it)
			}
		}
		out = wave.merge(out)
	}
	return out
}

// waveItem is an episode of a wave: its m kept positions (start,
// start+1, … when start ≥ 0, else kept) and its offset u.
type waveItem struct {
	u     float64
	ep, m int32
	start int32
	kept  []int32
}

// waveHeap merges a wave's episodes by key (ties by episode); its
// buffers are reused from wave to wave.
type waveHeap struct {
	items []waveItem
	count []int32
	slot  []waveFrame
}

// merge appends the wave's frames to out in key order (ties by episode).
// The keys lie in [0, 1): frames are placed in n buckets by key (n the
// wave's frames, so about one a bucket), each bucket sorted — the order
// of a sort by (key, episode), in linear time.
func (h *waveHeap) merge(out []int32) []int32 {
	n := 0
	for i := range h.items {
		n += int(h.items[i].m)
	}
	if cap(h.count) < n+1 {
		h.count = make([]int32, n+1)
		h.slot = make([]waveFrame, n)
	}
	count, slot := h.count[:n+1], h.slot[:n]
	clear(count)
	bucket := func(key float64) int { return min(int(key*float64(n)), n-1) }
	for i := range h.items {
		it := &h.items[i]
		for j := int32(0); j < it.m; j++ {
			count[bucket((float64(j)+it.u)/float64(it.m))+1]++
		}
	}
	for b := 1; b <= n; b++ {
		count[b] += count[b-1]
	}
	for i := range h.items {
		it := &h.items[i]
		for j := int32(0); j < it.m; j++ {
			key := (float64(j) + it.u) / float64(it.m)
			b := bucket(key)
			p := it.start + j
			if it.start < 0 {
				p = it.kept[j]
			}
			slot[count[b]] = waveFrame{key: key, ep: it.ep, p: p}
			count[b]++
		}
	}
	// count[b] is now the end of bucket b (and the start of b+1).
	lo := int32(0)
	for b := 0; b < n; b++ {
		hi := count[b]
		for k := lo + 1; k < hi; k++ { // insertion sort: buckets are tiny
			for q := k; q > lo && slot[q].before(&slot[q-1]); q-- {
				slot[q], slot[q-1] = slot[q-1], slot[q]
			}
		}
		for k := lo; k < hi; k++ {
			out = append(out, slot[k].p)
		}
		lo = hi
	}
	return out
}

// waveFrame is a frame of a wave being merged.
type waveFrame struct {
	key   float64
	ep, p int32
}

func (a *waveFrame) before(b *waveFrame) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.ep < b.ep
}
