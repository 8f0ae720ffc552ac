#include "textflag.h"

// func yuvRowSSE2(red, green, blue, ys, us, vs *byte, blocks int, k *[7][16]int16)
//
// Converts blocks×16 pixels of one YUV 4:2:0 row (16 Y, 8 U and 8 V bytes a
// block) to the R, G and B planes, with YUV's arithmetic (yuv.go): k holds
// the constants broadcast to sixteen words each (this reads the first
// eight): yOff, cy, vr, ub, ug, vg, 1024. Chroma terms are computed once
// per chroma sample and then duplicated to its two pixels.
TEXT ·yuvRowSSE2(SB), NOSPLIT, $0-64
	MOVQ red+0(FP), DI
	MOVQ green+8(FP), R8
	MOVQ blue+16(FP), R9
	MOVQ ys+24(FP), SI
	MOVQ us+32(FP), R10
	MOVQ vs+40(FP), R11
	MOVQ blocks+48(FP), CX
	MOVQ k+56(FP), AX
	MOVOU 0(AX), X8   // yOff
	MOVOU 32(AX), X9  // cy
	MOVOU 64(AX), X10 // vr
	MOVOU 96(AX), X11 // ub
	MOVOU 128(AX), X12 // ug
	MOVOU 160(AX), X13 // vg
	MOVOU 192(AX), X14 // 1024
	PXOR X15, X15
	TESTQ CX, CX
	JZ done

loop:
	// Chroma: u' = (U<<3) - 1024, v' likewise (8 words each).
	MOVQ 0(R10), X1
	MOVQ 0(R11), X2
	PUNPCKLBW X15, X1
	PUNPCKLBW X15, X2
	PSLLW $3, X1
	PSLLW $3, X2
	PSUBSW X14, X1
	PSUBSW X14, X2
	MOVO X1, X3
	PMULHW X12, X3 // u'*ug
	MOVO X2, X4
	PMULHW X13, X4 // v'*vg
	PADDSW X4, X3  // G chroma term
	PMULHW X11, X1 // B chroma term: u'*ub
	PMULHW X10, X2 // R chroma term: v'*vr

	// Luma: y' = ((Y<<3) - yOff) * cy >> 16, pixels 0-7 in X4, 8-15 in X0.
	MOVOU 0(SI), X0
	MOVO X0, X4
	PUNPCKLBW X15, X4
	PUNPCKHBW X15, X0
	PSLLW $3, X4
	PSLLW $3, X0
	PSUBW X8, X4
	PSUBW X8, X0
	PMULHW X9, X4
	PMULHW X9, X0

	// R: each chroma term twice, plus luma, packed with unsigned
	// saturation.
	MOVO X2, X5
	PUNPCKLWL X2, X5
	PUNPCKHWL X2, X2
	PADDSW X4, X5
	PADDSW X0, X2
	PACKUSWB X2, X5
	MOVOU X5, 0(DI)

	// G.
	MOVO X3, X5
	PUNPCKLWL X3, X5
	PUNPCKHWL X3, X3
	PADDSW X4, X5
	PADDSW X0, X3
	PACKUSWB X3, X5
	MOVOU X5, 0(R8)

	// B.
	MOVO X1, X5
	PUNPCKLWL X1, X5
	PUNPCKHWL X1, X1
	PADDSW X4, X5
	PADDSW X0, X1
	PACKUSWB X1, X5
	MOVOU X5, 0(R9)

	ADDQ $16, SI
	ADDQ $8, R10
	ADDQ $8, R11
	ADDQ $16, DI
	ADDQ $16, R8
	ADDQ $16, R9
	DECQ CX
	JNZ loop

done:
	RET
