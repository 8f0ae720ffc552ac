//go:build linux

package framecache

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPreallocatedEntry: an entry written through the page cache reserves its blocks
// ahead of its writes (prealloc.go) — a step at a time, past several steps here — and
// is published cut to its size, the reserved blocks beyond it freed, with every record
// read back as written.
func TestPreallocatedEntry(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	err = reserve(probe, 0, preallocStep)
	probe.Close()
	if err != nil {
		t.Skipf("SKIPPED, not passed: the file system of %s refuses fallocate (%v): entries are written without reserving there", dir, err)
	}
	c, h := openTest(t, Options{Dir: dir, Codec: "none", Budget: 1 << 30, MaxPending: DefaultMaxPending})
	// 2.5 steps of 480×640 YUV frames.
	n := int(5*preallocStep/2/460_800) + 1
	recs := makeRecords("big.mp4", 0, n, 460_800)
	put(t, c, "group", "file", 0, float64(n), nil, recs)
	c.Flush()
	var entry string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(filepath.Base(p), "-") && !strings.HasSuffix(p, ".tmp") && filepath.Base(p) != filepath.Base(probe.Name()) {
			if st, _ := d.Info(); st != nil && st.Size() > preallocStep {
				entry = p
			}
		}
		return err
	})
	if err != nil || entry == "" {
		t.Fatalf("no published entry of more than %d bytes in %s (%v)", preallocStep, dir, err)
	}
	st, err := os.Stat(entry)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()
	if got := c.Stats().BytesWritten; got != size {
		t.Fatalf("entry file %d bytes, the writer counted %d", size, got)
	}
	// The blocks the file holds: its size rounded up to a block, and an indirect block
	// or two — not the step reserved beyond it.
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks > size+1<<20 {
		t.Fatalf("entry of %d bytes holds %d bytes of blocks: the reservation beyond its end was not freed", size, blocks)
	}
	r, err := c.Lookup("group", "file", 0)
	if err != nil || r == nil {
		t.Fatalf("Lookup = %v, %v", r, err)
	}
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)
	if w := h.warnings(); len(w) != 0 {
		t.Fatalf("warnings: %q", w)
	}
}

// TestPreallocate: the reservation grows a step (or the write, if larger) at a time
// ahead of the bytes written, and a refusal turns it off for the entry without failing.
func TestPreallocate(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "e")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := &bgEntry{f: f}
	e.preallocate(10)
	if e.alloc == -1 {
		t.Skip("SKIPPED, not passed: fallocate is refused here")
	}
	for _, tc := range []struct {
		size, n, want int64
	}{
		{0, 10, preallocStep},                 // reserved above
		{preallocStep - 10, 10, preallocStep}, // still within
		{preallocStep - 10, 11, 2 * preallocStep},
		{2 * preallocStep, 3 * preallocStep, 5 * preallocStep}, // a write larger than a step
	} {
		e.size = tc.size
		e.preallocate(tc.n)
		if e.alloc != tc.want {
			t.Fatalf("size %d, write %d: %d bytes reserved, want %d", tc.size, tc.n, e.alloc, tc.want)
		}
	}
	f.Close() // reserving on a closed file fails: no more reserving, no error
	e.size = e.alloc
	e.preallocate(1)
	if e.alloc != -1 {
		t.Fatalf("a refused reservation left alloc %d, want -1", e.alloc)
	}
}
