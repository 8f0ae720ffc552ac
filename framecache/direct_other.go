//go:build !linux

package framecache

import (
	"errors"
	"os"
)

// setDirect: O_DIRECT is Linux's; elsewhere entries are written through the
// page cache.
func setDirect(*os.File) bool { return false }

// reserve: fallocate is Linux's; elsewhere entries' blocks are allocated as
// they are written.
func reserve(*os.File, int64, int64) error { return errors.ErrUnsupported }
