package framecache

import "golang.org/x/sys/unix"

// threadSleeps returns how many times the calling OS thread has slept (its voluntary
// context switches: waiting for a lock, for I/O, for the kernel's dirty-page
// throttling), not counting the times it was preempted; false where that is unknown.
func threadSleeps() (int64, bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, false
	}
	return ru.Nvcsw, true
}
