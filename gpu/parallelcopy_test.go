package gpu

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"
)

// parallelCopy copies any size, on any number of cores. A piece of fewer
// bytes than cores (the last piece of a staged column, 7 bytes past a
// piece boundary) once gave each core 0 bytes and looped forever.
func TestParallelCopyAnySize(t *testing.T) {
	for _, procs := range []int{1, 2, 16} {
		old := runtime.GOMAXPROCS(procs)
		for _, n := range []int64{1, 3, 7, 15, 16, 17, 4095, 4096, 4097, 16*4096 + 7, 1<<20 + 3} {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i*31 + i>>8)
			}
			dst := make([]byte, n)
			parallelCopy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			if !bytes.Equal(dst, src) {
				t.Errorf("GOMAXPROCS %d, %d bytes: the copy differs", procs, n)
			}
		}
		runtime.GOMAXPROCS(old)
	}
}
