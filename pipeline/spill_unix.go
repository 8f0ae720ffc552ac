//go:build unix

package pipeline

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// freeBytes is the space available to an unprivileged user on the
// filesystem holding dir.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ by OS
}
