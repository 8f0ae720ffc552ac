//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fetch

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock without blocking, as Python's filelock
// (UnixFileLock) does, so lrstream and huggingface_hub exclude each other.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return false, nil
	}
	return false, err
}

func unlock(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
