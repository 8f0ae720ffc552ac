package video

import (
	"os"

	"golang.org/x/sys/unix"
)

// framePipeBytes is the kernel buffer asked for the frames' pipe: more than
// a 640×480 RGB frame (921,600 bytes). Linux caps it at
// /proc/sys/fs/pipe-max-size (1 MiB by default) for unprivileged users.
const framePipeBytes = 1 << 20

// growPipe asks the kernel for a pipe buffer of n bytes; on failure (a
// lower pipe-max-size, a per-user pipe quota) the pipe keeps its size,
// which only costs speed.
func growPipe(f *os.File, n int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n)
	})
}
