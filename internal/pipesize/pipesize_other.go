//go:build !linux

package pipesize

import "os"

// Grow does nothing and reports false: only Linux resizes pipes.
func Grow(*os.File, int) bool { return false }
