//go:build linux

package fsalloc

import (
	"os"
	"syscall"
	"testing"
)

// TestReserver: the reservation grows a Step (or the write, if larger) at a time ahead
// of the bytes written, the blocks are really reserved (the file's size unchanged), and
// a refusal turns it off without failing.
func TestReserver(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "e")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r Reserver
	r.Ahead(f, 0, 10)
	if r.Refused() {
		t.Skip("SKIPPED, not passed: fallocate is refused here")
	}
	for _, tc := range []struct {
		end, n, want int64
	}{
		{0, 10, Step},         // reserved above
		{Step - 10, 10, Step}, // still within
		{Step - 10, 11, 2 * Step},
		{2 * Step, 3 * Step, 5 * Step}, // a write larger than a step
	} {
		r.Ahead(f, tc.end, tc.n)
		if r.Reserved() != tc.want {
			t.Fatalf("end %d, write %d: %d bytes reserved, want %d", tc.end, tc.n, r.Reserved(), tc.want)
		}
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; st.Size() != 0 || blocks < 5*Step {
		t.Fatalf("file of %d bytes holding %d bytes of blocks, want 0 bytes and at least %d reserved", st.Size(), blocks, 5*Step)
	}
	f.Close() // reserving on a closed file fails: no more reserving, no error
	r.Ahead(f, r.Reserved(), 1)
	if !r.Refused() || r.Reserved() != 5*Step {
		t.Fatalf("after a refusal: refused %v, %d reserved; want true and the %d reserved before (the file still holds them)", r.Refused(), r.Reserved(), 5*Step)
	}
	r.Ahead(f, r.Reserved(), Step)
	if r.Reserved() != 5*Step {
		t.Fatalf("a reservation after a refusal: %d reserved, want %d", r.Reserved(), 5*Step)
	}
}
