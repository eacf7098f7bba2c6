//go:build !purego

#include "textflag.h"

// func prefetchRows(base unsafe.Pointer, idx []uint64, size uintptr)
// Issues PREFETCHT0 for base + idx[i]*size, i = 0..len(idx)-1.
TEXT ·prefetchRows(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), BX
	MOVQ idx_base+8(FP), SI
	MOVQ idx_len+16(FP), CX
	MOVQ size+32(FP), DX
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (SI), AX
	IMULQ DX, AX
	PREFETCHT0 (BX)(AX*1)
	ADDQ $8, SI
	DECQ CX
	JNE loop
done:
	RET
