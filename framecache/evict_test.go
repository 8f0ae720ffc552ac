package framecache

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestEviction: under a budget of five and a half entries, the least recently used
// entries go first (a hit makes an entry recent), and the cache ends within its budget.
func TestEviction(t *testing.T) {
	dir := t.TempDir()
	recs := makeRecords("f", 0, 10, 1000)
	probe, _ := openTest(t, Options{Dir: t.TempDir(), Codec: "none"})
	put(t, probe, "g", "f", 0, 1, nil, recs)
	size := probe.Stats().BytesWritten // every entry below has this size

	c, _ := openTest(t, Options{Dir: dir, Codec: "none", Budget: size*11/2 + 1})
	base := time.Now().Add(-24 * time.Hour)
	now := base
	c.now = func() time.Time { return now }
	name := func(i int) string { return fmt.Sprintf("f%d", i) }
	for i := range 5 { // entries 0..4, used at base+i minutes
		put(t, c, "g", name(i), 0, 1, nil, recs)
		at := base.Add(time.Duration(i) * time.Minute)
		os.Chtimes(entryPath(c, name(i)), at, at)
	}
	now = base.Add(time.Hour)
	if r, _ := c.Lookup("g", name(0), 0.5); r == nil {
		t.Fatal("miss")
	} else {
		r.Close()
	}
	if st := c.Stats(); st.Evicted != 0 {
		t.Fatalf("evicted %d under the budget", st.Evicted)
	}
	open1, _ := c.Lookup("g", name(1), 0.5) // read across its eviction below
	if open1 == nil {
		t.Fatal("miss")
	}
	os.Chtimes(entryPath(c, name(1)), base.Add(time.Minute), base.Add(time.Minute)) // undo the touch
	// 6 entries > 5.5: down to 90% of the budget.
	put(t, c, "g", name(5), 0, 1, nil, recs)
	if got, want := cached(t, c, 6), []int{0, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("cached %v, want %v (1 and 2 least recently used)", got, want)
	}
	if st := c.Stats(); st.Evicted != 2 {
		t.Fatalf("Evicted = %d, want 2", st.Evicted)
	}
	if got, err := readAll(open1); err != nil {
		t.Fatalf("reading an entry evicted while open: %v", err)
	} else {
		sameRecords(t, got, recs)
	}
	// A hit touches the entry, but not again within a minute.
	for _, step := range []struct {
		after   time.Duration
		touches bool
	}{{0, true}, {30 * time.Second, false}, {31 * time.Second, true}} {
		os.Chtimes(entryPath(c, name(3)), base, base)
		now = now.Add(step.after)
		r, _ := c.Lookup("g", name(3), 0.5)
		r.Close()
		info, _ := os.Stat(entryPath(c, name(3)))
		if touched := info.ModTime().Equal(now); touched != step.touches {
			t.Fatalf("%v after the last touch: mtime %v, now %v, want touched %v", step.after, info.ModTime(), now, step.touches)
		}
	}
	for _, e := range entryFiles(t, dir) {
		os.Chtimes(e, base, base) // all equally old; entry 0 the most recent:
	}
	os.Chtimes(entryPath(c, name(0)), now, now)
	put(t, c, "g", name(6), 0, 1, nil, recs)
	put(t, c, "g", name(7), 0, 1, nil, recs)
	got := cached(t, c, 8)
	if !slices.Contains(got, 0) || !slices.Contains(got, 7) || len(got) > 5 {
		t.Fatalf("cached %v: want 0 (recent) and 7 (just written) kept, at most 5", got)
	}
	var total int64
	for _, e := range entryFiles(t, dir) {
		info, _ := os.Stat(e)
		total += info.Size()
	}
	if total > c.Budget() {
		t.Fatalf("%d bytes cached, budget %d", total, c.Budget())
	}
}

