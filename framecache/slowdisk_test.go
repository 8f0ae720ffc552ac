package framecache

import (
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/testslowfs"
)

// TestSlowDisk: on a file system whose writes run at ~45 MB/s (FUSE, each write
// request 2 ms late), the writers write inline until a window of their writes has
// taken inlineSpan, then the cache switches to queueing: from then on Add only copies
// (it never waits for the disk), entries the background writer cannot keep up with are
// dropped and counted, and every entry published reads back as written.
func TestSlowDisk(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	testslowfs.Mount(t, mnt, backing, 2*time.Millisecond, "TestInlineWrites covers the switch with lowered thresholds")
	c, h := openTest(t, Options{Dir: mnt, Codec: "none", Budget: 1 << 30, MaxPending: 16 << 20})
	files := []string{"a", "b", "c"}
	recs := makeRecords("f", 0, 40, 460_800)
	var inline, queued time.Duration
	var slowest time.Duration // of a queued Add
	for _, f := range files {
		w := c.Create("g", f, 0, nil)
		if w == nil {
			t.Fatalf("Create %s = nil", f)
		}
		for _, r := range recs {
			was := w.queued || c.bg.queueing()
			start := time.Now()
			w.Add(r.pts, r.payload)
			d := time.Since(start)
			if was {
				queued += d
				slowest = max(slowest, d)
			} else {
				inline += d
			}
		}
		if err := w.Commit(40); err != nil {
			t.Fatal(err)
		}
	}
	c.Flush()
	st := c.Stats()
	if st.SlowWrites != 1 || !c.bg.queueing() {
		t.Fatalf("the slow writes did not switch the cache to queueing: %+v", st)
	}
	// The decoder waited for the disk for about a window (inlineSpan), not longer.
	if inline > 2*inlineSpan {
		t.Errorf("Add spent %v writing inline, want about %v at most", inline, inlineSpan)
	}
	if queued > time.Second || slowest > 200*time.Millisecond {
		t.Errorf("queued Adds took %v (the slowest %v): they waited for the disk", queued, slowest)
	}
	if st.EntriesWritten+st.Dropped != int64(len(files)) {
		t.Fatalf("%d entries published and %d dropped of %d", st.EntriesWritten, st.Dropped, len(files))
	}
	for i, f := range files {
		if r, _ := c.Lookup("g", f, 1); r != nil {
			r.Close()
			holds(t, c, "g", f, 1, recs)
		} else if i == 0 {
			t.Fatalf("the first entry, written before the switch, is not in the cache (stats %+v)", st)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if tmp := tempFiles(t, mnt); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	if w := h.warnings(); len(w) != 0 {
		t.Fatalf("warnings: %q", w)
	}
	t.Logf("inline %v, queued %v (slowest %v); %d entries published, %d dropped", inline, queued, slowest, st.EntriesWritten, st.Dropped)
}
