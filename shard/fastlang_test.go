package shard

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/lrstream/lrstream/bench/datagen"
)

// TestFastPathMatchesArrow reads every conformance dataset through the
// low-level language path and through pqarrow, and requires identical
// batches.
func TestFastPathMatchesArrow(t *testing.T) {
	var counts readCounts
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, dir := range dirs {
		_, fast := readAll(t, mustDir(t, dir), Selection{}, Options{counts: &counts})
		_, slow := readAll(t, mustDir(t, dir), Selection{}, Options{noFast: true})
		if len(fast) != len(slow) {
			t.Fatalf("%s: %d and %d batches", dir, len(fast), len(slow))
		}
		for i := range fast {
			a, b := fast[i], slow[i]
			if !reflect.DeepEqual(a.Index, b.Index) || a.HasPersistent != b.HasPersistent || a.HasEvents != b.HasEvents {
				t.Fatalf("%s %s rg %d: frames differ", filepath.Base(dir), a.File, a.RowGroup)
			}
			for r := 0; r < a.Len(); r++ {
				if rowsJSON(a.PersistentRows(r), true) != rowsJSON(b.PersistentRows(r), true) {
					t.Fatalf("%s %s rg %d frame %d: persistent differs:\n%s\n%s", filepath.Base(dir), a.File, a.RowGroup, r,
						rowsJSON(a.PersistentRows(r), true), rowsJSON(b.PersistentRows(r), true))
				}
				if rowsJSON(a.EventRows(r), false) != rowsJSON(b.EventRows(r), false) {
					t.Fatalf("%s %s rg %d frame %d: events differ", filepath.Base(dir), a.File, a.RowGroup, r)
				}
			}
			if !reflect.DeepEqual(a.PersistentOf, b.PersistentOf) || len(a.Persistent) != len(b.Persistent) {
				t.Fatalf("%s %s rg %d: distinct lists differ", filepath.Base(dir), a.File, a.RowGroup)
			}
			if !reflect.DeepEqual(a.Features, b.Features) || !reflect.DeepEqual(a.Timestamp, b.Timestamp) ||
				!reflect.DeepEqual(a.EpisodeIndex, b.EpisodeIndex) || !reflect.DeepEqual(a.FrameIndex, b.FrameIndex) ||
				!reflect.DeepEqual(a.TaskIndex, b.TaskIndex) {
				t.Fatalf("%s %s rg %d: frame columns or features differ", filepath.Base(dir), a.File, a.RowGroup)
			}
		}
	}
	if counts.fast.Load() == 0 {
		t.Fatal("the low-level path was never used")
	}
	t.Logf("%d columns read by the low-level path", counts.fast.Load())
}

// TestFastPathGenerated compares both paths on generated datasets of both
// schema variants (realistic annotation density and page layout).
func TestFastPathGenerated(t *testing.T) {
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		dir := generated(t, v, 6, 150, 400, 3)
		_, fast := readAll(t, mustDir(t, dir), Selection{}, Options{})
		_, slow := readAll(t, mustDir(t, dir), Selection{}, Options{noFast: true})
		frames, events := 0, 0
		for i := range fast {
			a, b := fast[i], slow[i]
			if a.Len() != b.Len() || !reflect.DeepEqual(a.PersistentOf, b.PersistentOf) {
				t.Fatalf("%s: batch %d differs", v, i)
			}
			for r := 0; r < a.Len(); r++ {
				if rowsJSON(a.PersistentRows(r), true) != rowsJSON(b.PersistentRows(r), true) ||
					rowsJSON(a.EventRows(r), false) != rowsJSON(b.EventRows(r), false) {
					t.Fatalf("%s: batch %d frame %d differs", v, i, r)
				}
				if len(a.EventRows(r)) > 0 {
					events++
				}
			}
			if !reflect.DeepEqual(a.Features, b.Features) {
				t.Fatalf("%s: features differ", v)
			}
			frames += a.Len()
		}
		if events == 0 || frames == 0 {
			t.Fatalf("%s: %d frames, %d with events", v, frames, events)
		}
	}
}

