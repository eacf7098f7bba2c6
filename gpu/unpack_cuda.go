//go:build cuda

package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// copyBack waits for slot s's batch and copies its packed walks to the
// host; ms is the kernel's time.
func (e *Engine) copyBack(s *batchSlot) (ms float64, err error) {
	err = e.dev.do(func() error {
		if err := s.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: batch: %w", err)
		}
		var err error
		if ms, err = s.start.Elapsed(s.stop); err != nil {
			return fmt.Errorf("gpu: kernel time: %w", err)
		}
		// Only now is the packed size known: copy exactly the walked
		// vertices. (The other slot's kernel runs meanwhile.)
		total := int64(*s.hTotal)
		if total > int64(len(s.hDense)) {
			return fmt.Errorf("gpu: batch packed %d vertices into a pool of %d (kernel fault)", total, len(s.hDense))
		}
		if total > 0 {
			if err := e.copyDtoHAsync(unsafe.Pointer(&s.hDense[0]), s.dDense, total*4, s.stream); err != nil {
				return drained(s.stream, fmt.Errorf("gpu: copy walks: %w", err))
			}
		}
		if err := s.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: copy walks: %w", err)
		}
		return nil
	})
	return ms, err
}

// finish waits for slot s's batch, turns its result rows into chunks (in
// parallel) and emits them in order.
func (e *Engine) finish(s *batchSlot, stride, maxVertices int64, emit walk.EmitFunc) error {
	b := s.pending
	s.pending = nil
	ms, err := e.copyBack(s)
	if err != nil {
		return err
	}
	e.stats.Compute += time.Duration(ms * float64(time.Millisecond))
	type piece struct {
		seg    *segment
		row    int64 // first walk's index in the batch
		at     int64 // first walk's first vertex in the packed array
		lo, hi int   // walk ids
	}
	var pieces []piece
	row, at := int64(0), int64(0)
	for si := range b.segs {
		sg := &b.segs[si]
		for lo := sg.lo; lo < sg.hi; lo += e.cfg.chunkWalks {
			hi := min(lo+e.cfg.chunkWalks, sg.hi)
			pieces = append(pieces, piece{sg, row, at, lo, hi})
			for _, l := range s.hLengths[row : row+int64(hi-lo)] {
				at += int64(l)
			}
			row += int64(hi - lo)
		}
	}
	if at != int64(*s.hTotal) {
		return fmt.Errorf("gpu: lengths sum to %d vertices, the packed batch holds %d (kernel fault)", at, *s.hTotal)
	}
	chunks := make([]walk.Chunk, len(pieces))
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range pieces {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			pc := pieces[i]
			nw := pc.hi - pc.lo
			lens := s.hLengths[pc.row : pc.row+int64(nw)]
			var nv int64
			for k, l := range lens {
				if l == 0 || int64(l) > maxVertices {
					errs[i] = fmt.Errorf("gpu: walk %d of job %d came back with %d vertices (kernel fault)", pc.lo+k, pc.seg.job.Tag, l)
					return
				}
				nv += int64(l)
			}
			// append rather than make and copy: the vertices (most of
			// the bytes) are written once, not zeroed first.
			c := walk.Chunk{Tag: pc.seg.job.Tag, WalkIDs: make([]uint64, nw), Offsets: make([]uint32, nw+1),
				Vertices: append([]uint32(nil), s.hDense[pc.at:pc.at+nv]...)}
			at := uint32(0)
			for k, l := range lens {
				c.WalkIDs[k] = pc.seg.job.FirstWalk + uint64(pc.lo+k)
				at += l
				c.Offsets[k+1] = at
			}
			chunks[i] = c
		}(i)
	}
	wg.Wait()
	for i := range chunks {
		if errs[i] != nil {
			return errs[i]
		}
	}
	for _, c := range chunks {
		e.stats.Walks += int64(c.Len())
		e.stats.Steps += c.Steps()
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}
