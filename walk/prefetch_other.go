//go:build !amd64 || purego

package walk

import "unsafe"

// prefetchRows is a no-op where there is no prefetch instruction wrapper.
func prefetchRows(base unsafe.Pointer, idx []uint64, size, span uintptr) {}
