package hugemem

import (
	"runtime"
	"unsafe"
)

// Alloc returns n zeroed values of T in memory mapped outside the Go heap,
// advised to use huge pages (see Advise). The memory stays valid as long as
// owner is reachable and is unmapped once the collector finds owner
// unreachable, so the caller must not keep the slice, or any part of it,
// beyond owner's life. T must hold no pointers: the collector does not scan
// this memory. Where the mapping fails or the platform has none, the slice
// comes from the Go heap.
//
// Why outside the heap: the collector starts its next cycle when the heap
// has grown to twice what was live after the last one. Graph-sized tables of
// hundreds of MiB inside the heap let the output of a walk engine (hundreds
// of MiB of walks a second, garbage once encoded) grow it by as much again
// before any of it is reused, and every page of that growth is a page fault
// and a page the kernel clears: a fifth of a CPU walk's time on a 1 GiB
// table. Outside, the collector paces by the small heap the walks really
// use, and their memory is reused while it is mapped and still cached.
func Alloc[T any, O any](owner *O, n int) []T {
	if n <= 0 {
		return nil
	}
	var zero T
	p, unmap := mapAnon(uintptr(n) * unsafe.Sizeof(zero))
	if p == nil {
		return make([]T, n)
	}
	runtime.AddCleanup(owner, func(unmap func()) { unmap() }, unmap)
	return unsafe.Slice((*T)(p), n)
}

// Map returns size bytes of zeroed anonymous memory outside the Go heap,
// starting on a huge page and advised huge, and the function that unmaps
// them; nil where the platform has no such mapping or it failed. The
// caller owns its life (the GPU engine page-locks such memory for its
// pinned buffers).
func Map(size uintptr) (unsafe.Pointer, func()) { return mapAnon(size) }
