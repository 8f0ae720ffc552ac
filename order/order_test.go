package order

import (
	"fmt"
	"slices"
	"testing"
)

// checkStreamOrder checks that streamOrder serves every kept position of
// runs exactly once and nothing else, and is deterministic.
func checkStreamOrder(t *testing.T, runs []Run, keep []bool, shuffle bool, buf, open int) []int32 {
	t.Helper()
	got := streamOrder(runs, keep, shuffle, buf, open, newRNG("t", 1, 0, "", ""))
	again := streamOrder(runs, keep, shuffle, buf, open, newRNG("t", 1, 0, "", ""))
	if !slices.Equal(got, again) {
		t.Fatalf("buf %d open %d: not deterministic", buf, open)
	}
	var want []int32
	for _, r := range runs {
		for p := r.Start; p < r.Start+r.Len; p++ {
			if keep[p] {
				want = append(want, int32(p))
			}
		}
	}
	if !shuffle && !slices.Equal(got, want) {
		t.Fatalf("unshuffled: %v, want position order %v", got, want)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	slices.Sort(want)
	if !slices.Equal(sorted, want) {
		t.Fatalf("buf %d open %d: served %v, want each of %v once", buf, open, sorted, want)
	}
	return got
}

func TestStreamOrderServesKeptOnce(t *testing.T) {
	var runs []Run
	var keep []bool
	for e, n := range []int{5, 1, 9, 3, 7, 2} {
		runs = append(runs, Run{Episode: int64(e), Start: int64(len(keep)), Len: int64(n)})
		for i := 0; i < n; i++ {
			keep = append(keep, (len(keep)*7)%5 != 0)
		}
	}
	for _, shuffle := range []bool{false, true} {
		for _, buf := range []int{0, 1, 4, 100} {
			for _, open := range []int{0, 1, 2, 3, 10} {
				checkStreamOrder(t, runs, keep, shuffle, buf, open)
			}
		}
	}
	// open 1 is epochOrder, the global order's (unchanged) algorithm.
	a := streamOrder(runs, keep, true, 4, 1, newRNG("t", 2, 0, "", ""))
	b := epochOrder(runs, keep, true, 4, newRNG("t", 2, 0, "", ""))
	if !slices.Equal(a, b) {
		t.Fatal("open 1 differs from epochOrder")
	}
}

// FuzzStreamOrder: any runs, kept mask, buffer and open count serve each
// kept position exactly once.
func FuzzStreamOrder(f *testing.F) {
	f.Add([]byte{3, 1, 4, 1, 5}, uint16(0xbeef), uint8(3), uint8(2))
	f.Add([]byte{1}, uint16(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, lens []byte, mask uint16, buf, open uint8) {
		var runs []Run
		var keep []bool
		for e, n := range lens {
			n := int(n%16) + 1
			runs = append(runs, Run{Episode: int64(e), Start: int64(len(keep)), Len: int64(n)})
			for i := 0; i < n; i++ {
				keep = append(keep, mask>>(len(keep)%16)&1 == 1)
			}
		}
		checkStreamOrder(t, runs, keep, true, int(buf), int(open%9))
	})
}

func FuzzParseToken(f *testing.F) {
	f.Add(State{Epoch: 2, Batch: 9}.Token("abc"))
	f.Add("")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		st, fp, err := ParseToken(s)
		if err != nil {
			return
		}
		if st.Epoch < 0 || st.Batch < 0 {
			t.Fatalf("accepted %q as %+v", s, st)
		}
		if again := st.Token(fp); again != s {
			// A token parsed is the token of its state and fingerprint
			// (encoding/json may accept other spellings: they must
			// decode to the same state).
			st2, fp2, err := ParseToken(again)
			if err != nil || st2 != st || fp2 != fp {
				t.Fatalf("%q: re-encoded as %q, which parses to %+v %q %v", s, again, st2, fp2, err)
			}
		}
	})
}

