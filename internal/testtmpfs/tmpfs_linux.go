//go:build linux

package testtmpfs

import "golang.org/x/sys/unix"

func mount(dir, opts string) error { return unix.Mount("tmpfs", dir, "tmpfs", 0, opts) }

func unmount(dir string) error { return unix.Unmount(dir, unix.MNT_DETACH) }
