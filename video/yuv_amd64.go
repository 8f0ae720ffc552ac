package video

// yuvRowSSE2 converts blocks×16 pixels of one row (yuv_amd64.s).
//
//go:noescape
func yuvRowSSE2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][8]int16)

// hasYUVVector is whether YUV.toCHW may run the SSE2 row conversion:
// every amd64 CPU has SSE2.
const hasYUVVector = true

// rowFast converts the first whole blocks of 16 pixels of a row with SSE2
// and returns how many pixels it wrote.
func (c *YUV) rowFast(r, g, b, ys, us, vs []byte) int {
	blocks := len(ys) / 16
	if blocks == 0 {
		return 0
	}
	_, _, _, _ = r[16*blocks-1], g[16*blocks-1], b[16*blocks-1], ys[16*blocks-1]
	_, _ = us[8*blocks-1], vs[8*blocks-1]
	yuvRowSSE2(&r[0], &g[0], &b[0], &ys[0], &us[0], &vs[0], blocks, &c.vec)
	return 16 * blocks
}
