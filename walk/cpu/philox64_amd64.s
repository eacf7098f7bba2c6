//go:build !purego

#include "textflag.h"

// Philox4x32-10 on 64 counters at once (AVX-512): four independent chains of
// sixteen lanes, so that each round's multiplies of one chain run while the
// others wait on theirs (a single chain is latency-bound: about 100 cycles
// for ten rounds whatever its width). Chain j holds counter words c0..c3 of
// lanes 16j..16j+15 in Z(4j)..Z(4j+3). Z16/Z17 are the key words, Z18/Z19
// the multipliers, Z20/Z21 the key increments, Z22..Z25 scratch. K1 selects
// the odd 32-bit lanes: VPMULUDQ multiplies even lanes into 64-bit products,
// so each multiply runs twice (even lanes, odd lanes shifted down) and
// VPBLENDMD reassembles the low and high words.

// One round of one chain: c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0.
#define ROUND(a0, a1, a2, a3) \
	VPMULUDQ a0, Z18, Z22 \
	VPSRLQ   $32, a0, Z23 \
	VPMULUDQ Z23, Z18, Z23 \
	VPMULUDQ a2, Z19, Z24 \
	VPSRLQ   $32, a2, Z25 \
	VPMULUDQ Z25, Z19, Z25 \
	VPSRLQ   $32, Z24, a0 \
	VPBLENDMD Z25, a0, K1, a0 \
	VPTERNLOGD $0x96, Z16, a1, a0 \
	VPSRLQ   $32, Z22, a2 \
	VPBLENDMD Z23, a2, K1, a2 \
	VPTERNLOGD $0x96, Z17, a3, a2 \
	VPSLLQ   $32, Z25, a1 \
	VPBLENDMD a1, Z24, K1, a1 \
	VPSLLQ   $32, Z23, a3 \
	VPBLENDMD a3, Z22, K1, a3

#define ROUND4 \
	ROUND(Z0, Z1, Z2, Z3) \
	ROUND(Z4, Z5, Z6, Z7) \
	ROUND(Z8, Z9, Z10, Z11) \
	ROUND(Z12, Z13, Z14, Z15)

// func philox64AVX512(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32)
TEXT ·philox64AVX512(SB), NOSPLIT, $0-48
	MOVQ lo+0(FP), SI
	MOVQ hi+8(FP), DX
	MOVQ c2+16(FP), R8
	MOVQ out+40(FP), DI
	VMOVDQU32 0(SI), Z0
	VMOVDQU32 64(SI), Z4
	VMOVDQU32 128(SI), Z8
	VMOVDQU32 192(SI), Z12
	VMOVDQU32 0(DX), Z1
	VMOVDQU32 64(DX), Z5
	VMOVDQU32 128(DX), Z9
	VMOVDQU32 192(DX), Z13
	VMOVDQU32 0(R8), Z2
	VMOVDQU32 64(R8), Z6
	VMOVDQU32 128(R8), Z10
	VMOVDQU32 192(R8), Z14
	MOVL c3+24(FP), AX
	VPBROADCASTD AX, Z3
	VMOVDQU32 Z3, Z7
	VMOVDQU32 Z3, Z11
	VMOVDQU32 Z3, Z15
	MOVL k0+28(FP), AX
	VPBROADCASTD AX, Z16
	MOVL k1+32(FP), AX
	VPBROADCASTD AX, Z17
	VPBROADCASTD philoxK64<>+0(SB), Z18
	VPBROADCASTD philoxK64<>+4(SB), Z19
	VPBROADCASTD philoxK64<>+8(SB), Z20
	VPBROADCASTD philoxK64<>+12(SB), Z21
	MOVL $0xAAAA, AX
	KMOVW AX, K1
	MOVQ $9, CX
rounds:
	ROUND4
	VPADDD Z20, Z16, Z16
	VPADDD Z21, Z17, Z17
	DECQ CX
	JNE rounds
	ROUND4
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU32 Z4, 64(DI)
	VMOVDQU32 Z8, 128(DI)
	VMOVDQU32 Z12, 192(DI)
	VMOVDQU32 Z1, 256(DI)
	VMOVDQU32 Z5, 320(DI)
	VMOVDQU32 Z9, 384(DI)
	VMOVDQU32 Z13, 448(DI)
	VMOVDQU32 Z2, 512(DI)
	VMOVDQU32 Z6, 576(DI)
	VMOVDQU32 Z10, 640(DI)
	VMOVDQU32 Z14, 704(DI)
	VMOVDQU32 Z3, 768(DI)
	VMOVDQU32 Z7, 832(DI)
	VMOVDQU32 Z11, 896(DI)
	VMOVDQU32 Z15, 960(DI)
	VZEROUPPER
	RET

DATA philoxK64<>+0(SB)/4, $0xD2511F53
DATA philoxK64<>+4(SB)/4, $0xCD9E8D57
DATA philoxK64<>+8(SB)/4, $0x9E3779B9
DATA philoxK64<>+12(SB)/4, $0xBB67AE85
GLOBL philoxK64<>(SB), RODATA|NOPTR, $16
