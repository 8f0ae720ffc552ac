// Package testtmpfs mounts small tmpfs file systems for the tests of a
// full disk (the frame cache's, the shuffle spill's).
package testtmpfs

import "testing"

// Mount mounts a tmpfs with opts (e.g. "size=1m") on dir, unmounted when
// the test ends. Where mounting is not permitted (not root, no
// CAP_SYS_ADMIN, not Linux) it skips the test, saying so plainly and
// naming what covers the case instead (covered).
func Mount(t testing.TB, dir, opts, covered string) {
	t.Helper()
	if err := mount(dir, opts); err != nil {
		t.Skipf("SKIPPED, not passed: cannot mount a tmpfs here (%v); %s", err, covered)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}
