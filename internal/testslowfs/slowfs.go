// Package testslowfs mounts a directory through FUSE with every write slowed
// down, a disk that does not keep up, for the tests of what the frame cache
// does then (internal/testtmpfs is its counterpart for a full disk).
package testslowfs

import (
	"testing"
	"time"
)

// Mount makes mnt show backing's files, each write request (at most 128 KiB
// of a write) taking delay more; unmounted when the test ends. Where FUSE
// cannot be mounted (no /dev/fuse, not root, not Linux) it skips the test,
// saying so plainly and naming what covers the case instead (covered).
func Mount(t testing.TB, mnt, backing string, delay time.Duration, covered string) {
	t.Helper()
	unmount, err := mount(mnt, backing, delay)
	if err != nil {
		t.Skipf("SKIPPED, not passed: cannot mount a FUSE file system here (%v); %s", err, covered)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
}
