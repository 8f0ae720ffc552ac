package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
)

// orderRNG is the deterministic random source of the global sample order.
// It uses the PCG-DXSM generator of math/rand/v2, whose output stream is
// fixed by its specification, and draws bounded integers with its own
// (Lemire) method, so orders never change with the Go version.
type orderRNG struct{ pcg *rand.PCG }

// newOrderRNG seeds a generator from the parts that define an order:
// a purpose label, the user's seed, the epoch, the dataset revision and
// the episode selection.
func newOrderRNG(purpose string, seed uint64, epoch int64, revision, selection string) *orderRNG {
	h := sha256.New()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(epoch))
	h.Write([]byte("lrstream-order/1\x00" + purpose + "\x00"))
	h.Write(b[:])
	h.Write([]byte(revision + "\x00" + selection))
	sum := h.Sum(nil)
	return &orderRNG{rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16]))}
}

// intn returns a uniform integer in [0, n), n > 0.
func (r *orderRNG) intn(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), bound)
		}
	}
	return int(hi)
}

// shuffle permutes s in place (Fisher-Yates).
func shuffleInts[T any](r *orderRNG, s []T) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}

// maxPositions is the largest number of selected frames a training order
// handles: orders hold positions as int32 (4 bytes a frame instead of 8,
// 40 MB for 10M frames).
const maxPositions = math.MaxInt32

// errTooManyPositions is the error of a selection beyond maxPositions.
var errTooManyPositions = fmt.Errorf("more than %d selected frames: a training order handles at most that many (select fewer episodes)", maxPositions)

// episodeRun is a run of consecutive positions belonging to one episode.
type episodeRun struct {
	episode    int64
	start, len int64
}

// epochOrder returns the positions (see maxPositions) of the kept frames
// of runs in the order an epoch serves them. Without shuffling it is
// position order. With shuffling the episodes are permuted and their kept
// frames pass, in that order, through a shuffle buffer of bufSize frames:
// once the buffer is full each incoming frame takes the place of a
// uniformly drawn one, which is served; at the end the buffer drains in
// random order. Neighbouring frames of an episode thus end up far apart,
// while only about bufSize frames' worth of episodes need to be decoded
// at a time.
func epochOrder(runs []episodeRun, keep []bool, shuffle bool, bufSize int, r *orderRNG) []int32 {
	return streamOrder(runs, keep, shuffle, bufSize, 1, r)
}

// streamOrder is epochOrder with the permuted episodes entering the buffer
// open at a time: each incoming frame comes from one of open runs drawn
// uniformly (an exhausted run is replaced by the next of the permutation),
// so the buffer mixes about open episodes even when it is shorter than an
// episode. open = 1 is epochOrder (no draw is made to pick the run).
func streamOrder(runs []episodeRun, keep []bool, shuffle bool, bufSize, open int, r *orderRNG) []int32 {
	n := 0
	for _, run := range runs {
		for p := run.start; p < run.start+run.len; p++ {
			if keep[p] {
				n++
			}
		}
	}
	out := make([]int32, 0, n)
	if !shuffle {
		for _, run := range runs {
			for p := run.start; p < run.start+run.len; p++ {
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
	shuffleInts(r, perm)
	bufSize = max(bufSize, 1)
	open = max(open, 1)
	buf := make([]int32, 0, bufSize)
	type cursor struct{ p, end int64 }
	cur := make([]cursor, 0, open)
	next := 0 // the next run of perm to open
	for len(cur) < open && next < len(perm) {
		run := runs[perm[next]]
		cur = append(cur, cursor{run.start, run.start + run.len})
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
				*c = cursor{run.start, run.start + run.len}
				next++
			} else {
				cur = append(cur[:j], cur[j+1:]...)
			}
		}
		if !keep[p] {
			continue
		}
		if len(buf) < bufSize {
			buf = append(buf, int32(p))
			continue
		}
		k := r.intn(bufSize)
		out = append(out, buf[k])
		buf[k] = int32(p)
	}
	shuffleInts(r, buf)
	return append(out, buf...)
}

// interleave merges the per-source orders by weight until the first source
// is exhausted (the "first_exhausted" strategy of HF datasets'
// interleave_datasets). Without shuffling the choice is smooth weighted
// round-robin, which keeps every prefix as close to the weights as
// possible; with shuffling each slot is drawn at random by weight.
func interleave(orders [][]int32, weights []float64, shuffle bool, r *orderRNG) []int32 {
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
		if shuffle {
			u := float64(r.pcg.Uint64()>>11) / (1 << 53) * total
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
