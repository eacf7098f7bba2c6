//go:build !purego

#include "textflag.h"

// PAIR adds the pair table entry in e (the codes of two symbols, bits 8
// and up, and their length, the low byte) to the bit container R10 (R11
// bits in it); DI is scratch.
#define PAIR(e) \
	MOVL e, DI \
	SHRL $8, DI \
	SHLXQ R11, DI, DI \
	ORQ DI, R10 \
	MOVBLZX e, e \
	ADDQ e, R11

// func huffStreamBMI2(st *huffStream, lit *byte, pair *uint32, rounds int, dst *byte)
//
// The main loop of huffEncoder.streams4 for one stream: rounds times, the
// four symbols before st.end in lit, as the pairs (3, 2) and (1, 0), then
// a flush of the whole bytes to dst at st.pos. A pair's table index is its
// two bytes read as one little-endian 16-bit load (pairTable), so a round
// takes two loads where extracting four bytes from one took nine
// instructions more. SHLX and SHRX shift by any register: Go's shifts by a
// variable go through CL, and its version of this loop kept its state in
// memory.
// Registers: SI lit, R8 pair, CX rounds, DX dst, R10 bits, R11 their
// count, R12 pos, R13 end; AX, BX, DI scratch.
TEXT ·huffStreamBMI2(SB), NOSPLIT, $0-40
	MOVQ st+0(FP), DI
	MOVQ lit+8(FP), SI
	MOVQ pair+16(FP), R8
	MOVQ rounds+24(FP), CX
	MOVQ dst+32(FP), DX
	MOVQ 0(DI), R10
	MOVQ 8(DI), R11
	MOVQ 16(DI), R12
	MOVQ 24(DI), R13
	TESTQ CX, CX
	JEQ done

loop:
	MOVWLZX -2(SI)(R13*1), BX
	MOVWLZX -4(SI)(R13*1), AX
	MOVL (R8)(BX*4), BX
	MOVL (R8)(AX*4), AX
	PAIR(BX)
	PAIR(AX)
	MOVQ R10, (DX)(R12*1)
	MOVQ R11, AX
	SHRQ $3, AX
	ADDQ AX, R12
	MOVQ R11, AX
	ANDQ $56, AX
	SHRXQ AX, R10, R10
	ANDQ $7, R11
	SUBQ $4, R13
	DECQ CX
	JNE loop

done:
	MOVQ st+0(FP), DI
	MOVQ R10, 0(DI)
	MOVQ R11, 8(DI)
	MOVQ R12, 16(DI)
	MOVQ R13, 24(DI)
	RET
