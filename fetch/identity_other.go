//go:build !linux

package fetch

import "os"

// statExtra adds nothing where the stat fields are not portable.
func statExtra(os.FileInfo) string { return "" }
