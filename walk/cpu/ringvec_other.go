//go:build !amd64 || purego

package cpu

import "unsafe"

// Without amd64 assembly the ring's rounds run in Go.
const (
	hasRingAVX512 = false
	ringVector    = false
)

func ringFusedAVX512(r *ring, tab unsafe.Pointer, buf unsafe.Pointer, length uint32, keep bool, stopT uint32, wordOff uintptr) uint64 {
	panic("walk: ringFusedAVX512 without AVX-512")
}
