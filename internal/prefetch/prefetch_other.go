//go:build !amd64 || purego

package prefetch

import "unsafe"

// Rows, where there is no prefetch instruction wrapper, loads the
// first and last byte of each row instead. The loads are independent, so an
// out-of-order core overlaps their misses as it would prefetches; the sum
// only keeps the compiler from dropping them (with noinline: inlined, an
// unused result would let it).
//
//go:noinline
func Rows(base unsafe.Pointer, idx []uint64, size, span uintptr) uint8 {
	var acc uint8
	for _, i := range idx {
		p := unsafe.Add(base, uintptr(i)*size)
		acc ^= *(*uint8)(p) ^ *(*uint8)(unsafe.Add(p, span-1))
	}
	return acc
}

// Lines4 does nothing where there is no prefetch instruction wrapper:
// its addresses may lie outside any object, so they cannot be loaded.
func Lines4(a, b, c, d uintptr) {}
