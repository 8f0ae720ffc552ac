//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package framecache

import "errors"

// lockFile is a no-op where flock is unavailable: two processes may then evict at the
// same time, which removes more entries than needed but never serves a bad one.
func lockFile(string) (func(), error) { return func() {}, nil }

// freeBytes is unknown here: DefaultBudget then falls back to its floor.
func freeBytes(string) (int64, error) { return 0, errors.New("free space unknown on this system") }
