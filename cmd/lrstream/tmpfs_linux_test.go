package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs with the given options (e.g. "size=1m") on
// dir, unmounted at the end of the test; it skips the test, saying why,
// where mounting is not permitted (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("SKIPPED, not passed: cannot mount a tmpfs here (%v); pipeline's TestSpillSpaceStreams covers the accounting with an injected free space", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}
