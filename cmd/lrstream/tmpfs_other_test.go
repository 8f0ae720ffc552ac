//go:build !linux

package main

import (
	"runtime"
	"testing"
)

// mountTmpfs skips: tmpfs mounts are Linux's.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	t.Skipf("SKIPPED, not passed: no tmpfs to mount on %s; pipeline's TestSpillSpaceStreams covers the accounting with an injected free space", runtime.GOOS)
}
