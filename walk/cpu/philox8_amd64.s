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

// Arguments reach the vector unit through VMOVD and the constants are
// broadcast from memory: every instruction here is VEX-encoded.
// A legacy-SSE instruction among them (MOVQ into an X register, as an
// earlier version used to reach VPBROADCASTD) made each call take about
// 2 us instead of 70 ns on an Intel Xeon (Sapphire Rapids class, under
// KVM): the SSE/AVX transition penalty. TestPhilox8IsVEXOnly keeps it out.
DATA philoxK<>+0(SB)/4, $0xD2511F53
DATA philoxK<>+4(SB)/4, $0xCD9E8D57
DATA philoxK<>+8(SB)/4, $0x9E3779B9
DATA philoxK<>+12(SB)/4, $0xBB67AE85
GLOBL philoxK<>(SB), RODATA|NOPTR, $16

// func philox8AVX2(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32)
TEXT ·philox8AVX2(SB), NOSPLIT, $0-40
	MOVQ lo+0(FP), SI
	MOVQ hi+8(FP), DX
	MOVQ out+32(FP), DI
	VMOVDQU (SI), Y0
	VMOVDQU (DX), Y1
	MOVL c2+16(FP), AX
	VMOVD AX, X2
	VPBROADCASTD X2, Y2
	MOVL c3+20(FP), AX
	VMOVD AX, X3
	VPBROADCASTD X3, Y3
	MOVL k0+24(FP), AX
	VMOVD AX, X4
	VPBROADCASTD X4, Y4
	MOVL k1+28(FP), AX
	VMOVD AX, X5
	VPBROADCASTD X5, Y5
	VPBROADCASTD philoxK<>+0(SB), Y14
	VPBROADCASTD philoxK<>+4(SB), Y15
	VPBROADCASTD philoxK<>+8(SB), Y12
	VPBROADCASTD philoxK<>+12(SB), Y13
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

// func philox8StepsAVX2(lo, hi, c2 *[8]uint32, c3, k0, k1 uint32, out *[4][8]uint32)
// philox8AVX2 with a counter word c2 of its own in each lane: the ring
// walker's lanes are walks at different steps.
TEXT ·philox8StepsAVX2(SB), NOSPLIT, $0-48
	MOVQ lo+0(FP), SI
	MOVQ hi+8(FP), DX
	MOVQ c2+16(FP), R8
	MOVQ out+40(FP), DI
	VMOVDQU (SI), Y0
	VMOVDQU (DX), Y1
	VMOVDQU (R8), Y2
	MOVL c3+24(FP), AX
	VMOVD AX, X3
	VPBROADCASTD X3, Y3
	MOVL k0+28(FP), AX
	VMOVD AX, X4
	VPBROADCASTD X4, Y4
	MOVL k1+32(FP), AX
	VMOVD AX, X5
	VPBROADCASTD X5, Y5
	VPBROADCASTD philoxK<>+0(SB), Y14
	VPBROADCASTD philoxK<>+4(SB), Y15
	VPBROADCASTD philoxK<>+8(SB), Y12
	VPBROADCASTD philoxK<>+12(SB), Y13
	MOVQ $9, CX
steprounds:
	PHILOX_ROUND
	PHILOX_BUMP
	DECQ CX
	JNE steprounds
	PHILOX_ROUND
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	VZEROUPPER
	RET
