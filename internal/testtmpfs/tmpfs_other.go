//go:build !linux

package testtmpfs

import (
	"errors"
	"runtime"
)

func mount(dir, opts string) error { return errors.New("no tmpfs mounts on " + runtime.GOOS) }

func unmount(dir string) error { return nil }
