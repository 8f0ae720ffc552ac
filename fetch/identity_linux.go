//go:build linux

package fetch

import (
	"fmt"
	"os"
	"syscall"
)

// statExtra adds the device, inode and change time to a local file's
// identity: a file replaced by another (rename over it, a copy keeping the
// modification time) changes them.
func statExtra(st os.FileInfo) string {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("\x00%d\x00%d\x00%d.%d", s.Dev, s.Ino, s.Ctim.Sec, s.Ctim.Nsec)
}
