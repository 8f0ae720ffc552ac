package video

import "golang.org/x/sys/cpu"

// yuvRowSSE2 converts blocks×16 pixels of one row (yuv_amd64.s).
//
//go:noescape
func yuvRowSSE2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][16]int16)

// yuvRowsAVX2 converts blocks×32 pixels of two rows sharing a chroma row,
// the second stride bytes after the first (yuv_avx2_amd64.s).
//
//go:noescape
func yuvRowsAVX2(red, green, blue, ys, us, vs *byte, stride, blocks int, k *[7][16]int16)

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

// rowPairFast converts the first pixels of two rows of width w that share
// a chroma row (r, g, b and ys hold both rows, 2w bytes; us and vs w/2) with
// path p — whole blocks of 32 of both rows at once with AVX2, then whole
// blocks of 16 of each row with SSE2 — and returns how many pixels of each
// row it wrote; row does the rest. p must be available (yuvPathAvailable).
func (c *YUV) rowPairFast(p yuvPath, r, g, b, ys, us, vs []byte, w int) int {
	x := 0
	if p == yuvAVX2 {
		if blocks := w / 32; blocks > 0 {
			end := w + 32*blocks // last byte of the second row's blocks, +1
			_, _, _, _ = r[end-1], g[end-1], b[end-1], ys[end-1]
			_, _ = us[16*blocks-1], vs[16*blocks-1]
			yuvRowsAVX2(&r[0], &g[0], &b[0], &ys[0], &us[0], &vs[0], w, blocks, &c.vec)
			x = 32 * blocks
		}
	}
	if p == yuvSSE2 || p == yuvAVX2 {
		if blocks := (w - x) / 16; blocks > 0 {
			end := x + 16*blocks
			_, _ = us[end/2-1], vs[end/2-1]
			for _, o := range [2]int{0, w} {
				_, _, _, _ = r[o+end-1], g[o+end-1], b[o+end-1], ys[o+end-1]
				yuvRowSSE2(&r[o+x], &g[o+x], &b[o+x], &ys[o+x], &us[x/2], &vs[x/2], blocks, &c.vec)
			}
			x = end
		}
	}
	return x
}
