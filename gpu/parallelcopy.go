package gpu

import (
	"runtime"
	"sync"
	"unsafe"
)

// parallelCopy copies n bytes from src to dst on every core (the pinned
// staging's copy out, stagedcopy_cuda.go), in parts of whole pages: at
// least one page each, since a copy of fewer bytes than cores rounded to
// parts of 0 bytes and never ended.
func parallelCopy(dst, src unsafe.Pointer, n int64) {
	parts := int64(runtime.GOMAXPROCS(0))
	per := max(4096, (n/parts+4095)&^4095)
	var wg sync.WaitGroup
	for off := int64(0); off < n; off += per {
		size := min(per, n-off)
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), size), unsafe.Slice((*byte)(unsafe.Add(src, off)), size))
		}()
	}
	wg.Wait()
}
