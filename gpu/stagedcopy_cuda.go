//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// defaultStagingBytes is the size of each of the two pinned buffers that
// sampled columns come back through (stagedCopy).
const defaultStagingBytes = 32 << 20

// stagedCopyMin is the smallest copy worth staging; below it the driver's
// own copy from pageable memory is as fast.
const stagedCopyMin = 4 << 20

// staging holds the engine's pinned buffers for stagedCopy, allocated on
// first use and freed by Close (device thread).
type staging struct {
	size   int64 // bytes a buffer; 0: copy from pageable memory
	buf    [2]unsafe.Pointer
	stream cu.Stream
}

// stagedCopy copies n bytes from the device at src to Go memory at dst
// through two pinned buffers in turn: while the device copies one piece
// into one buffer, every core copies the last piece out of the other. A
// copy into pageable memory runs through the driver's own staging, one
// piece at a time on one thread: the sampled columns of a 1 M-seed [25,
// 10] neighbour sample are 700 MB, more than its kernels' time to copy
// that way. (device thread)
func (e *Engine) stagedCopy(dst unsafe.Pointer, src cu.DevicePtr, n int64) error {
	return e.stagedCopies([]stagedSpan{{dst: dst, src: src, n: n}})
}

// stagedSpan is one device range stagedCopies copies into Go memory.
type stagedSpan struct {
	dst unsafe.Pointer
	src cu.DevicePtr
	n   int64
}

// stagedPieces is about the pieces a staged copy is cut into at least:
// a wave's columns (three or four of about 12 MB for 3 M edges) copied
// column by column in one piece each left the device idle while the
// cores copied each piece out, and the cores idle while it copied the
// next; eight pieces overlap all but one of them.
const stagedPieces = 8

// stagedCopies copies every span (stagedCopy), the spans' pieces in one
// pipeline, so the device copies the next span's first piece while the
// cores copy the last piece of the one before. A piece is a buffer's size,
// smaller (down to stagedCopyMin) when the spans are too few bytes for
// stagedPieces of that size; a span under stagedCopyMin is copied
// directly. (device thread)
func (e *Engine) stagedCopies(spans []stagedSpan) error {
	st := &e.staging
	var total int64
	for _, s := range spans {
		if st.size <= 0 || s.n < stagedCopyMin {
			if s.n > 0 {
				if err := e.copyDtoH(s.dst, s.src, s.n); err != nil {
					return err
				}
			}
			continue
		}
		total += s.n
	}
	if total == 0 {
		return nil
	}
	if st.buf[0] == nil {
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return fmt.Errorf("gpu: staging stream: %w", err)
		}
		st.stream = s
		for i := range st.buf {
			if st.buf[i], err = e.hostAlloc(st.size); err != nil {
				e.releaseStaging()
				return err
			}
		}
	}
	size := min(st.size, max(stagedCopyMin, (total/stagedPieces+4095)&^4095))
	var pieces []stagedSpan
	for _, s := range spans {
		if s.n < stagedCopyMin {
			continue
		}
		for off := int64(0); off < s.n; off += size {
			pieces = append(pieces, stagedSpan{dst: unsafe.Add(s.dst, off), src: s.src + cu.DevicePtr(off), n: min(size, s.n-off)})
		}
	}
	issue := func(i int) error {
		if err := e.copyDtoHAsync(st.buf[i%2], pieces[i].src, pieces[i].n, st.stream); err != nil {
			return fmt.Errorf("gpu: staged copy: %w", err)
		}
		return nil
	}
	if err := issue(0); err != nil {
		return err
	}
	for i := range pieces {
		if err := st.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: staged copy: %w", err)
		}
		if i+1 < len(pieces) {
			if err := issue(i + 1); err != nil {
				return err
			}
		}
		parallelCopy(pieces[i].dst, st.buf[i%2], pieces[i].n)
	}
	return nil
}

// releaseStaging frees the staging buffers and stream (device thread).
func (e *Engine) releaseStaging() {
	st := &e.staging
	if st.stream != (cu.Stream{}) {
		_ = st.stream.Synchronize()
		_ = st.stream.Destroy()
		st.stream = cu.Stream{}
	}
	for i := range st.buf {
		e.hostFree(st.buf[i])
		st.buf[i] = nil
	}
}
