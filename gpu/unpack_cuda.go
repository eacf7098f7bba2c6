//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// await waits until everything queued on s's stream has run, without
// holding the device thread: it polls the stream, so the issue stage can
// enqueue the next batch on the other slot meanwhile. (A synchronize on
// the device thread blocked it for the whole copy of a batch.)
func (e *Engine) await(s *batchSlot) error {
	pause := 20 * time.Microsecond
	for {
		err := e.dev.do(func() error { return s.stream.Query() })
		if !errors.Is(err, cu.NotReady) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Microsecond)
	}
}

// copyBack waits for slot s's batch and copies its packed walks to the
// host; ms is the kernel's time.
func (e *Engine) copyBack(s *batchSlot) (ms float64, err error) {
	if err := e.await(s); err != nil {
		return 0, fmt.Errorf("gpu: batch: %w", err)
	}
	var total int64
	err = e.dev.do(func() error {
		var err error
		if ms, err = s.start.Elapsed(s.stop); err != nil {
			return fmt.Errorf("gpu: kernel time: %w", err)
		}
		// Only now is the packed size known: copy exactly the walked
		// vertices. (The other slot's kernel runs meanwhile.)
		total = int64(*s.hTotal)
		if total > s.capWords {
			return fmt.Errorf("gpu: batch packed %d vertices into a pool of %d (kernel fault)", total, s.capWords)
		}
		if total > int64(len(s.hDense)) {
			// A result window (batchplan.go): the rows stay on the
			// device and come back in pieces as finish cuts them.
			total = 0
		}
		if total > 0 {
			if err := e.copyDtoHAsync(unsafe.Pointer(&s.hDense[0]), s.dDense, total*4, s.stream); err != nil {
				return drained(s.stream, fmt.Errorf("gpu: copy walks: %w", err))
			}
		}
		return nil
	})
	if err != nil || total == 0 {
		return ms, err
	}
	if err := e.await(s); err != nil {
		return 0, fmt.Errorf("gpu: copy walks: %w", err)
	}
	return ms, nil
}

// piece is one chunk's share of a batch: walks [lo, hi) of a segment.
type piece struct {
	seg    *segment
	row    int64 // first walk's index in the batch
	at     int64 // first walk's first vertex in the packed array
	lo, hi int   // walk ids
}

// finish turns the result rows of slot s's batch, copied back, into
// chunks (in parallel), in walk order; the slot is free when it returns,
// or, with WithLentChunks, once the chunks are given back. A batch whose
// rows exceed the slot's pinned buffer comes back through it as a window
// (finishWindowed), all but its last piece's chunks through send.
func (e *Engine) finish(s *batchSlot, maxVertices int64, send func([]walk.Chunk) bool) ([]walk.Chunk, error) {
	b := s.pending
	s.pending = nil
	if int64(*s.hTotal) > int64(len(s.hDense)) {
		return e.finishWindowed(s, b, maxVertices, send)
	}
	pieces, err := e.pieces(s, b, e.cfg.chunkWalks)
	if err != nil {
		return nil, err
	}
	chunks, err := e.cutAll(s, pieces, maxVertices)
	if err != nil {
		return nil, err
	}
	if e.cfg.lendChunks {
		s.lend(len(chunks))
	}
	return chunks, nil
}

// finishWindowed is finish for a batch whose packed rows are larger than
// the slot's pinned buffer (a result window, batchplan.go): the rows stay
// on the device and come back a window piece at a time, whole chunks in
// walk order, into the buffer's two halves in turn: the device copies the
// next piece into one half while the cores cut the last into chunks out
// of the other. Each piece's chunks but the last go to send as soon as
// they are cut, so the chunks in flight stay within a few pieces however
// large the batch. Never with WithLentChunks (the rows would be lent out
// of a half that the next piece overwrites).
func (e *Engine) finishWindowed(s *batchSlot, b *batch, maxVertices int64, send func([]walk.Chunk) bool) (_ []walk.Chunk, err error) {
	if e.cfg.lendChunks {
		return nil, errors.New("gpu: a batch larger than its pinned buffer with lent chunks (bug: no result window with WithLentChunks)")
	}
	hold := int64(len(s.hDense))
	pieces, err := e.pieces(s, b, windowChunkWalks(e.cfg.chunkWalks, maxVertices, hold))
	if err != nil {
		return nil, err
	}
	total := int64(*s.hTotal)
	words := make([]int64, len(pieces))
	for i := range pieces {
		end := total
		if i+1 < len(pieces) {
			end = pieces[i+1].at
		}
		words[i] = end - pieces[i].at
	}
	half := hold / 2
	ends, ok := windowPieces(words, half)
	if !ok {
		return nil, fmt.Errorf("gpu: a chunk of the batch exceeds half its result window of %d vertices (bug in windowChunkWalks)", hold)
	}
	first := func(k int) int {
		if k == 0 {
			return 0
		}
		return ends[k-1]
	}
	// copyIn queues piece k's copy into half k%2 on s's stream.
	copyIn := func(k int) error {
		lo, hi := pieces[first(k)].at, total
		if ends[k] < len(pieces) {
			hi = pieces[ends[k]].at
		}
		return e.dev.do(func() error {
			if err := e.copyDtoHAsync(unsafe.Pointer(&s.hDense[int64(k%2)*half]), s.dDense+cu.DevicePtr(lo*4), (hi-lo)*4, s.stream); err != nil {
				return drained(s.stream, fmt.Errorf("gpu: copy walks, window piece %d of %d: %w", k, len(ends), err))
			}
			return nil
		})
	}
	if err := copyIn(0); err != nil {
		return nil, err
	}
	queued := true
	defer func() {
		// Nothing queued may still write the buffer when the slot is
		// free.
		if queued {
			if werr := e.await(s); werr != nil && err == nil {
				err = fmt.Errorf("gpu: copy walks: %w", werr)
			}
		}
	}()
	if e.streamed != nil {
		e.streamed.stats.ResultPieces += int64(len(ends))
	}
	for k := range ends {
		if err := e.await(s); err != nil {
			queued = false
			return nil, fmt.Errorf("gpu: copy walks, window piece %d of %d: %w", k, len(ends), err)
		}
		queued = false
		// The other half's chunks were cut (copied out) before the last
		// send: it is free for the next piece.
		if k+1 < len(ends) {
			if err := copyIn(k + 1); err != nil {
				return nil, err
			}
			queued = true
		}
		ps := slices.Clone(pieces[first(k):ends[k]])
		base := ps[0].at
		for i := range ps {
			ps[i].at += int64(k%2)*half - base
		}
		chunks, err := e.cutAll(s, ps, maxVertices)
		if err != nil {
			return nil, err
		}
		if k+1 == len(ends) {
			return chunks, nil
		}
		if !send(chunks) {
			return nil, errStopped
		}
	}
	return nil, nil
}

