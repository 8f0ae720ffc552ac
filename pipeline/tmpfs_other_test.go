//go:build !linux

package pipeline

import (
	"runtime"
	"testing"
)

// mountTmpfs skips: tmpfs mounts are Linux's.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	t.Skipf("SKIPPED, not passed: no tmpfs to mount on %s; the injected free-space cases cover the check", runtime.GOOS)
	return ""
}
