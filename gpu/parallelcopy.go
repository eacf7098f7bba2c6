package gpu

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// copyChunkBytes is the part of a parallelCopy one goroutine takes at a
// time: small enough that a piece of a staged copy (4 MiB or more) feeds
// every core, large enough that taking one costs nothing next to copying it.
const copyChunkBytes = 256 << 10

// parallelCopy copies n bytes from src to dst on up to GOMAXPROCS cores
// (the pinned staging's copy out, stagedcopy_cuda.go): the caller copies
// chunks itself while helper goroutines take the others as they get a
// core. It returns once every chunk is copied, without waiting for a
// helper that never started: under `walkstage walk` the writer's encoders
// hold every core, and a copy that waited for all its goroutines to be
// scheduled held the device thread for each piece.
func parallelCopy(dst, src unsafe.Pointer, n int64) {
	chunkedCopy(dst, src, n, runtime.GOMAXPROCS(0)-1, func(f func()) { go f() })
}

// chunkedCopy is parallelCopy with helpers goroutines started by spawn
// (tests pass one that starts them late, or never). A helper that starts
// after the last chunk was taken returns without touching dst or src.
func chunkedCopy(dst, src unsafe.Pointer, n int64, helpers int, spawn func(func())) {
	if n <= 0 {
		return
	}
	chunks := (n + copyChunkBytes - 1) / copyChunkBytes
	var next, done atomic.Int64
	finished := make(chan struct{})
	work := func() {
		for {
			c := next.Add(1) - 1
			if c >= chunks {
				return
			}
			off := c * copyChunkBytes
			size := min(copyChunkBytes, n-off)
			copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), size), unsafe.Slice((*byte)(unsafe.Add(src, off)), size))
			if done.Add(1) == chunks {
				close(finished)
			}
		}
	}
	for range min(int64(max(helpers, 0)), chunks-1) {
		spawn(work)
	}
	work()
	// Every chunk is taken; those still being copied are in helpers that
	// are running.
	<-finished
}
