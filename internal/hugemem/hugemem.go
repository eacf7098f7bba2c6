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
	lo, hi := wholePages(uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(zero))
	if hi > lo {
		_ = advise(lo, hi-lo) // advice: a refusal only costs speed
	}
}

// wholePages is the range of whole huge pages inside [start, start+size);
// empty (hi <= lo) when there is none, or when the array is under two huge
// pages and the advice would not pay for the system call.
func wholePages(start, size uintptr) (lo, hi uintptr) {
	if size < 2*hugePage {
		return 0, 0
	}
	return (start + hugePage - 1) &^ (hugePage - 1), (start + size) &^ (hugePage - 1)
}
