package framecache

import (
	"os"

	"golang.org/x/sys/unix"
)

// setDirect turns on O_DIRECT for f, whose writes then bypass the page cache
// (direct.go); false where the file system refuses it (tmpfs, some FUSE and
// network file systems), and f is left as it was.
func setDirect(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			return
		}
		_, err = unix.FcntlInt(fd, unix.F_SETFL, flags|unix.O_DIRECT)
		ok = err == nil
	})
	return ok
}
