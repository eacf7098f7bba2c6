//go:build !purego

package pages

import "golang.org/x/sys/cpu"

// hasHuffBMI2 says whether huffStreamBMI2 can run here.
var hasHuffBMI2 = cpu.X86.HasBMI2

//go:noescape
func huffStreamBMI2(st *huffStream, lit *byte, pair *uint32, rounds int, dst *byte)
