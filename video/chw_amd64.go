package video

import "golang.org/x/sys/cpu"

// chwSSSE3 splits blocks×16 packed RGB pixels into planes (chw_amd64.s).
//
//go:noescape
func chwSSSE3(red, green, blue, pix *byte, blocks int, masks *[9][16]byte)

// chwMasks are chwSSSE3's PSHUFB masks: for each channel (R, G, B), which
// byte of each of the three 16-byte loads lands in each output byte (0x80:
// none).
var chwMasks = func() (m [9][16]byte) {
	for c := range 3 {
		for load := range 3 {
			for k := range 16 {
				src := 3*k + c - 16*load // byte of this load holding pixel k's channel c
				if src >= 0 && src < 16 {
					m[3*c+load][k] = byte(src)
				} else {
					m[3*c+load][k] = 0x80
				}
			}
		}
	}
	return m
}()

// hasSSSE3 is whether toCHWFast may run chwSSSE3.
var hasSSSE3 = cpu.X86.HasSSSE3

// toCHWFast splits the first whole blocks of 16 pixels of pix (HWC) into
// r, g, b with SSSE3 when the CPU has it, and returns how many pixels it
// wrote.
func toCHWFast(r, g, b, pix []byte, n int) int {
	blocks := n / 16
	if !hasSSSE3 || blocks == 0 {
		return 0
	}
	_ = pix[48*blocks-1]
	_, _, _ = r[16*blocks-1], g[16*blocks-1], b[16*blocks-1]
	chwSSSE3(&r[0], &g[0], &b[0], &pix[0], blocks, &chwMasks)
	return 16 * blocks
}