// TestRepeats checks the one-pass span comparison against the frame by
// frame one on hand-made leaves: every span where repeats is true must be
// equal frame by frame, and a span of equal frames must be recognised.
func TestRepeats(t *testing.T) {
	// leaf builds a row leaf (maxDef 3: 1 list, 2 row, 3 value) from
	// frames of (def, dictionary index) entries.
	leaf := func(frames [][][2]int) *fastLeaf {
		l := &fastLeaf{field: fContent, kind: parquet.Types.ByteArray, byIdx: true, maxDef: 3, dList: 1, dElem: 2,
			dict: []parquet.ByteArray{[]byte("a"), []byte("b"), []byte("a")}}
		for _, f := range frames {
			for k, e := range f {
				l.rep = append(l.rep, int16(min(k, 1)))
				l.def = append(l.def, int16(e[0]))
				if e[0] == 3 {
					l.idx = append(l.idx, int32(e[1]))
				}
			}
		}
		if err := l.index(len(frames)); err != nil {
			t.Fatal(err)
		}
		return l
	}
	ab := [][2]int{{3, 0}, {3, 1}}
	for _, c := range []struct {
		name   string
		frames [][][2]int
		want   bool
	}{
		{"equal", [][][2]int{ab, ab, ab, ab}, true},
		{"two frames", [][][2]int{ab, ab}, true},
		{"null field", [][][2]int{{{3, 0}, {2, 0}}, {{3, 0}, {2, 0}}, {{3, 0}, {2, 0}}}, true},
		{"value differs", [][][2]int{ab, ab, {{3, 0}, {3, 0}}, ab}, false},
		{"null differs", [][][2]int{ab, ab, {{3, 0}, {2, 0}}, ab}, false},
		{"same total, other lengths", [][][2]int{ab, {{3, 0}}, {{3, 0}, {3, 1}, {3, 1}}, ab}, false},
		{"longer frame", [][][2]int{ab, ab, {{3, 0}, {3, 1}, {3, 1}}}, false},
		// Index 2 holds the same value as index 0: equal frames that
		// repeats does not recognise (the caller compares frame by frame).
		{"duplicate dictionary value", [][][2]int{ab, {{3, 2}, {3, 1}}, ab}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl := &fastLang{leaves: []*fastLeaf{leaf(c.frames)}}
			fl.ref = fl.leaves[0]
			got := fl.repeats(0, len(c.frames))
			if got != c.want {
				t.Fatalf("repeats = %v, want %v", got, c.want)
			}
			if got {
				for r := 1; r < len(c.frames); r++ {
					if !fl.sameFrames(0, r) {
						t.Fatalf("repeats, but frame %d differs", r)
					}
				}
			}
			if fl.repeats(1, 1) || fl.repeats(0, 1) {
				t.Fatal("a span of fewer than two frames repeats")
			}
		})
	}
}

// TestSharedIndex checks that a leaf with an earlier leaf's levels copies
// its index, still checks its own number of values, and that leaves with
// other levels or nesting index themselves.
func TestSharedIndex(t *testing.T) {
	mk := func(field fastField, maxDef int16, def, rep []int16, nv int) *fastLeaf {
		return &fastLeaf{field: field, kind: parquet.Types.ByteArray, byIdx: true, maxDef: maxDef, dList: 1, dElem: 2,
			def: def, rep: rep, idx: make([]int32, nv), dict: []parquet.ByteArray{[]byte("x")}}
	}
	def, rep := []int16{3, 3, 3, 2}, []int16{0, 1, 0, 1}
	first := mk(fContent, 3, def, rep, 3)
	if err := first.index(2); err != nil {
		t.Fatal(err)
	}
	fl := &fastLang{leaves: []*fastLeaf{first}}
	same := mk(fStyle, 3, slices.Clone(def), slices.Clone(rep), 3)
	if j := fl.sameLevels(same); j != first {
		t.Fatal("equal levels not shared")
	}
	if err := same.shareIndex(first, 2); err != nil || !slices.Equal(same.frameEntry, first.frameEntry) || !slices.Equal(same.frameVal, first.frameVal) {
		t.Fatalf("shared index %v %v (%v)", same.frameEntry, same.frameVal, err)
	}
	if err := mk(fStyle, 3, def, rep, 2).shareIndex(first, 2); err == nil {
		t.Fatal("a leaf with fewer values than its levels define was accepted")
	}
	for name, l := range map[string]*fastLeaf{
		"other definition levels": mk(fStyle, 3, []int16{3, 3, 2, 2}, rep, 2),
		"other repetition levels": mk(fStyle, 3, def, []int16{0, 1, 1, 1}, 3),
		"other maximum level":     mk(fStyle, 4, def, rep, 3),
		"tool calls":              mk(fToolCalls, 3, def, rep, 3),
	} {
		if fl.sameLevels(l) != nil {
			t.Errorf("%s: shared", name)
		}
	}
}