// cutAll cuts pieces out of slot s's pinned rows into chunks, in parallel.
func (e *Engine) cutAll(s *batchSlot, pieces []piece, maxVertices int64) ([]walk.Chunk, error) {
	chunks := make([]walk.Chunk, len(pieces))
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range pieces {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			chunks[i], errs[i] = e.cut(s, &pieces[i], maxVertices)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return chunks, nil
}

// pieces cuts batch b, whose results are in slot s, into chunks of at most
// chunkWalks walks, and checks the walks' lengths against the packed total.
func (e *Engine) pieces(s *batchSlot, b *batch, chunkWalks int) ([]piece, error) {
	var pieces []piece
	row, at := int64(0), int64(0)
	for si := range b.segs {
		sg := &b.segs[si]
		for lo := sg.lo; lo < sg.hi; lo += chunkWalks {
			hi := min(lo+chunkWalks, sg.hi)
			pieces = append(pieces, piece{sg, row, at, lo, hi})
			for _, l := range s.hLengths[row : row+int64(hi-lo)] {
				at += int64(l)
			}
			row += int64(hi - lo)
		}
	}
	if at != int64(*s.hTotal) {
		return nil, fmt.Errorf("gpu: lengths sum to %d vertices, the packed batch holds %d (kernel fault)", at, *s.hTotal)
	}
	return pieces, nil
}

// cut copies piece pc of slot s's packed walks into a chunk from the pool,
// or with WithLentChunks lends them.
func (e *Engine) cut(s *batchSlot, pc *piece, maxVertices int64) (walk.Chunk, error) {
	nw := pc.hi - pc.lo
	lens := s.hLengths[pc.row : pc.row+int64(nw)]
	var nv int64
	for k, l := range lens {
		if l == 0 || int64(l) > maxVertices {
			return walk.Chunk{}, fmt.Errorf("gpu: walk %d of job %d came back with %d vertices (kernel fault)", pc.lo+k, pc.seg.job.Tag, l)
		}
		nv += int64(l)
	}
	var c walk.Chunk
	if e.cfg.lendChunks {
		c = e.chunks.get(nw, 0)
		c.Vertices, c.Lent = s.hDense[pc.at:pc.at+nv:pc.at+nv], true
		// The pipeline emits all of a batch's chunks in a row (emitLoop),
		// so every walk of this segment comes without a slot given back.
		c.LentRunEnd = pc.seg.job.FirstWalk + uint64(pc.seg.hi)
	} else {
		c = e.chunks.get(nw, int(nv))
		c.Vertices = append(c.Vertices, s.hDense[pc.at:pc.at+nv]...)
	}
	c.Tag = pc.seg.job.Tag
	if pc.seg.job.WithTimes && s.withTimes {
		cutTimes(s, pc, &c, lens, nv)
	}
	copy(c.Starts, pc.seg.job.Starts[pc.lo:pc.hi]) // the tasks' starts: each walk's first vertex
	c.Offsets[0] = 0
	at := uint32(0)
	for k, l := range lens {
		c.WalkIDs[k] = pc.seg.job.FirstWalk + uint64(pc.lo+k)
		at += l
		c.Offsets[k+1] = at
	}
	return c, nil
}

var _ walk.ChunkReleaser = (*Engine)(nil)

// Release gives back a chunk this engine emitted, once its receiver reads
// none of its slices any more (sink.WithChunkRelease calls it after the
// chunk's walks are encoded): later chunks reuse the memory. It is
// optional: a chunk never given back is left to the garbage collector, as
// walk.Chunk's contract says. Safe from any goroutine; a chunk must be
// given back at most once. The engine keeps at most its host buffer size
// (WithHostBufferBytes) of such memory.
//
// A lent chunk (WithLentChunks) must be given back: its vertices go back
// to the slot they were lent from, its walk ids and offsets to the pool.
func (e *Engine) Release(c walk.Chunk) {
	if c.Lent {
		e.releaseLent(c)
		c.Vertices = nil
	}
	e.chunks.put(c, e.cfg.hostBufferBytes)
}
