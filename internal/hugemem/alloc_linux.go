package hugemem

import (
	"syscall"
	"unsafe"
)

// mapAnon maps size bytes of zeroed anonymous memory that start on a huge
// page, advised huge, and returns the start and the function that unmaps
// them; nil where the mapping failed.
func mapAnon(size uintptr) (unsafe.Pointer, func()) {
	// One huge page more, so that the array can start on one: the kernel
	// backs only whole, aligned 2 MiB ranges with huge pages.
	m, err := syscall.Mmap(-1, 0, int(size+hugePage), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil
	}
	skip := (hugePage - uintptr(unsafe.Pointer(&m[0]))%hugePage) % hugePage
	a := m[skip : skip+size]
	Advise(a)
	return unsafe.Pointer(&a[0]), func() { _ = syscall.Munmap(m) }
}