// TestIndex checks the frame index of a leaf and its errors, with and
// without copying the entry starts of a leaf with the same repetition
// levels.
func TestIndex(t *testing.T) {
	for _, c := range []struct {
		name      string
		def, rep  []int16
		nrows, nv int
		entry     []int32
		val       []int32
		err       string
	}{
		{"all present", []int16{3, 3, 3, 3}, []int16{0, 1, 0, 1}, 2, 4, []int32{0, 2, 4}, []int32{0, 2, 4}, ""},
		{"all null", []int16{2, 2, 2}, []int16{0, 0, 1}, 2, 0, []int32{0, 1, 3}, []int32{0, 0, 0}, ""},
		{"mixed", []int16{3, 2, 0, 3}, []int16{0, 1, 0, 0}, 3, 2, []int32{0, 2, 3, 4}, []int32{0, 1, 1, 2}, ""},
		{"empty", nil, nil, 0, 0, []int32{0}, []int32{0}, ""},
		{"no row start", []int16{3, 3}, []int16{1, 0}, 1, 2, nil, nil, "data does not start a row"},
		{"repetition level too high", []int16{3, 3}, []int16{0, 3}, 1, 2, nil, nil, "invalid levels"},
		{"definition level too high", []int16{3, 4}, []int16{0, 1}, 1, 1, nil, nil, "invalid levels"},
		{"uniform definition level too high", []int16{4, 4}, []int16{0, 1}, 1, 2, nil, nil, "invalid levels"},
		{"too many rows", []int16{3, 3, 3}, []int16{0, 0, 0}, 2, 3, nil, nil, "more than 2 rows"},
		{"too few rows", []int16{3, 3, 3}, []int16{0, 1, 0}, 3, 3, nil, nil, "2 rows, want 3"},
		{"values missing", []int16{3, 3, 2}, []int16{0, 1, 0}, 2, 1, nil, nil, "1 values for 2 defined levels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func() *fastLeaf {
				return &fastLeaf{field: fContent, kind: parquet.Types.ByteArray, byIdx: true, maxDef: 3,
					def: slices.Clone(c.def), rep: slices.Clone(c.rep), idx: make([]int32, c.nv)}
			}
			l := mk()
			err := l.index(c.nrows)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(l.frameEntry, c.entry) || !slices.Equal(l.frameVal, c.val) {
				t.Fatalf("entries %v values %v (%v), want %v %v", l.frameEntry, l.frameVal, err, c.entry, c.val)
			}
			// The same through a leaf with these repetition levels.
			k := mk()
			if err := k.indexFrom(l, c.nrows); err != nil || !slices.Equal(k.frameEntry, c.entry) || !slices.Equal(k.frameVal, c.val) {
				t.Fatalf("copied: entries %v values %v (%v)", k.frameEntry, k.frameVal, err)
			}
		})
	}
}

// TestSameRows checks the row agreement of a row leaf and a tool_calls
// leaf: frames as null lists, and calls lists of several calls.
func TestSameRows(t *testing.T) {
	// Row leaf: maxDef 3 (1 list, 2 row, 3 value). Two frames of two rows.
	row := &fastLeaf{field: fContent, maxDef: 3, dList: 1, dElem: 2, byIdx: true, kind: parquet.Types.ByteArray,
		def: []int16{3, 3, 3, 3}, rep: []int16{0, 1, 0, 1}, idx: make([]int32, 4)}
	if err := row.index(2); err != nil {
		t.Fatal(err)
	}
	// tool_calls: maxDef 6 (3 calls list present, 4 call list element,
	// ...); maxRep 2.
	tc := func(def, rep []int16) *fastLeaf {
		l := &fastLeaf{field: fToolCalls, maxDef: 6, dList: 1, dElem: 2, dTC: 3, dTCList: 4, byIdx: true,
			kind: parquet.Types.ByteArray, def: def, rep: rep}
		for _, d := range def {
			if d == 6 {
				l.idx = append(l.idx, 0)
			}
		}
		if err := l.indexFrom(row, 2); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name string
		l    *fastLeaf
		want bool
	}{
		{"null calls", tc([]int16{2, 2, 2, 2}, []int16{0, 1, 0, 1}), true},
		{"one call each", tc([]int16{6, 6, 6, 6}, []int16{0, 1, 0, 1}), true},
		{"two calls in a row", tc([]int16{6, 6, 6, 6, 6}, []int16{0, 2, 1, 0, 1}), true},
		{"a row missing", tc([]int16{6, 6, 6, 6}, []int16{0, 2, 0, 1}), false},
		{"null list", tc([]int16{0, 3, 3}, []int16{0, 0, 1}), false},
	} {
		if got := row.sameRows(c.l, 2); got != c.want {
			t.Errorf("%s: sameRows = %v, want %v", c.name, got, c.want)
		}
	}
	// Frames of one entry: the same entry starts, one frame a null list.
	one := &fastLeaf{field: fContent, maxDef: 3, dList: 1, dElem: 2, byIdx: true, kind: parquet.Types.ByteArray,
		def: []int16{3, 3}, rep: []int16{0, 0}, idx: make([]int32, 2)}
	null := &fastLeaf{field: fStyle, maxDef: 3, dList: 1, dElem: 2, byIdx: true, kind: parquet.Types.ByteArray,
		def: []int16{3, 0}, rep: []int16{0, 0}, idx: make([]int32, 1)}
	if one.index(2) != nil || null.index(2) != nil {
		t.Fatal("index")
	}
	if one.sameRows(null, 2) || !one.sameRows(one, 2) {
		t.Error("a null list in one leaf only was not told apart")
	}
}
