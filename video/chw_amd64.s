#include "textflag.h"

// func chwSSSE3(red, green, blue, pix *byte, blocks int, masks *[9][16]byte)
//
// Splits blocks×16 packed RGB pixels (48 bytes each block) at pix into the
// planes r, g and b (16 bytes each block): three unaligned 16-byte loads,
// nine PSHUFB (masks: R from the three loads, then G, then B; a mask byte
// with the high bit set yields 0) and six POR per block.
TEXT ·chwSSSE3(SB), NOSPLIT, $0-48
	MOVQ red+0(FP), DI
	MOVQ green+8(FP), R8
	MOVQ blue+16(FP), R9
	MOVQ pix+24(FP), SI
	MOVQ blocks+32(FP), CX
	MOVQ masks+40(FP), AX
	MOVOU 0(AX), X7
	MOVOU 16(AX), X8
	MOVOU 32(AX), X9
	MOVOU 48(AX), X10
	MOVOU 64(AX), X11
	MOVOU 80(AX), X12
	MOVOU 96(AX), X13
	MOVOU 112(AX), X14
	MOVOU 128(AX), X15
	TESTQ CX, CX
	JZ done

loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2

	MOVO X0, X3
	PSHUFB X7, X3
	MOVO X1, X4
	PSHUFB X8, X4
	POR X4, X3
	MOVO X2, X5
	PSHUFB X9, X5
	POR X5, X3
	MOVOU X3, 0(DI)

	MOVO X0, X3
	PSHUFB X10, X3
	MOVO X1, X4
	PSHUFB X11, X4
	POR X4, X3
	MOVO X2, X5
	PSHUFB X12, X5
	POR X5, X3
	MOVOU X3, 0(R8)

	MOVO X0, X3
	PSHUFB X13, X3
	MOVO X1, X4
	PSHUFB X14, X4
	POR X4, X3
	MOVO X2, X5
	PSHUFB X15, X5
	POR X5, X3
	MOVOU X3, 0(R9)

	ADDQ $48, SI
	ADDQ $16, DI
	ADDQ $16, R8
	ADDQ $16, R9
	DECQ CX
	JNZ loop

done:
	RET