// TestEntryOverBudget: an entry larger than the budget is not kept, and the cache stays
// writable.
func TestEntryOverBudget(t *testing.T) {
	dir := t.TempDir()
	c, h := openTest(t, Options{Dir: dir, Codec: "none", Budget: 5000})
	put(t, c, "g", "big", 0, 1, nil, makeRecords("big", 0, 10, 1000))
	if n, tmp := len(entryFiles(t, dir)), tempFiles(t, dir); n != 0 || len(tmp) != 0 {
		t.Fatalf("%d entries, temporary files %v", n, tmp)
	}
	put(t, c, "g", "small", 0, 1, nil, makeRecords("small", 0, 2, 1000))
	if n := len(entryFiles(t, dir)); n != 1 || !c.Writable() || len(h.warnings()) != 0 {
		t.Fatalf("%d entries, writable %v, warnings %q", n, c.Writable(), h.warnings())
	}
}

func entryPath(c *Cache, file string) string {
	return filepath.Join(c.fileDir("g", file), entryName(0, 1))
}

// cached lists which of files f0..f(n-1) of group g have their entry on disk.
func cached(t *testing.T, c *Cache, n int) []int {
	t.Helper()
	var out []int
	for i := range n {
		if _, err := os.Stat(entryPath(c, fmt.Sprintf("f%d", i))); err == nil {
			out = append(out, i)
		}
	}
	return out
}

func TestListClear(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	a, b := "lerobot/pusht@3f2a", "/data/ds"
	recs := makeRecords("x", 0, 4, 3000)
	put(t, c, a, "f1", 0, 1, nil, recs)
	put(t, c, a, "f1", 1, 2, nil, recs[:2])
	put(t, c, a, "f2", 0, 1, nil, recs)
	put(t, c, b, "f1", 0, 1, nil, recs[:1])
	for _, l := range []struct {
		group, file string
		t           float64
	}{{a, "f1", 0.5}, {a, "f2", 0.2}, {a, "f3", 0}, {b, "f1", 9}} {
		if r, _ := c.Lookup(l.group, l.file, l.t); r != nil {
			readAll(r)
		}
	}
	before := time.Now().Add(-time.Second)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Group != b || list[1].Group != a {
		t.Fatalf("List = %+v", list)
	}
	var sizeA int64
	for _, e := range entryFiles(t, dir) {
		if info, _ := os.Stat(e); filepath.Dir(filepath.Dir(e)) == c.groupDir(a) {
			sizeA += info.Size()
		}
	}
	ga, gb := list[1], list[0]
	if ga.Entries != 3 || ga.Bytes != sizeA || ga.RawBytes != 10*3000 || gb.Entries != 1 || gb.RawBytes != 3000 {
		t.Fatalf("List = %+v", list)
	}
	if ga.LastRun == nil || ga.LastRun.Hits != 2 || ga.LastRun.Misses != 1 || ga.LastRun.FramesRead != 8 ||
		ga.LastRun.FramesWritten != 10 || ga.LastRun.Time.Before(before) {
		t.Fatalf("group %s last run %+v", a, ga.LastRun)
	}
	if gb.LastRun == nil || gb.LastRun.Hits != 0 || gb.LastRun.Misses != 1 || gb.LastRun.FramesWritten != 1 {
		t.Fatalf("group %s last run %+v", b, gb.LastRun)
	}

	// A reader open across a Clear reads on.
	c2, _ := openTest(t, Options{Dir: dir})
	r, _ := c2.Lookup(a, "f2", 0)
	n, bytes, err := Clear(dir, a)
	if err != nil || n != 3 || bytes != sizeA {
		t.Fatalf("Clear(%s) = %d, %d, %v; want 3, %d", a, n, bytes, err, sizeA)
	}
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)
	if list, _ := List(dir); len(list) != 1 || list[0].Group != b {
		t.Fatalf("after Clear: %+v", list)
	}
	if r, _ := c2.Lookup(a, "f1", 0.5); r != nil {
		t.Fatal("hit after Clear")
	}
	// Writing into the cleared group again works and labels it again.
	put(t, c2, a, "f1", 0, 1, nil, recs)
	if n, _, err := Clear(dir, ""); err != nil || n != 2 {
		t.Fatalf("Clear all = %d, %v; want 2", n, err)
	}
	if list, err := List(dir); err != nil || len(list) != 0 {
		t.Fatalf("after Clear all: %+v, %v", list, err)
	}
	if n, _, err := Clear(filepath.Join(dir, "none"), ""); err != nil || n != 0 {
		t.Fatalf("Clear of a missing cache = %d, %v", n, err)
	}
	if list, err := List(filepath.Join(dir, "none")); err != nil || list != nil {
		t.Fatalf("List of a missing cache = %v, %v", list, err)
	}
}

