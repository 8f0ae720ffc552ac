//go:build !amd64

package video

// toCHWFast has no vector version on this architecture: ToCHW's portable
// loop does all the work.
func toCHWFast(r, g, b, pix []byte, n int) int { return 0 }

// hasSSSE3 is false: there is no vector transpose here.
const hasSSSE3 = false
