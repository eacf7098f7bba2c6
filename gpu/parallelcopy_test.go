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
		for _, n := range []int64{1, 3, 7, 15, 16, 17, 4095, 4096, 4097, 16*4096 + 7, 1<<20 + 3, 5*copyChunkBytes + 1} {
			src, dst := testBytes(n), make([]byte, n)
			parallelCopy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			if !bytes.Equal(dst, src) {
				t.Errorf("GOMAXPROCS %d, %d bytes: the copy differs", procs, n)
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

// A copy ends once its chunks are copied, whether or not its helpers ever
// ran: with every core busy (the writer encoding a wave) a helper may get
// one only much later, and the copy used to wait for all of them. Helpers
// that start after the copy returned touch nothing.
func TestParallelCopyDoesNotWaitForIdleHelpers(t *testing.T) {
	for _, helpers := range []int{1, 3, 15} {
		n := int64(7*copyChunkBytes + 5)
		src, dst := testBytes(n), make([]byte, n)
		var late []func()
		chunkedCopy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n, helpers, func(f func()) { late = append(late, f) })
		if !bytes.Equal(dst, src) {
			t.Fatalf("%d helpers, none started: the copy differs", helpers)
		}
		if want := min(helpers, 7); len(late) != want {
			t.Errorf("%d helpers for 8 chunks: %d started, want %d", helpers, len(late), want)
		}
		clear(dst)
		for _, f := range late {
			f()
		}
		if bytes.Count(dst, []byte{0}) != len(dst) {
			t.Errorf("%d helpers: a helper that started after the copy wrote to its destination", helpers)
		}
	}
}

func testBytes(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>8)
	}
	return b
}
