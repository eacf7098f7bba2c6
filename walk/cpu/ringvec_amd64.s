//go:build !purego

#include "textflag.h"
#include "go_asm.h"

// PREFETCH_LANE prefetches the entry at the table offset stored at off(R12)
// (R12 points at the frame's tmp: through SP, the assembler wrote the load
// at offset 0 as a 32-bit MOVL).
#define PREFETCH_LANE(off) \
	MOVQ off(R12), AX \
	PREFETCHT0 (SI)(AX*1)

// func ringFusedAVX512(r *ring, tab unsafe.Pointer, buf unsafe.Pointer, length uint32, keep bool, stopT uint32, wordOff uintptr) uint64
//
// One round of ring.go's roundFused over all 64 slots, eight at a time in
// vector lanes, for a ring with no empty slot on a fused table under 2^32
// edges. Per block: the resolving lanes (slotDrawn) gather their entry's
// probability, decide keep or alias from the coin exactly as fusedEntry.pick
// (a 24-bit coin over 2^24 against the float32, both exact), gather the
// chosen target's vertex, degree and first edge, step, and scatter the vertex
// into their row; then every lane draws its next entry from the round's
// words and prefetches it. Lanes whose walk ends (its length reached, a
// vertex without edges, or for PPR a stop word x0 below stopT; 0 for
// DeepWalk, which never stops) are returned as bits of the result, for the
// caller to finish; their draw is harmless (a prefetch never faults). The
// column and coin words are the round's words from row wordOff/256 on: x0,
// x1 for DeepWalk (0), x1, x2 for PPR (256).
//
// Registers: DI ring, SI table, DX rows, R8 dword offset of the block, R9
// qword offset, R10 byte offset, R11 result, BX the column words' row, CX
// block shift, R12 the frame slot of the drawn entries' offsets.
// Constants: Y24 slotDrawn, Y26 one (dwords), Z25 one (qwords), Y27 the
// alias target's field offset (16), Y28 the keep target's (4), Y29 the walk
// length, Y30 2^-24, Y31 stopT.
TEXT ·ringFusedAVX512(SB), NOSPLIT, $64-56
	MOVQ r+0(FP), DI
	MOVQ tab+8(FP), SI
	MOVQ buf+16(FP), DX
	MOVL length+24(FP), AX
	VPBROADCASTD AX, Y29
	MOVQ wordOff+40(FP), BX
	LEAQ ring_words(DI)(BX*1), BX
	MOVL stopT+32(FP), AX
	VPBROADCASTD AX, Y31
	MOVL $2, AX
	VPBROADCASTD AX, Y24
	MOVL $1, AX
	VPBROADCASTD AX, Y26
	VPBROADCASTQ AX, Z25
	MOVL $16, AX
	VPBROADCASTD AX, Y27
	MOVL $4, AX
	VPBROADCASTD AX, Y28
	MOVL $0x33800000, AX
	VPBROADCASTD AX, Y30
	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10
	XORQ R11, R11
	XORQ CX, CX

block:
	// K1: the lanes that resolve a drawn step.
	VPMOVZXBD ring_state(DI)(R10*1), Y0
	VPCMPEQD Y24, Y0, K1
	// Z1: byte offset of each lane's drawn entry.
	VMOVDQU64 ring_idx(DI)(R9*1), Z1
	VPSLLQ $5, Z1, Z1
	// K3: the lanes that keep (take to[0]); the rest take the alias.
	KMOVB K1, K3
	CMPB keep+28(FP), $0
	JNE picked
	KMOVB K1, K2
	VPXORD Y2, Y2, Y2
	VPGATHERQD (SI)(Z1*1), K2, Y2
	VMOVDQU32 ring_coin(DI)(R8*1), Y3
	VPSRLD $8, Y3, Y3
	VCVTDQ2PS Y3, Y3
	VMULPS Y30, Y3, Y3
	VCMPPS $1, Y2, Y3, K1, K3

