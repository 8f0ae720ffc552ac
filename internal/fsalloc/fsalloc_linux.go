package fsalloc

import (
	"os"

	"golang.org/x/sys/unix"
)

// Reserve allocates the blocks of f's bytes [off, off+n) without changing its size
// (fallocate with FALLOC_FL_KEEP_SIZE).
func Reserve(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	cerr := rc.Control(func(fd uintptr) {
		err = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
	})
	if cerr != nil {
		return cerr
	}
	return err
}
