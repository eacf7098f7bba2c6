//go:build !purego

#include "textflag.h"

// func Rows(base unsafe.Pointer, idx []uint64, size, span uintptr)
// Issues PREFETCHT0 for the first and the last byte of the span bytes at
// base + idx[i]*size, i = 0..len(idx)-1 (a row may straddle two lines).
TEXT ·Rows(SB), NOSPLIT, $0-48
	MOVQ base+0(FP), BX
	MOVQ idx_base+8(FP), SI
	MOVQ idx_len+16(FP), CX
	MOVQ size+32(FP), DX
	MOVQ span+40(FP), DI
	DECQ DI
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (SI), AX
	IMULQ DX, AX
	ADDQ BX, AX
	PREFETCHT0 (AX)
	PREFETCHT0 (AX)(DI*1)
	ADDQ $8, SI
	DECQ CX
	JNE loop
done:
	RET

// func Lines4(a, b, c, d uintptr)
// Issues PREFETCHT0 for the four addresses (which may be any: a prefetch
// never faults).
TEXT ·Lines4(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), AX
	PREFETCHT0 (AX)
	MOVQ b+8(FP), AX
	PREFETCHT0 (AX)
	MOVQ c+16(FP), AX
	PREFETCHT0 (AX)
	MOVQ d+24(FP), AX
	PREFETCHT0 (AX)
	RET
