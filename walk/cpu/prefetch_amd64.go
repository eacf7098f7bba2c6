//go:build !purego

package cpu

import "unsafe"

// prefetchRows asks the processor to start loading the span bytes at
// base + idx[i]*size into the cache for every i. A loop that does only this keeps
// every line-fill buffer busy, where a loop that also uses the loaded
// values stalls on them first.
//
//go:noescape
func prefetchRows(base unsafe.Pointer, idx []uint64, size, span uintptr)
