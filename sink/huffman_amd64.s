//go:build !purego

#include "textflag.h"

// PAIR adds the code of the symbol pair (hi, lo) to the bit container R10
// (R11 bits in it): the pair table entry at hi<<R9 | lo holds the codes
// (bits 8 and up, lo's above hi's) and their length (low byte).
#define PAIR(hi, lo) \
	SHLXQ R9, hi, hi \
	ORQ lo, hi \
	MOVL (R8)(hi*4), hi \
	MOVL hi, lo \
	SHRL $8, lo \
	SHLXQ R11, lo, lo \
	ORQ lo, R10 \
	MOVBLZX hi, hi \
	ADDQ hi, R11

// func huffStreamBMI2(st *huffStream, lit *byte, pair *uint32, shift uint64, rounds int, dst *byte)
//
// The main loop of huffEncoder.streams4 for one stream: rounds times, the
// four symbols before st.end in lit, as the pairs (3, 2) and (1, 0), then
// a flush of the whole bytes to dst at st.pos. SHLX and SHRX shift by any
// register: Go's shifts by a variable go through CL, and its version of
// this loop kept its state in memory.
// Registers: SI lit, R8 pair, R9 shift, CX rounds, DX dst, R10 bits, R11
// their count, R12 pos, R13 end; AX, BX, DI scratch.
TEXT ·huffStreamBMI2(SB), NOSPLIT, $0-48
	MOVQ st+0(FP), DI
	MOVQ lit+8(FP), SI
	MOVQ pair+16(FP), R8
	MOVQ shift+24(FP), R9
	MOVQ rounds+32(FP), CX
	MOVQ dst+40(FP), DX
	MOVQ 0(DI), R10
	MOVQ 8(DI), R11
	MOVQ 16(DI), R12
	MOVQ 24(DI), R13
	TESTQ CX, CX
	JEQ done

loop:
	MOVL -4(SI)(R13*1), AX
	MOVL AX, BX
	SHRL $24, BX
	MOVL AX, DI
	SHRL $16, DI
	ANDL $0xff, DI
	PAIR(BX, DI)
	MOVL AX, BX
	SHRL $8, BX
	ANDL $0xff, BX
	ANDL $0xff, AX
	PAIR(BX, AX)
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
