//go:build !amd64

package video

// hasYUVVector is false: there is no vector YUV conversion here.
const hasYUVVector = false

// rowFast has no vector version on this architecture: row does the work.
func (c *YUV) rowFast(r, g, b, ys, us, vs []byte) int { return 0 }
