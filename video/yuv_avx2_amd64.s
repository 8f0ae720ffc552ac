#include "textflag.h"

// func yuvRowAVX2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][8]int16)
//
// Converts blocks×32 pixels of one YUV 4:2:0 row (32 Y, 16 U and 16 V bytes
// a block) to the R, G and B planes with yuvRowSSE2's arithmetic, word for
// word (yuv.go, yuv_amd64.s), 16 words a register. k holds the constants
// broadcast to eight words each: yOff, cy, vr, ub, ug, vg, 1024; each is
// loaded into both 128-bit lanes.
//
// No lane-crossing shuffle is needed but the chroma load: the 16 chroma
// samples are zero-extended in order (VPMOVZXBW), so the in-lane
// VPUNPCKLWD/VPUNPCKHWD that duplicate each sample to its two pixels give
// the terms of pixels [0-7 | 16-23] and [8-15 | 24-31]; the luma, unpacked
// in lane (VPUNPCKLBW/VPUNPCKHBW), comes in that same order, and the
// in-lane VPACKUSWB of the two halves puts pixels 0-31 back in order.
TEXT ·yuvRowAVX2(SB), NOSPLIT, $0-64
	MOVQ red+0(FP), DI
	MOVQ green+8(FP), R8
	MOVQ blue+16(FP), R9
	MOVQ ys+24(FP), SI
	MOVQ us+32(FP), R10
	MOVQ vs+40(FP), R11
	MOVQ blocks+48(FP), CX
	MOVQ k+56(FP), AX
	TESTQ CX, CX
	JZ done
	VBROADCASTI128 0(AX), Y8   // yOff
	VBROADCASTI128 16(AX), Y9  // cy
	VBROADCASTI128 32(AX), Y10 // vr
	VBROADCASTI128 48(AX), Y11 // ub
	VBROADCASTI128 64(AX), Y12 // ug
	VBROADCASTI128 80(AX), Y13 // vg
	VBROADCASTI128 96(AX), Y14 // 1024
	VPXOR Y15, Y15, Y15

loop:
	// Chroma: u' = (U<<3) - 1024, v' likewise (16 words each, in order).
	VPMOVZXBW 0(R10), Y1
	VPMOVZXBW 0(R11), Y2
	VPSLLW $3, Y1, Y1
	VPSLLW $3, Y2, Y2
	VPSUBSW Y14, Y1, Y1
	VPSUBSW Y14, Y2, Y2
	VPMULHW Y12, Y1, Y3 // u'*ug
	VPMULHW Y13, Y2, Y4 // v'*vg
	VPADDSW Y4, Y3, Y3  // G chroma term
	VPMULHW Y11, Y1, Y1 // B chroma term: u'*ub
	VPMULHW Y10, Y2, Y2 // R chroma term: v'*vr

	// Luma: y' = ((Y<<3) - yOff) * cy >> 16, pixels [0-7 | 16-23] in Y4,
	// [8-15 | 24-31] in Y0.
	VMOVDQU 0(SI), Y0
	VPUNPCKLBW Y15, Y0, Y4
	VPUNPCKHBW Y15, Y0, Y0
	VPSLLW $3, Y4, Y4
	VPSLLW $3, Y0, Y0
	VPSUBW Y8, Y4, Y4
	VPSUBW Y8, Y0, Y0
	VPMULHW Y9, Y4, Y4
	VPMULHW Y9, Y0, Y0

	// R: each chroma term twice, plus luma, packed with unsigned
	// saturation.
	VPUNPCKLWD Y2, Y2, Y5
	VPUNPCKHWD Y2, Y2, Y2
	VPADDSW Y4, Y5, Y5
	VPADDSW Y0, Y2, Y2
	VPACKUSWB Y2, Y5, Y5
	VMOVDQU Y5, 0(DI)

	// G.
	VPUNPCKLWD Y3, Y3, Y5
	VPUNPCKHWD Y3, Y3, Y3
	VPADDSW Y4, Y5, Y5
	VPADDSW Y0, Y3, Y3
	VPACKUSWB Y3, Y5, Y5
	VMOVDQU Y5, 0(R8)

	// B.
	VPUNPCKLWD Y1, Y1, Y5
	VPUNPCKHWD Y1, Y1, Y1
	VPADDSW Y4, Y5, Y5
	VPADDSW Y0, Y1, Y1
	VPACKUSWB Y1, Y5, Y5
	VMOVDQU Y5, 0(R9)

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
