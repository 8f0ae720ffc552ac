//go:build !linux

package fsalloc

import (
	"errors"
	"os"
)

// Reserve: fallocate is Linux's; elsewhere blocks are allocated as they are written.
func Reserve(*os.File, int64, int64) error { return errors.ErrUnsupported }
