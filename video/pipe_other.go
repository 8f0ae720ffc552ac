//go:build !linux

package video

import "os"

// framePipeBytes is unused where pipes cannot be resized.
const framePipeBytes = 0

// growPipe does nothing: only Linux resizes pipes.
func growPipe(*os.File, int) {}