picked:
	// Z5: byte offset of the chosen target's fields (vertex, degree, first edge).
	VMOVDQA32 Y27, Y4
	VMOVDQA32 Y28, K3, Y4
	VPMOVZXDQ Y4, Z4
	VPADDQ Z4, Z1, Z5
	// Y6 degree, Y7 first edge: the slot's own, replaced in resolving lanes.
	VMOVDQU32 ring_deg(DI)(R8*1), Y6
	VMOVDQU64 ring_lo(DI)(R9*1), Z7
	VPMOVQD Z7, Y7
	KMOVB K1, K2
	VPXORD Y8, Y8, Y8
	VPGATHERQD (SI)(Z5*1), K2, Y8
	KMOVB K1, K2
	VPGATHERQD 4(SI)(Z5*1), K2, Y6
	KMOVB K1, K2
	VPGATHERQD 8(SI)(Z5*1), K2, Y7
	// Step and row position of resolving lanes; the vertex into its row.
	VMOVDQU32 ring_step(DI)(R8*1), Y9
	VPADDD Y26, Y9, K1, Y9
	VMOVDQU32 Y9, ring_step(DI)(R8*1)
	VMOVDQU64 ring_pos(DI)(R9*1), Z10
	VPADDQ Z25, Z10, K1, Z10
	VMOVDQU64 Z10, ring_pos(DI)(R9*1)
	KMOVB K1, K2
	VPSCATTERQD Y8, K2, (DX)(Z10*4)
	// Lanes whose walk ends here.
	VPCMPEQD Y29, Y9, K1, K4
	VPTESTNMD Y6, Y6, K1, K5
	KORB K4, K5, K4
	VMOVDQU32 ring_words(DI)(R8*1), Y14
	VPCMPUD $1, Y31, Y14, K1, K5
	KORB K4, K5, K4
	KMOVB K4, AX
	SHLQ CX, AX
	ORQ AX, R11
	// Draw: entry lo + (col*deg)>>32, the coin, counter step+1.
	VPMOVZXDQ (BX)(R8*1), Z11
	VPMOVZXDQ Y6, Z12
	VPMULUDQ Z12, Z11, Z11
	VPSRLQ $32, Z11, Z11
	VPMOVZXDQ Y7, Z7
	VPADDQ Z7, Z11, Z11
	VMOVDQU64 Z11, ring_idx(DI)(R9*1)
	VMOVDQU64 Z7, ring_lo(DI)(R9*1)
	VMOVDQU32 Y6, ring_deg(DI)(R8*1)
	VMOVDQU32 256(BX)(R8*1), Y12
	VMOVDQU32 Y12, ring_coin(DI)(R8*1)
	VPADDD Y26, Y9, Y13
	VMOVDQU32 Y13, ring_ctr(DI)(R8*1)
	MOVQ $0x0202020202020202, AX
	MOVQ AX, ring_state(DI)(R10*1)
	// Prefetch the drawn entries.
	VPSLLQ $5, Z11, Z11
	LEAQ tmp-64(SP), R12
	VMOVDQU64 Z11, (R12)
	PREFETCH_LANE(0)
	PREFETCH_LANE(8)
	PREFETCH_LANE(16)
	PREFETCH_LANE(24)
	PREFETCH_LANE(32)
	PREFETCH_LANE(40)
	PREFETCH_LANE(48)
	PREFETCH_LANE(56)

	ADDQ $32, R8
	ADDQ $64, R9
	ADDQ $8, R10
	ADDQ $8, CX
	CMPQ CX, $64
	JLT block

	VZEROUPPER
	MOVQ R11, ret+48(FP)
	RET

// func cpuidVendor() (ebx, ecx, edx uint32)
TEXT ·cpuidVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL CX, ecx+4(FP)
	MOVL DX, edx+8(FP)
	RET
