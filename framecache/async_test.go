package framecache

import (
	"testing"
)

// TestBackground: with Options.Background entries are written and published by the
// Cache's background writer:
// Flush and Close wait for them, the bytes read back are the ones added, the pending
// bytes are bounded (an entry that would pass the bound is dropped, counted, without a
// warning and without degrading the cache), and Abort after Commit changes nothing.
func TestBackground(t *testing.T) {
	recs := makeRecords("f", 0, 8, 50_000)
	write := func(c *Cache, file string) {
		w := c.Create("g", file, 0, []byte("meta"))
		for _, r := range recs {
			w.Add(r.pts, r.payload)
		}
		if err := w.Commit(1); err != nil {
			t.Fatal(err)
		}
		w.Abort() // after Commit: nothing
	}
	check := func(c *Cache, file string) {
		t.Helper()
		holds(t, c, "g", file, 0.5, recs)
	}
	dir := t.TempDir()
	c, h := openTest(t, Options{Dir: dir, Budget: 1 << 30, Codec: "none", MaxPending: DefaultMaxPending, Background: true})
	write(c, "a")
	c.Flush()
	check(c, "a")
	if p := c.bg.pending.Load(); p != 0 {
		t.Fatalf("%d bytes pending after Flush", p)
	}
	// Close publishes what is queued.
	for _, f := range []string{"b", "c", "d"} {
		write(c, f)
	}
	c.Close()
	c2, _ := openTest(t, Options{Dir: dir, Budget: 1 << 30})
	for _, f := range []string{"b", "c", "d"} {
		check(c2, f)
	}
	// A record past the bound: its entry dropped, counted, no warning, still writable.
	c3, h3 := openTest(t, Options{Dir: t.TempDir(), Budget: 1 << 30, Codec: "none", MaxPending: 100_000, Background: true})
	wb := c3.Create("g", "big", 0, nil)
	wb.Add(0.1, make([]byte, 150_000))
	if err := wb.Commit(1); err != nil {
		t.Fatal(err)
	}
	c3.Flush()
	if r, _ := c3.Lookup("g", "big", 0.5); r != nil {
		t.Fatal("an entry past the pending bound was stored")
	}
	if st := c3.Stats(); st.Dropped != 1 || st.EntriesWritten != 0 {
		t.Fatalf("stats %+v: want one dropped entry", st)
	}
	if !c3.Writable() || len(h3.warnings()) != 0 || len(h.warnings()) != 0 {
		t.Fatalf("dropping degraded the cache or warned: %q %q", h3.warnings(), h.warnings())
	}
	if p := c3.bg.pending.Load(); p != 0 {
		t.Fatalf("%d bytes pending after a dropped entry", p)
	}
	if tmp := tempFiles(t, c3.Dir()); len(tmp) != 0 {
		t.Fatalf("the dropped entry left temporary files %v", tmp)
	}
	// Small entries within the bound are kept.
	small := makeRecords("s", 0, 3, 1000)
	w := c3.Create("g", "small", 0, nil)
	for _, r := range small {
		w.Add(r.pts, r.payload)
	}
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	c3.Flush()
	if r, _ := c3.Lookup("g", "small", 0.1); r == nil {
		t.Fatal("a small entry within the bound was not stored")
	} else {
		r.Close()
	}
}
