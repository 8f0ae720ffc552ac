package order

import (
	"fmt"
	"slices"
	"testing"
)

// shuffleQuality measures an epoch's global sample sequence: the share of
// consecutive samples from the same episode, and the mean number of
// distinct episodes per batch.
func shuffleQuality(seq []int32, episodeOf func(int32) int64, B int) (same float64, distinct float64) {
	n := 0
	for i := 1; i < len(seq); i++ {
		if episodeOf(seq[i]) == episodeOf(seq[i-1]) {
			n++
		}
	}
	var d, batches int
	eps := make([]int64, 0, B)
	for lo := 0; lo+B <= len(seq); lo += B {
		eps = eps[:0]
		for _, p := range seq[lo : lo+B] {
			if e := episodeOf(p); !slices.Contains(eps, e) {
				eps = append(eps, e)
			}
		}
		d += len(eps)
		batches++
	}
	return float64(n) / float64(len(seq)-1), float64(d) / float64(batches)
}

// qualityDataset is E episodes of L frames, positions in episode order.
func qualityDataset(E, L int) (Source, []Run, []bool) {
	var src Source
	var runs []Run
	for e := 0; e < E; e++ {
		src.Episodes = append(src.Episodes, Episode{Index: int64(e), Length: int64(L)})
		runs = append(runs, Run{Episode: int64(e), Start: int64(e * L), Len: int64(L)})
	}
	keep := make([]bool, E*L)
	for i := range keep {
		keep[i] = true
	}
	return src, runs, keep
}

// partitionedSequence is the partitioned order's global sequence of an
// epoch, composed from the partitions as trainPartitioned serves it
// (global batch g is batch g/P of partition g%P).
func partitionedSequence(src Source, runs []Run, keep []bool, to Options, B int) []int32 {
	P := to.Partitions
	parts, frames := Partitions(src, to.Seed, 0, P)
	nbp := frames[0] / int64(B)
	for _, f := range frames {
		nbp = min(nbp, f/int64(B))
	}
	orders := make([][]int32, P)
	for p := range parts {
		var rs []Run
		for _, e := range parts[p] {
			rs = append(rs, runs[e])
		}
		orders[p] = partitionOrder(rs, keep, to, p, 0, "", "")
	}
	var seq []int32
	for g := int64(0); g < nbp*int64(P); g++ {
		o, r := orders[g%int64(P)], g/int64(P)
		seq = append(seq, o[r*int64(B):(r+1)*int64(B)]...)
	}
	return seq
}

// TestShuffleQuality measures both orders' mixing, batch 32, 120
// partitions, on 500 episodes of 600 frames (about 4 episodes a
// partition) and 2,400 of 250 (20 a partition), and checks the figures
// docs/training.md relies on (go test -run TestShuffleQuality -v prints
// its table).
func TestShuffleQuality(t *testing.T) {
	const B, P = 32, 120
	type key struct {
		E, buf, open int
	}
	global := map[key]float64{}
	part := map[key]float64{}
	for _, ds := range []struct{ E, L int }{{500, 600}, {2400, 250}} {
		cfg, runs, keep := qualityDataset(ds.E, ds.L)
		L := int32(ds.L)
		episodeOf := func(p int32) int64 { return int64(p / L) }
		t.Logf("%d episodes of %d frames: share of consecutive samples from one episode (distinct episodes per batch)", ds.E, ds.L)
		t.Logf("| buffer | global | partitioned, open 1 | open 2 | open 4 | open 8 |")
		for _, buf := range []int{1, 1024, 16384, 65536} {
			o := epochOrder(runs, keep, true, buf, newRNG("epoch", 1, 0, "", ""))
			s, d := shuffleQuality(o, episodeOf, B)
			global[key{ds.E, buf, 0}] = s
			row := fmt.Sprintf("| %d | %.1f %% (%.1f) |", buf, 100*s, d)
			for _, open := range []int{1, 2, 4, 8} {
				to := Options{Shuffle: true, Seed: 1, BufferSize: buf, Partitions: P, PartitionOpen: open}
				s, d := shuffleQuality(partitionedSequence(cfg, runs, keep, to, B), episodeOf, B)
				part[key{ds.E, buf, open}] = s
				row += fmt.Sprintf(" %.1f %% (%.1f) |", 100*s, d)
			}
			t.Log(row)
		}
	}
	for _, c := range []struct {
		name   string
		got    float64
		lo, hi float64
	}{
		{"global, default buffer", global[key{500, DefaultBufferSize, 0}], 0, 0.03},
		{"global, no buffer", global[key{500, 1, 0}], 0.99, 1},
		// One episode at a time through a tiny buffer share: mostly runs.
		{"partitioned open=1, default buffer", part[key{500, DefaultBufferSize, 1}], 0.6, 0.9},
		// Open episodes bring the share near 1/open...
		{"partitioned open=4, default buffer", part[key{2400, DefaultBufferSize, DefaultPartitionOpen}], 0.2, 0.3},
		{"partitioned open=8, default buffer", part[key{2400, DefaultBufferSize, 8}], 0.1, 0.16},
		// ... but never below a partition's own episodes (about 4 here).
		{"partitioned open=8, 4 episodes a partition", part[key{500, DefaultBufferSize, 8}], 0.2, 0.3},
	} {
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("%s: %.1f %% consecutive same-episode samples, want %.0f-%.0f %%", c.name, 100*c.got, 100*c.lo, 100*c.hi)
		}
	}
}
