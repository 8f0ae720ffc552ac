//go:build !amd64

package video

// hasYUVVector is false: there is no vector YUV conversion here.
const hasYUVVector = false

// yuvBestPath is the scalar loop: there is no vector code here.
const yuvBestPath = yuvScalar

// yuvPathAvailable is whether this CPU can run path p: only the scalar
// loop here.
func yuvPathAvailable(p yuvPath) bool { return p == yuvScalar }

// rowPairFast has no vector version on this architecture: row does the
// work.
func (c *YUV) rowPairFast(p yuvPath, r, g, b, ys, us, vs []byte, w int) int { return 0 }