// TestNextNoAllocs: in steady state Next allocates nothing, whatever the codec.
func TestNextNoAllocs(t *testing.T) {
	for _, codec := range []string{"s2", "zstd", "none"} {
		t.Run(codec, func(t *testing.T) {
			c, _ := openTest(t, Options{Dir: t.TempDir(), Codec: codec})
			put(t, c, "g", "f", 0, 10, nil, makeRecords("f", 0, 30, 460_800))
			r, _ := c.Lookup("g", "f", 0)
			defer r.Close()
			r.Next() // buffers grow on the first two records (the reader alternates two sets)
			r.Next()
			if n := testing.AllocsPerRun(20, func() {
				if _, _, err := r.Next(); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("%v allocations per Next", n)
			}
		})
	}
}

// TestRunStatsAdd: a process's statistics join the recorded run when the run was still
// going when the process started, and start a new record otherwise.
func TestRunStatsAdd(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	proc := func(start, end int, read, written int64) RunStats {
		return RunStats{Start: at(start), Time: at(end), Hits: 1, FramesRead: read, FramesWritten: written}
	}
	cases := []struct {
		name       string
		last, proc RunStats
		want       RunStats
	}{
		{"no record", RunStats{}, proc(0, 5, 3, 4), RunStats{Start: at(0), Time: at(5), Processes: 1, Hits: 1, FramesRead: 3, FramesWritten: 4}},
		{"overlapping", RunStats{Start: at(0), Time: at(5), Processes: 2, Hits: 2, FramesRead: 10, FramesWritten: 1},
			proc(3, 9, 3, 4), RunStats{Start: at(0), Time: at(9), Processes: 3, Hits: 3, FramesRead: 13, FramesWritten: 5}},
		{"started earlier, closed first", RunStats{Start: at(2), Time: at(5), Processes: 1, Hits: 1, FramesRead: 1},
			proc(1, 4, 2, 0), RunStats{Start: at(1), Time: at(5), Processes: 2, Hits: 2, FramesRead: 3}},
		{"after the record's run", RunStats{Start: at(0), Time: at(5), Processes: 4, Hits: 9, FramesRead: 100},
			proc(6, 8, 3, 4), RunStats{Start: at(6), Time: at(8), Processes: 1, Hits: 1, FramesRead: 3, FramesWritten: 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.last.add(tc.proc); got != tc.want {
				t.Fatalf("add = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRunStatsOverlap: two Caches of one directory open at once (two processes of a
// run) record one run with both counts; a Cache opened after they closed, a new one.
func TestRunStatsOverlap(t *testing.T) {
	dir := t.TempDir()
	c1, _ := openTest(t, Options{Dir: dir, Budget: 1 << 30})
	c2, _ := openTest(t, Options{Dir: dir, Budget: 1 << 30})
	put(t, c1, "g", "f1", 0, 1, nil, makeRecords("f1", 0, 3, 100))
	put(t, c2, "g", "f2", 0, 1, nil, makeRecords("f2", 0, 4, 100))
	if r, _ := c2.Lookup("g", "f1", 0.5); r == nil {
		t.Fatal("no entry f1")
	} else if _, err := readAll(r); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2.Close()
	last := func() *RunStats {
		t.Helper()
		list, err := List(dir)
		if err != nil || len(list) != 1 || list[0].LastRun == nil {
			t.Fatalf("List = %+v, %v", list, err)
		}
		return list[0].LastRun
	}
	if r := last(); r.Processes != 2 || r.FramesWritten != 7 || r.FramesRead != 3 || r.Hits != 1 {
		t.Fatalf("last run %+v: want both processes' counts", r)
	}
	time.Sleep(10 * time.Millisecond) // the next process starts after the run's last Close
	c3, _ := openTest(t, Options{Dir: dir, Budget: 1 << 30})
	if r, _ := c3.Lookup("g", "f2", 0.5); r == nil {
		t.Fatal("no entry f2")
	} else {
		r.Close()
	}
	c3.Close()
	if r := last(); r.Processes != 1 || r.FramesWritten != 0 || r.Hits != 1 {
		t.Fatalf("last run %+v: want the later process alone", r)
	}
}
