//go:build cuda

package gpu

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// staging holds the engine's pinned buffers for stagedCopy, allocated on
// first use, as large as the largest piece so far (grown when a call's
// pieces are larger), and freed by Close (device thread). Pinning is slow
// (32 ms for two buffers of 32 MiB on the H200 host, the whole first wave
// of a neighbour sample five times over), and a wave's pieces are 4 MiB.
type staging struct {
	size   int64 // most bytes a buffer holds; 0: copy from pageable memory
	held   int64 // bytes each buffer has
	buf    [2]unsafe.Pointer
	stream cu.Stream
	// regs say which Go memory the copies lock and copy into straight
	// (hostreg.go), locked holds it by address.
	regs   hostRegs
	locked map[uintptr]lockedHost
	// times add up where the copies' time goes, for the callers' debug
	// logs (a caller reads and clears them).
	times stagedTimes
}

// stagedTimes split staged copies' time: allocating the pinned buffers
// (the first copy only), waiting for the device's pieces, and the cores'
// copies out of the buffers; and the copies straight into locked Go memory
// (hostreg.go): locking it, the bytes and the wait for them.
type stagedTimes struct {
	alloc, wait, out time.Duration
	pieces           int
	lock, direct     time.Duration
	locks            int
	directBytes      int64
}

// lockedHost is a range of Go memory page-locked for the copies, held in
// place by pin.
type lockedHost struct {
	p   unsafe.Pointer
	pin *runtime.Pinner
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
	// room is the bytes of dst's Go object from dst on (at least n) when
	// the caller hands the same memory over again (a sampling call's
	// columns): it is page-locked the second time and copied into
	// straight (hostreg.go). 0: staged.
	room int64
}

// stagedCopies copies every span (stagedCopy), the spans' pieces in one
// pipeline, so the device copies the next span's first piece while the
// cores copy the last piece of the one before. A piece is a buffer's size,
// smaller (down to stagedCopyMin) when the spans are too few bytes for
// stagedPieces of that size; a span under stagedCopyMin is copied
// directly. A span into memory that comes back (room) is copied by the
// device alone once it is locked (hostRegs). (device thread)
func (e *Engine) stagedCopies(spans []stagedSpan) (err error) {
	st := &e.staging
	var total int64
	var staged, direct []stagedSpan
	reuse := false
	for _, s := range spans {
		reuse = reuse || (s.room > 0 && st.size > 0 && s.n >= stagedCopyMin)
	}
	if reuse {
		st.regs.begin()
		defer e.unlockStale()
	}
	for _, s := range spans {
		if st.size <= 0 || s.n < stagedCopyMin {
			if s.n > 0 {
				if err := e.copyDtoH(s.dst, s.src, s.n); err != nil {
					return err
				}
			}
			continue
		}
		if s.room > 0 {
			switch st.regs.use(uintptr(s.dst), s.n, s.room) {
			case hostDirect:
				direct = append(direct, s)
				continue
			case hostLock:
				if e.lockHost(s.dst, max(s.room, s.n)) {
					direct = append(direct, s)
					continue
				}
				st.regs.failed(uintptr(s.dst))
			}
		}
		staged = append(staged, s)
		total += s.n
	}
	// The device copies into locked memory first, on the staging stream:
	// the pipeline's first wait covers them too, and with nothing staged
	// one wait does.
	if len(direct) > 0 {
		if err := e.stagingStream(); err != nil {
			return err
		}
		// A failure leaves no copy into the caller's memory running
		// after the return.
		defer func() {
			if err != nil {
				_ = st.stream.Synchronize()
			}
		}()
		td := time.Now()
		for _, s := range direct {
			if err := e.copyDtoHAsync(s.dst, s.src, s.n, st.stream); err != nil {
				return fmt.Errorf("gpu: copy into locked memory: %w", err)
			}
			st.times.directBytes += s.n
		}
		if total == 0 {
			if err := st.stream.Synchronize(); err != nil {
				return fmt.Errorf("gpu: copy into locked memory: %w", err)
			}
		}
		st.times.direct += time.Since(td)
	}
	if total == 0 {
		return nil
	}
	size := stagingPiece(st.size, total)
	if st.buf[0] == nil || st.held < size {
		ta := time.Now()
		if err := e.pinStaging(stagingPinned(st.size, size)); err != nil {
			return err
		}
		st.times.alloc += time.Since(ta)
	}
	var pieces []stagedSpan
	for _, s := range staged {
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
	st.times.pieces += len(pieces)
	for i := range pieces {
		tw := time.Now()
		if err := st.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: staged copy: %w", err)
		}
		if i+1 < len(pieces) {
			if err := issue(i + 1); err != nil {
				return err
			}
		}
		to := time.Now()
		parallelCopy(pieces[i].dst, st.buf[i%2], pieces[i].n)
		st.times.wait += to.Sub(tw)
		st.times.out += time.Since(to)
	}
	return nil
}

// lockHost page-locks n bytes of Go memory at p for the copies (the
// staging stream made first, as pinStaging makes it), and says whether it
// did: a failure (a locked-memory limit, a driver without registration)
// only means the copy is staged (device thread).
func (e *Engine) lockHost(p unsafe.Pointer, n int64) bool {
	st := &e.staging
	if err := e.stagingStream(); err != nil {
		return false
	}
	tl := time.Now()
	pin := new(runtime.Pinner)
	pin.Pin(p)
	if err := hostRegister(p, n); err != nil {
		pin.Unpin()
		e.cfg.logger.Debug("gpu: sampled columns copied through staging", "bytes", n, "err", err)
		return false
	}
	if st.locked == nil {
		st.locked = map[uintptr]lockedHost{}
	}
	st.locked[uintptr(p)] = lockedHost{p: p, pin: pin}
	st.times.lock += time.Since(tl)
	st.times.locks++
	return true
}

// unlockStale unlocks the ranges no copy has used for hostRegKeep calls
// (device thread).
func (e *Engine) unlockStale() {
	for _, r := range e.staging.regs.end() {
		e.unlockHost(r.base)
	}
}

// unlockHost unlocks the range locked at base and lets the collector
// have it (device thread).
func (e *Engine) unlockHost(base uintptr) {
	st := &e.staging
	if l, ok := st.locked[base]; ok {
		hostUnregister(l.p)
		l.pin.Unpin()
		delete(st.locked, base)
	}
}

// releaseLocked unlocks every range (device thread; Close).
func (e *Engine) releaseLocked() {
	for _, r := range e.staging.regs.all() {
		e.unlockHost(r.base)
	}
}

// pinStaging makes the staging buffers hold size bytes each, freeing
// smaller ones first; the stream is made once (device thread).
func (e *Engine) pinStaging(size int64) error {
	st := &e.staging
	if err := e.stagingStream(); err != nil {
		return err
	}
	for i := range st.buf {
		e.hostFree(st.buf[i])
		st.buf[i] = nil
	}
	st.held = 0
	for i := range st.buf {
		p, err := e.hostAlloc(size)
		if err != nil {
			e.releaseStaging()
			return err
		}
		st.buf[i] = p
	}
	st.held = size
	return nil
}

// stagingStream makes the staging stream unless it is made (device
// thread).
func (e *Engine) stagingStream() error {
	st := &e.staging
	if st.stream == (cu.Stream{}) {
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return fmt.Errorf("gpu: staging stream: %w", err)
		}
		st.stream = s
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
	st.held = 0
}