// checkStratified checks that stratifiedOrder serves every kept position
// of runs exactly once, keeps each episode's frames in order and is
// deterministic.
func checkStratified(t *testing.T, runs []Run, keep []bool, open int) []int32 {
	t.Helper()
	o := Options{Shuffle: true, Seed: 4, PartitionOpen: open}
	got := stratifiedOrder(runs, keep, o, 3, 1, "rev", "sel")
	if again := stratifiedOrder(runs, keep, o, 3, 1, "rev", "sel"); !slices.Equal(got, again) {
		t.Fatalf("open %d: not deterministic", open)
	}
	var want []int32
	epOf := map[int32]int64{}
	for _, r := range runs {
		for p := r.Start; p < r.Start+r.Len; p++ {
			epOf[int32(p)] = r.Episode
			if keep[p] {
				want = append(want, int32(p))
			}
		}
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !slices.Equal(sorted, want) {
		t.Fatalf("open %d: served %v, want each of %v once", open, sorted, want)
	}
	last := map[int64]int32{}
	for _, p := range got {
		e := epOf[p]
		if q, ok := last[e]; ok && q > p {
			t.Fatalf("open %d: episode %d serves position %d after %d", open, e, p, q)
		}
		last[e] = p
	}
	return got
}

func TestStratifiedOrder(t *testing.T) {
	// Episodes of several lengths, one of them in two runs, some frames
	// not kept.
	var runs []Run
	var keep []bool
	for e, n := range []int{5, 1, 9, 3, 7, 2, 8, 8, 4} {
		parts := 1
		if e == 2 {
			parts = 2
		}
		for k := 0; k < parts; k++ {
			m := n / parts
			if k == parts-1 {
				m = n - (parts-1)*(n/parts)
			}
			runs = append(runs, Run{Episode: int64(e), Start: int64(len(keep)), Len: int64(m)})
			for i := 0; i < m; i++ {
				keep = append(keep, (len(keep)*7)%5 != 0)
			}
		}
	}
	for _, open := range []int{0, 1, 2, 3, 4, 100} {
		checkStratified(t, runs, keep, open)
	}
	// Unshuffled: position order, as the partitioned order's.
	if got := stratifiedOrder(runs, keep, Options{PartitionOpen: 3}, 0, 0, "", ""); !slices.Equal(got, streamOrder(runs, keep, false, 0, 0, nil)) {
		t.Fatal("unshuffled stratified order is not position order")
	}
	// Equal episodes in one wave: every window of n consecutive frames
	// holds each of the n episodes once.
	runs, keep = nil, nil
	const n, L = 6, 10
	for e := 0; e < n; e++ {
		runs = append(runs, Run{Episode: int64(e), Start: int64(e * L), Len: L})
		for i := 0; i < L; i++ {
			keep = append(keep, true)
		}
	}
	got := checkStratified(t, runs, keep, n)
	for i := 0; i+n <= len(got); i++ {
		seen := map[int32]bool{}
		for _, p := range got[i : i+n] {
			seen[p/L] = true
		}
		if len(seen) != n {
			t.Fatalf("window at %d holds %d episodes, want %d: %v", i, len(seen), n, got)
		}
	}
}

// FuzzStratifiedOrder: any runs, kept mask and open count serve each kept
// position exactly once, each episode in order.
func FuzzStratifiedOrder(f *testing.F) {
	f.Add([]byte{3, 1, 4, 1, 5}, uint16(0xbeef), uint8(2))
	f.Add([]byte{1}, uint16(0), uint8(0))
	f.Fuzz(func(t *testing.T, lens []byte, mask uint16, open uint8) {
		var runs []Run
		var keep []bool
		for e, n := range lens {
			n := int(n%16) + 1
			runs = append(runs, Run{Episode: int64(e), Start: int64(len(keep)), Len: int64(n)})
			for i := 0; i < n; i++ {
				keep = append(keep, mask>>(len(keep)%16)&1 == 1)
			}
		}
		checkStratified(t, runs, keep, int(open%40))
	})
}

// stratifiedBySort is stratifiedOrder's definition, by a plain sort of
// each wave's frames by (key, episode): the oracle of its linear-time
// merge.
func stratifiedBySort(runs []Run, keep []bool, o Options, p int, epoch int64, revision, sel string) []int32 {
	r := newRNG(fmt.Sprintf("stratified-%d", p), o.Seed, epoch, revision, sel)
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
	type frame struct {
		key float64
		ep  int
		p   int32
	}
	var out []int32
	for w := 0; w < waves; w++ {
		var wave []frame
		for i := w * len(eps) / waves; i < (w+1)*len(eps)/waves; i++ {
			u := r.float()
			var kept []int32
			for _, run := range eps[i] {
				for q := run.Start; q < run.Start+run.Len; q++ {
					if keep[q] {
						kept = append(kept, int32(q))
					}
				}
			}
			for j, q := range kept {
				wave = append(wave, frame{(float64(j) + u) / float64(len(kept)), i, q})
			}
		}
		slices.SortFunc(wave, func(a, b frame) int {
			if a.key != b.key {
				if a.key < b.key {
					return -1
				}
				return 1
			}
			return a.ep - b.ep
		})
		for _, f := range wave {
			out = append(out, f.p)
		}
	}
	return out
}

func TestStratifiedMergeIsSort(t *testing.T) {
	_, runs, keep := variedDataset(300, 1, 90)
	for i := range keep {
		keep[i] = i%7 != 3
	}
	for _, open := range []int{1, 2, 5, 24, 400} {
		o := Options{Shuffle: true, Seed: 9, PartitionOpen: open}
		for lo := 0; lo < len(runs); lo += 100 {
			rs := runs[lo:min(lo+100, len(runs))]
			got := stratifiedOrder(rs, keep, o, lo, 2, "r", "s")
			if want := stratifiedBySort(rs, keep, o, lo, 2, "r", "s"); !slices.Equal(got, want) {
				t.Fatalf("open %d, runs from %d: the merge differs from the sort", open, lo)
			}
		}
	}
}
