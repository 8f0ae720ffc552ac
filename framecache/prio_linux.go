package framecache

import "golang.org/x/sys/unix"

// lowerThreadPriority gives the calling OS thread the lowest scheduling priority
// (nice 19: Linux applies it to the thread alone). Best effort.
func lowerThreadPriority() { _ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19) }
