//go:build !linux

package hugemem

import "unsafe"

// mapAnon has no anonymous mapping to offer here: Alloc uses the Go heap.
func mapAnon(size uintptr) (unsafe.Pointer, func()) { return nil, nil }
