//go:build !purego

#include "textflag.h"
#include "lanes_amd64.h"

// In each 128-bit lane, the bytes of four 32-bit values regrouped by byte
// position: b0 of the four, then b1, b2, b3.
DATA splitShuf<>+0(SB)/8, $0x0d0905010c080400
DATA splitShuf<>+8(SB)/8, $0x0f0b07030e0a0602
DATA splitShuf<>+16(SB)/8, $0x0d0905010c080400
DATA splitShuf<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL splitShuf<>(SB), RODATA|NOPTR, $32

// Dwords 0,4,1,5,2,6,3,7: after the shuffle, quadword k holds byte k of
// all eight values.
DATA splitPerm<>+0(SB)/8, $0x0000000400000000
DATA splitPerm<>+8(SB)/8, $0x0000000500000001
DATA splitPerm<>+16(SB)/8, $0x0000000600000002
DATA splitPerm<>+24(SB)/8, $0x0000000700000003
GLOBL splitPerm<>(SB), RODATA|NOPTR, $32

// func split4AVX2(d0, d1, d2, d3 *byte, src []uint32) (lo, hi uint32)
// len(src) is a positive multiple of 32; byte k of src[i] goes to dk[i]
// (BYTE_STREAM_SPLIT of 32-bit values, each stream where the caller wants
// it: one after the other, or inside a zstd frame's raw blocks).
// Y6 and Y7 keep the running minima and maxima. 32 values a round: four
// registers regrouped, then interleaved into one 32-byte store per stream.
TEXT ·split4AVX2(SB), NOSPLIT, $0-64
	MOVQ d0+0(FP), DI
	MOVQ d1+8(FP), R9
	MOVQ d2+16(FP), R10
	MOVQ d3+24(FP), R11
	MOVQ src_base+32(FP), SI
	MOVQ src_len+40(FP), CX
	SHRQ $5, CX
	VMOVDQU splitShuf<>(SB), Y4
	VMOVDQU splitPerm<>(SB), Y5
	VPBROADCASTD (SI), Y6
	VMOVDQA Y6, Y7
	XORQ AX, AX

loop:
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPMINUD Y0, Y6, Y6
	VPMAXUD Y0, Y7, Y7
	VPMINUD Y1, Y6, Y6
	VPMAXUD Y1, Y7, Y7
	VPMINUD Y2, Y6, Y6
	VPMAXUD Y2, Y7, Y7
	VPMINUD Y3, Y6, Y6
	VPMAXUD Y3, Y7, Y7
	VPSHUFB Y4, Y0, Y0
	VPSHUFB Y4, Y1, Y1
	VPSHUFB Y4, Y2, Y2
	VPSHUFB Y4, Y3, Y3
	VPERMD Y0, Y5, Y0
	VPERMD Y1, Y5, Y1
	VPERMD Y2, Y5, Y2
	VPERMD Y3, Y5, Y3
	// Quadword k of Y0-Y3 is stream k's 8 bytes of each register.
	VPUNPCKLQDQ Y1, Y0, Y8  // lanes: [0.q0 1.q0] [0.q2 1.q2]
	VPUNPCKHQDQ Y1, Y0, Y9  // [0.q1 1.q1] [0.q3 1.q3]
	VPUNPCKLQDQ Y3, Y2, Y10 // [2.q0 3.q0] [2.q2 3.q2]
	VPUNPCKHQDQ Y3, Y2, Y11 // [2.q1 3.q1] [2.q3 3.q3]
	VPERM2I128 $0x20, Y10, Y8, Y12
	VPERM2I128 $0x20, Y11, Y9, Y13
	VPERM2I128 $0x31, Y10, Y8, Y14
	VPERM2I128 $0x31, Y11, Y9, Y15
	VMOVDQU Y12, (DI)(AX*1)
	VMOVDQU Y13, (R9)(AX*1)
	VMOVDQU Y14, (R10)(AX*1)
	VMOVDQU Y15, (R11)(AX*1)
	ADDQ $128, SI
	ADDQ $32, AX
	DECQ CX
	JNZ loop

	FOLD8(VPMINUD, Y6, X6, X1)
	FOLD8(VPMAXUD, Y7, X7, X1)
	VMOVD X6, AX
	VMOVD X7, BX
	VZEROUPPER
	MOVL AX, lo+56(FP)
	MOVL BX, hi+60(FP)
	RET
