//go:build !purego

#include "textflag.h"
#include "lanes_amd64.h"

// func bounds32AVX2(vals []uint32) (lo, hi uint32)
// len(vals) is a positive multiple of 32. Y0-Y3 hold running minima and
// Y4-Y7 maxima, eight unsigned lanes each; 32 values (128 bytes) a round.
TEXT ·bounds32AVX2(SB), NOSPLIT, $0-32
	MOVQ vals_base+0(FP), SI
	MOVQ vals_len+8(FP), CX
	SHRQ $5, CX
	VPBROADCASTD (SI), Y0
	VMOVDQA Y0, Y1
	VMOVDQA Y0, Y2
	VMOVDQA Y0, Y3
	VMOVDQA Y0, Y4
	VMOVDQA Y0, Y5
	VMOVDQA Y0, Y6
	VMOVDQA Y0, Y7

loop:
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	VMOVDQU 64(SI), Y10
	VMOVDQU 96(SI), Y11
	VPMINUD Y8, Y0, Y0
	VPMAXUD Y8, Y4, Y4
	VPMINUD Y9, Y1, Y1
	VPMAXUD Y9, Y5, Y5
	VPMINUD Y10, Y2, Y2
	VPMAXUD Y10, Y6, Y6
	VPMINUD Y11, Y3, Y3
	VPMAXUD Y11, Y7, Y7
	ADDQ $128, SI
	DECQ CX
	JNZ loop

	// Fold the four registers, then the eight lanes.
	VPMINUD Y1, Y0, Y0
	VPMINUD Y3, Y2, Y2
	VPMINUD Y2, Y0, Y0
	VPMAXUD Y5, Y4, Y4
	VPMAXUD Y7, Y6, Y6
	VPMAXUD Y6, Y4, Y4
	FOLD8(VPMINUD, Y0, X0, X1)
	FOLD8(VPMAXUD, Y4, X4, X5)
	VMOVD X0, AX
	VMOVD X4, BX
	VZEROUPPER
	MOVL AX, lo+24(FP)
	MOVL BX, hi+28(FP)
	RET
