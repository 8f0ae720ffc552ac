//go:build linux

package framecache

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lrstream/lrstream/internal/fsalloc"
)

// TestPreallocatedEntry: an entry written through the page cache reserves its blocks
// ahead of its writes (writeChunk) — a step at a time, past several steps here — and
// is published cut to its size, the reserved blocks beyond it freed, with every record
// read back as written.
func TestPreallocatedEntry(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	err = fsalloc.Reserve(probe, 0, fsalloc.Step)
	probe.Close()
	if err != nil {
		t.Skipf("SKIPPED, not passed: the file system of %s refuses fallocate (%v): entries are written without reserving there", dir, err)
	}
	c, h := openTest(t, Options{Dir: dir, Codec: "none", Budget: 1 << 30, MaxPending: DefaultMaxPending})
	// 2.5 steps of 480×640 YUV frames.
	n := int(5*fsalloc.Step/2/460_800) + 1
	recs := makeRecords("big.mp4", 0, n, 460_800)
	put(t, c, "group", "file", 0, float64(n), nil, recs)
	c.Flush()
	var entry string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(filepath.Base(p), "-") && !strings.HasSuffix(p, ".tmp") && filepath.Base(p) != filepath.Base(probe.Name()) {
			if st, _ := d.Info(); st != nil && st.Size() > fsalloc.Step {
				entry = p
			}
		}
		return err
	})
	if err != nil || entry == "" {
		t.Fatalf("no published entry of more than %d bytes in %s (%v)", fsalloc.Step, dir, err)
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
