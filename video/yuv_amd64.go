package video

import "golang.org/x/sys/cpu"

// yuvRowSSE2 converts blocks×16 pixels of one row (yuv_amd64.s).
//
//go:noescape
func yuvRowSSE2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][8]int16)

// yuvRowAVX2 converts blocks×32 pixels of one row (yuv_avx2_amd64.s).
//
//go:noescape
func yuvRowAVX2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][8]int16)

// hasYUVVector is whether YUV.toCHW may run vector row conversions: every
// amd64 CPU has SSE2.
const hasYUVVector = true

// yuvBestPath is the fastest row conversion this CPU runs: AVX2 when it
// has it (and the OS saves its registers, which x/sys/cpu checks), SSE2
// otherwise.
var yuvBestPath = func() yuvPath {
	if cpu.X86.HasAVX2 {
		return yuvAVX2
	}
	return yuvSSE2
}()

// yuvPathAvailable is whether this CPU can run path p.
func yuvPathAvailable(p yuvPath) bool {
	switch p {
	case yuvScalar, yuvSSE2:
		return true
	case yuvAVX2:
		return cpu.X86.HasAVX2
	}
	return false
}

// rowFast converts the first pixels of a row with path p — whole blocks of
// 32 with AVX2, then whole blocks of 16 with SSE2 — and returns how many
// pixels it wrote; row does the rest. p must be available
// (yuvPathAvailable).
func (c *YUV) rowFast(p yuvPath, r, g, b, ys, us, vs []byte) int {
	x := 0
	if p == yuvAVX2 {
		if blocks := len(ys) / 32; blocks > 0 {
			_, _, _, _ = r[32*blocks-1], g[32*blocks-1], b[32*blocks-1], ys[32*blocks-1]
			_, _ = us[16*blocks-1], vs[16*blocks-1]
			yuvRowAVX2(&r[0], &g[0], &b[0], &ys[0], &us[0], &vs[0], blocks, &c.vec)
			x = 32 * blocks
		}
	}
	if p == yuvSSE2 || p == yuvAVX2 {
		if blocks := (len(ys) - x) / 16; blocks > 0 {
			end := x + 16*blocks
			_, _, _, _ = r[end-1], g[end-1], b[end-1], ys[end-1]
			_, _ = us[end/2-1], vs[end/2-1]
			yuvRowSSE2(&r[x], &g[x], &b[x], &ys[x], &us[x/2], &vs[x/2], blocks, &c.vec)
			x = end
		}
	}
	return x
}
