// Package hugemem asks the kernel to back large, randomly accessed arrays
// with transparent huge pages.
//
// A random walk touches one random element of a graph array per step. With
// 4 KiB pages, arrays of hundreds of MiB overflow the TLB, so nearly every
// step also pays a page-table walk; with 2 MiB pages the same arrays fit
// the second-level TLB. Linux defaults transparent huge pages to "madvise",
// and the Go runtime does not ask for them, so the arrays that the walkers
// index at random ask explicitly. It is advice: where the kernel refuses
// (other systems, THP "never"), nothing changes but speed.
package hugemem

import "unsafe"

// hugePage is the x86-64 and arm64 (4 KiB granule) transparent huge page.
const hugePage = 2 << 20

// Advise advises huge pages for the whole 2 MiB pages inside s. Call it
// before the memory is first written: the kernel then faults huge pages in
// directly instead of waiting for khugepaged to collapse small ones.
func Advise[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	size := uintptr(len(s)) * unsafe.Sizeof(zero)
	if size < 2*hugePage {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (start + hugePage - 1) &^ (hugePage - 1)
	hi := (start + size) &^ (hugePage - 1)
	if hi <= lo {
		return
	}
	advise(lo, hi-lo)
}
