//go:build !linux

package testslowfs

import (
	"errors"
	"runtime"
	"time"
)

func mount(string, string, time.Duration) (func() error, error) {
	return nil, errors.New("no FUSE mounts on " + runtime.GOOS)
}
