//go:build !purego

package prefetch

import "unsafe"

// Rows asks the processor to start loading the span bytes at
// base + idx[i]*size into the cache for every i. A loop that does only this keeps
// every line-fill buffer busy, where a loop that also uses the loaded
// values stalls on them first.
//
//go:noescape
func Rows(base unsafe.Pointer, idx []uint64, size, span uintptr)

// Lines4 asks the processor to start loading the lines at the four
// addresses (uintptr: they may lie outside any object, as a guessed
// record near the end of a table may; a prefetch never faults). One walk's
// lines at a time, issued among the other walks' work, where a burst of a
// group's prefetches fills the line-fill buffers and stalls the loop that
// issues them.
//
//go:noescape
func Lines4(a, b, c, d uintptr)
