package order

import (
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
