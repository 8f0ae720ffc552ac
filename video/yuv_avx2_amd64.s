#include "textflag.h"

// ROW converts the 32 pixels of one row at Y address y to R, G and B
// addresses r, g, b, with the chroma terms in Y1-Y6 (yuvRowsAVX2's loop).
// Luma: y' = ((Y<<3) - yOff) * cy >> 16, pixels [0-7 | 16-23] in Y7,
// [8-15 | 24-31] in Y0; then each channel's chroma term plus luma, packed
// with unsigned saturation.
#define ROW(y, r, g, b) \
	VMOVDQU y, Y0 \
	VPUNPCKLBW Y15, Y0, Y7 \
	VPUNPCKHBW Y15, Y0, Y0 \
	VPSLLW $3, Y7, Y7 \
	VPSLLW $3, Y0, Y0 \
	VPSUBW Y8, Y7, Y7 \
	VPSUBW Y8, Y0, Y0 \
	VPMULHW Y9, Y7, Y7 \
	VPMULHW Y9, Y0, Y0 \
	VPADDSW Y4, Y7, Y10 \
	VPADDSW Y2, Y0, Y11 \
	VPACKUSWB Y11, Y10, Y10 \
	VMOVDQU Y10, r \
	VPADDSW Y5, Y7, Y10 \
	VPADDSW Y3, Y0, Y11 \
	VPACKUSWB Y11, Y10, Y10 \
	VMOVDQU Y10, g \
	VPADDSW Y6, Y7, Y10 \
	VPADDSW Y1, Y0, Y11 \
	VPACKUSWB Y11, Y10, Y10 \
	VMOVDQU Y10, b

// func yuvRowsAVX2(red, green, blue, ys, us, vs *byte, stride, blocks int, k *[7][16]int16)
//
// Converts blocks×32 pixels of the two rows of YUV 4:2:0 that share one
// chroma row — at red, green, blue and ys, and stride bytes further — to
// the R, G and B planes, with yuvRowSSE2's arithmetic word for word
// (yuv.go, yuv_amd64.s), 16 words a register. A block reads 2×32 Y, 16 U
// and 16 V bytes; its chroma terms are computed once for both rows. k holds
// the constants broadcast to sixteen words each: yOff, cy, vr, ub, ug, vg,
// 1024 (yOff and cy in registers, the others read from memory where used).
//
// No lane-crossing shuffle is needed but the chroma load: the 16 chroma
// samples are zero-extended in order (VPMOVZXBW), so the in-lane
// VPUNPCKLWD/VPUNPCKHWD that duplicate each sample to its two pixels give
// the terms of pixels [0-7 | 16-23] and [8-15 | 24-31]; the luma, unpacked
// in lane (VPUNPCKLBW/VPUNPCKHBW), comes in that same order, and the
// in-lane VPACKUSWB of the two halves puts pixels 0-31 back in order.
TEXT ·yuvRowsAVX2(SB), NOSPLIT, $0-72
	MOVQ red+0(FP), DI
	MOVQ green+8(FP), R8
	MOVQ blue+16(FP), R9
	MOVQ ys+24(FP), SI
	MOVQ us+32(FP), R10
	MOVQ vs+40(FP), R11
	MOVQ stride+48(FP), DX
	MOVQ blocks+56(FP), CX
	MOVQ k+64(FP), AX
	TESTQ CX, CX
	JZ done
	VMOVDQU 0(AX), Y8  // yOff
	VMOVDQU 32(AX), Y9 // cy
	VPXOR Y15, Y15, Y15

loop:
	// Chroma: u' = (U<<3) - 1024, v' likewise (16 words each, in order).
	VPMOVZXBW 0(R10), Y1
	VPMOVZXBW 0(R11), Y2
	VPSLLW $3, Y1, Y1
	VPSLLW $3, Y2, Y2
	VPSUBSW 192(AX), Y1, Y1
	VPSUBSW 192(AX), Y2, Y2
	VPMULHW 128(AX), Y1, Y3 // u'*ug
	VPMULHW 160(AX), Y2, Y4 // v'*vg
	VPADDSW Y4, Y3, Y3      // G chroma term
	VPMULHW 96(AX), Y1, Y1  // B chroma term: u'*ub
	VPMULHW 64(AX), Y2, Y2  // R chroma term: v'*vr

	// Each chroma term twice: pixels [0-7 | 16-23] in Y4 (R), Y5 (G),
	// Y6 (B); pixels [8-15 | 24-31] in Y2 (R), Y3 (G), Y1 (B).
	VPUNPCKLWD Y2, Y2, Y4
	VPUNPCKHWD Y2, Y2, Y2
	VPUNPCKLWD Y3, Y3, Y5
	VPUNPCKHWD Y3, Y3, Y3
	VPUNPCKLWD Y1, Y1, Y6
	VPUNPCKHWD Y1, Y1, Y1

	// The first row, then the second, stride bytes further.
	ROW(0(SI), 0(DI), 0(R8), 0(R9))
	ROW(0(SI)(DX*1), 0(DI)(DX*1), 0(R8)(DX*1), 0(R9)(DX*1))

	ADDQ $32, SI
	ADDQ $16, R10
	ADDQ $16, R11
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ loop
	VZEROUPPER

done:
	RET
