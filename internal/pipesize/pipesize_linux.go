package pipesize

import (
	"os"

	"golang.org/x/sys/unix"
)

// Grow asks the kernel for a buffer of n bytes on the pipe f and reports
// whether it got at least that. Linux caps the size at
// /proc/sys/fs/pipe-max-size (1 MiB by default) for unprivileged users and
// gives the minimum once the user's pipe quota is spent; failing only costs
// speed, so callers ignore it. f that is not a pipe is left alone.
func Grow(f *os.File, n int) bool {
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	got := 0
	_ = rc.Control(func(fd uintptr) {
		got, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n)
	})
	return got >= n
}
