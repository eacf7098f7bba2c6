//go:build !purego

#include "textflag.h"

// Philox4x32-10 on eight counters at once (AVX2), the lanes of the YMM
// registers: Y0..Y3 the counter words c0..c3 of eight walks, Y4/Y5 the key
// words, Y14/Y15 the multipliers, Y12/Y13 the key increments. VPMULUDQ
// multiplies the even 32-bit lanes into 64-bit products, so each multiply
// runs twice (even lanes, then odd lanes shifted down) and VPBLENDD
// reassembles the low and high halves into eight-lane vectors.

// MULHILO: Y(lo), Y(hi) = low and high words of Y(c) * Y(m), eight lanes.
// Clobbers Y6, Y7.
#define MULHILO(c, m, lo, hi) \
	VPMULUDQ c, m, Y6 \
	VPSRLQ   $32, c, Y7 \
	VPMULUDQ Y7, m, Y7 \
	VPSLLQ   $32, Y7, lo \
	VPBLENDD $0xAA, lo, Y6, lo \
	VPSRLQ   $32, Y6, Y6 \
	VPBLENDD $0xAA, Y7, Y6, hi

// One round: c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0.
#define PHILOX_ROUND \
	MULHILO(Y0, Y14, Y8, Y9) \
	MULHILO(Y2, Y15, Y10, Y11) \
	VPXOR Y11, Y1, Y0 \
	VPXOR Y0, Y4, Y0 \
	VPXOR Y9, Y3, Y2 \
	VPXOR Y2, Y5, Y2 \
	VMOVDQU Y10, Y1 \
	VMOVDQU Y8, Y3

#define PHILOX_BUMP \
	VPADDD Y12, Y4, Y4 \
	VPADDD Y13, Y5, Y5

// BROADCAST: all eight 32-bit lanes of Y(y) = the 32-bit word src.
#define BROADCAST(src, x, y) \
	MOVL src, AX \
	MOVQ AX, x \
	VPBROADCASTD x, y

// func philox8AVX2(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32)
TEXT ·philox8AVX2(SB), NOSPLIT, $0-40
	MOVQ lo+0(FP), SI
	MOVQ hi+8(FP), DX
	MOVQ out+32(FP), DI
	VMOVDQU (SI), Y0
	VMOVDQU (DX), Y1
	BROADCAST(c2+16(FP), X2, Y2)
	BROADCAST(c3+20(FP), X3, Y3)
	BROADCAST(k0+24(FP), X4, Y4)
	BROADCAST(k1+28(FP), X5, Y5)
	BROADCAST($0xD2511F53, X14, Y14)
	BROADCAST($0xCD9E8D57, X15, Y15)
	BROADCAST($0x9E3779B9, X12, Y12)
	BROADCAST($0xBB67AE85, X13, Y13)
	// Rounds 1-9 each followed by the key bump, then round 10.
	MOVQ $9, CX
rounds:
	PHILOX_ROUND
	PHILOX_BUMP
	DECQ CX
	JNE rounds
	PHILOX_ROUND
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	VZEROUPPER
	RET
