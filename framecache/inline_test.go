package framecache

import (
	"testing"
)

// TestInlineWrites: by default a Writer writes its records where they are added and
// the background writer publishes the entry; once the inline writes are slow (a window
// of them, by bytes or by time spent asleep, under the rate), every Writer queues
// its records from its next one on — including one in the middle of its entry — and
// the cache stays so. Every entry reads back as written. Writes that keep up never
// switch it, however many windows they fill, nor do writes that never sleep.
func TestInlineWrites(t *testing.T) {
	recs := makeRecords("f", 0, 12, 50_000)
	write := func(t *testing.T, c *Cache, file string, mid func(i int, w *Writer)) {
		t.Helper()
		w := c.Create("g", file, 0, []byte("meta"))
		for i, r := range recs {
			w.Add(r.pts, r.payload)
			if mid != nil {
				mid(i, w)
			}
		}
		if err := w.Commit(12); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, c *Cache, file string) {
		t.Helper()
		c.Flush()
		holds(t, c, "g", file, 5, recs)
	}
	// A thread that sleeps in every write, and one that never does.
	var n int64
	sleeping := func() (int64, bool) { n++; return n, true }
	awake := func() (int64, bool) { return 7, true }
	for _, tc := range []struct {
		name  string
		set   func(in *inlineWrites)
		after int // the record after which the writer queues (-1: never)
	}{
		// A window of ~3 records' bytes written at under 10^18 bytes/s: slow.
		{"slow window", func(in *inlineWrites) { in.window, in.rate, in.sleeps = 3*50_000, 1e18, sleeping }, 2},
		// The same thresholds, but the writes never slept: they did not wait for the
		// disk, however long they took.
		{"never slept", func(in *inlineWrites) { in.window, in.rate, in.sleeps = 3*50_000, 1e18, awake }, -1},
		// A window ended by time (a span of 0) under 10^18 bytes/s: slow at once (the
		// header's write in Create).
		{"slow span", func(in *inlineWrites) { in.span, in.rate, in.sleeps = 0, 1e18, sleeping }, -2},
		// Windows of a record each, at ≥ 1 byte/s: never slow.
		{"fast", func(in *inlineWrites) { in.window, in.rate, in.sleeps = 1, 1, sleeping }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, h := openTest(t, Options{Dir: t.TempDir(), Budget: 1 << 30, Codec: "none", MaxPending: DefaultMaxPending})
			tc.set(&c.bg.inline)
			queuedAt := -1
			write(t, c, "a", func(i int, w *Writer) {
				if w.queued && queuedAt < 0 {
					queuedAt = i
				}
			})
			check(t, c, "a")
			w := c.Create("g", "b", 0, nil)
			queuedB := w.queued
			w.Abort()
			switch {
			case tc.after == -1:
				if queuedAt >= 0 || queuedB || c.Stats().SlowWrites != 0 {
					t.Fatalf("fast writes queued (at record %d, next writer %v, stats %+v)", queuedAt, queuedB, c.Stats())
				}
			case tc.after == -2 && queuedAt != 0, tc.after >= 0 && queuedAt != tc.after+1:
				t.Fatalf("queued from record %d, want after record %d", queuedAt, tc.after)
			case !queuedB || c.Stats().SlowWrites != 1:
				t.Fatalf("after slow writes: the next writer queues %v, stats %+v", queuedB, c.Stats())
			}
			write(t, c, "c", nil)
			check(t, c, "c")
			if len(h.warnings()) != 0 || !c.Writable() {
				t.Fatalf("warnings %q, writable %v", h.warnings(), c.Writable())
			}
			if tmp := tempFiles(t, c.Dir()); len(tmp) != 0 {
				t.Fatalf("temporary files left: %v", tmp)
			}
		})
	}
}
