package order

import (
	"fmt"
	"math"
)

// MaxPositions is the largest number of selected frames a training order
// handles: orders hold positions as int32 (4 bytes a frame instead of 8,
// 40 MB for 10M frames).
const MaxPositions = math.MaxInt32

// ErrTooManyPositions is the error of a selection beyond MaxPositions.
var ErrTooManyPositions = fmt.Errorf("more than %d selected frames: a training order handles at most that many (select fewer episodes)", MaxPositions)

// Run is a run of consecutive positions belonging to one episode.
type Run struct {
	Episode    int64
	Start, Len int64
}

// Index is what an order needs of a keep index: per source, the runs of
// its positions (in plan order), and which positions are kept. Positions
// number the indexed frames of every source, source after source.
type Index struct {
	Runs [][]Run
	Keep []bool
}

// epochOrder returns the positions (see MaxPositions) of the kept frames
// of runs in the order an epoch serves them. Without shuffling it is
// position order. With shuffling the episodes are permuted and their kept
// frames pass, in that order, through a shuffle buffer of bufSize frames:
// once the buffer is full each incoming frame takes the place of a
// uniformly drawn one, which is served; at the end the buffer drains in
// random order. Neighbouring frames of an episode thus end up far apart,
// while only about bufSize frames' worth of episodes need to be decoded
// at a time.
func epochOrder(runs []Run, keep []bool, shuffle bool, bufSize int, r *rng) []int32 {
	return streamOrder(runs, keep, shuffle, bufSize, 1, r)
}

// keptCount is the number of kept positions of runs.
func keptCount(runs []Run, keep []bool) int {
	n := 0
	for _, run := range runs {
		for p := run.Start; p < run.Start+run.Len; p++ {
			if keep[p] {
				n++
			}
		}
	}
	return n
}

// streamOrder is epochOrder with the permuted episodes entering the buffer
// open at a time: each incoming frame comes from one of open runs drawn
// uniformly (an exhausted run is replaced by the next of the permutation),
// so the buffer mixes about open episodes even when it is shorter than an
// episode. open = 1 is epochOrder (no draw is made to pick the run).
func streamOrder(runs []Run, keep []bool, shuffled bool, bufSize, open int, r *rng) []int32 {
	out := make([]int32, 0, keptCount(runs, keep))
	if !shuffled {
		for _, run := range runs {
			for p := run.Start; p < run.Start+run.Len; p++ {
				if keep[p] {
					out = append(out, int32(p))
				}
			}
		}
		return out
	}
	perm := make([]int, len(runs))
	for i := range perm {
		perm[i] = i
	}
	shuffle(r, perm)
	buf := &reservoir{size: max(bufSize, 1), out: out}
	buf.buf = make([]int32, 0, buf.size)
	open = max(open, 1)
	type cursor struct{ p, end int64 }
	cur := make([]cursor, 0, open)
	next := 0 // the next run of perm to open
	for len(cur) < open && next < len(perm) {
		run := runs[perm[next]]
		cur = append(cur, cursor{run.Start, run.Start + run.Len})
		next++
	}
	for len(cur) > 0 {
		j := 0
		if len(cur) > 1 {
			j = r.intn(len(cur))
		}
		c := &cur[j]
		p := c.p
		if c.p++; c.p == c.end {
			if next < len(perm) {
				run := runs[perm[next]]
				*c = cursor{run.Start, run.Start + run.Len}
				next++
			} else {
				cur = append(cur[:j], cur[j+1:]...)
			}
		}
		if keep[p] {
			buf.add(int32(p), r)
		}
	}
	return buf.drain(r)
}

// reservoir is a shuffle buffer: once it holds size positions, each
// incoming one takes the place of a uniformly drawn one, which is served
// (appended to out).
type reservoir struct {
	size int
	buf  []int32
	out  []int32
}

func (b *reservoir) add(p int32, r *rng) {
	if len(b.buf) < b.size {
		b.buf = append(b.buf, p)
		return
	}
	k := r.intn(b.size)
	b.out = append(b.out, b.buf[k])
	b.buf[k] = p
}

// drain serves what the buffer still holds, in random order, and returns
// everything served.
func (b *reservoir) drain(r *rng) []int32 {
	shuffle(r, b.buf)
	return append(b.out, b.buf...)
}

// interleave merges the per-source orders by weight until the first source
// is exhausted (the "first_exhausted" strategy of HF datasets'
// interleave_datasets). Without shuffling the choice is smooth weighted
// round-robin, which keeps every prefix as close to the weights as
// possible; with shuffling each slot is drawn at random by weight.
func interleave(orders [][]int32, weights []float64, shuffled bool, r *rng) []int32 {
	if len(orders) == 1 {
		return orders[0]
	}
	var total float64
	for _, w := range weights {
		total += w
	}
	next := make([]int, len(orders))
	current := make([]float64, len(orders))
	var out []int32
	for {
		pick := 0
		if shuffled {
			u := r.float() * total
			for pick = 0; pick < len(weights)-1 && u >= weights[pick]; pick++ {
				u -= weights[pick]
			}
		} else {
			for i, w := range weights {
				current[i] += w
				if current[i] > current[pick] {
					pick = i
				}
			}
			current[pick] -= total
		}
		if next[pick] >= len(orders[pick]) {
			return out
		}
		out = append(out, orders[pick][next[pick]])
		next[pick]++
	}
}
