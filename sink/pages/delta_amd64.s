//go:build !purego

#include "textflag.h"
#include "lanes_amd64.h"

// DELD loads the eight deltas x[k+1]-x[k] of values k..k+7 at byte
// offset off of SI into y.
#define DELD(off, y) \
	VMOVDQU (off+4)(SI), y; \
	VPSUBD off(SI), y, y

// MINI folds miniblock m's 32 deltas (byte offset off) into Y8, the
// running minimum, and its maximum into lane 0 of xm.
#define MINI(off, ym, xm) \
	DELD(off, Y0); \
	DELD(off+32, Y1); \
	DELD(off+64, Y2); \
	DELD(off+96, Y3); \
	VPMINSD Y0, Y8, Y8; \
	VPMINSD Y1, Y8, Y8; \
	VPMINSD Y2, Y8, Y8; \
	VPMINSD Y3, Y8, Y8; \
	VPMAXSD Y1, Y0, ym; \
	VPMAXSD Y2, ym, ym; \
	VPMAXSD Y3, ym, ym; \
	FOLD8(VPMAXSD, ym, xm, X1)

// func dbpPlanAVX2(x *uint32) (mn, mx0, mx1, mx2, mx3 int32)
// x points at 129 values below 2^31, whose 128 deltas fit in int32: it
// returns the smallest delta and each miniblock's (32 deltas) largest.
TEXT ·dbpPlanAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	DELD(0, Y8)
	MINI(0, Y4, X4)
	MINI(128, Y5, X5)
	MINI(256, Y6, X6)
	MINI(384, Y7, X7)
	FOLD8(VPMINSD, Y8, X8, X1)
	VMOVD X8, AX
	MOVL AX, mn+8(FP)
	VMOVD X4, AX
	MOVL AX, mx0+12(FP)
	VMOVD X5, AX
	MOVL AX, mx1+16(FP)
	VMOVD X6, AX
	MOVL AX, mx2+20(FP)
	VMOVD X7, AX
	MOVL AX, mx3+24(FP)
	VZEROUPPER
	RET

// func dbpPackAVX2(dst *byte, x *uint32, base int32, widths uint32, tabs *[33]dbpTab)
// Packs the 128 deltas of the 129 values at x, less base, as four
// miniblocks of 32, miniblock m at the width in byte m of widths (0 to
// 32; each delta less base is below 2^width), one after the other from
// dst, LSB first. It writes up to 32 bytes beyond the 4*width bytes of
// each miniblock (zeros, which the next bytes overwrite).
//
// Eight deltas u0..u7 (a register) become width bytes in three steps:
// pairs u(2j) | u(2j+1)<<w in 64-bit lanes; in each 128-bit lane, the
// pair's two 2w-bit values as one 4w-bit number; and the upper lane's
// number shifted by 4w bits across the register, which the table of the
// width (tabs[w]: where each of its two words goes and by how much) does
// with a permute and a variable shift for the bits that stay in a word
// and one for those that move to the next.
TEXT ·dbpPackAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVL base+16(FP), AX
	VMOVQ AX, X15
	VPBROADCASTD X15, Y15
	MOVL widths+20(FP), DX
	MOVQ tabs+24(FP), R8
	VPXOR Y14, Y14, Y14
	MOVQ $4, R9

mini:
	MOVL DX, BX
	SHRL $8, DX
	ANDL $0xff, BX
	JZ skip
	MOVQ BX, R10
	SHLQ $7, R10
	ADDQ R8, R10
	VMOVDQU 0(R10), Y10
	VMOVDQU 32(R10), Y11
	VMOVDQU 64(R10), Y12
	VMOVDQU 96(R10), Y13
	VMOVQ BX, X9
	LEAQ (BX)(BX*1), AX
	VMOVQ AX, X8
	MOVQ $64, CX
	SUBQ AX, CX
	VMOVQ CX, X7
	MOVQ $4, CX

group:
	VMOVDQU 4(SI), Y0
	VPSUBD (SI), Y0, Y0
	VPSUBD Y15, Y0, Y0
	VPSRLQ $32, Y0, Y1
	VPBLENDD $0xaa, Y14, Y0, Y0
	VPSLLQ X9, Y1, Y1
	VPOR Y1, Y0, Y0            // qword j: u(2j) | u(2j+1)<<w
	VPSRLDQ $8, Y0, Y1
	VPSLLQ X8, Y1, Y1
	VPOR Y1, Y0, Y1
	VPSRLQ X7, Y0, Y2
	VPBLENDD $0xcc, Y2, Y1, Y1 // each lane: its 4w-bit number
	VPBLENDD $0xf0, Y14, Y1, Y3
	VPERMD Y1, Y10, Y4
	VPSLLVQ Y11, Y4, Y4
	VPERMD Y1, Y12, Y5
	VPSRLVQ Y13, Y5, Y5
	VPOR Y4, Y3, Y3
	VPOR Y5, Y3, Y3
	VMOVDQU Y3, (DI)
	ADDQ BX, DI
	ADDQ $32, SI
	DECQ CX
	JNZ group
	JMP next

skip:
	ADDQ $128, SI

next:
	DECQ R9
	JNZ mini
	VZEROUPPER
	RET
