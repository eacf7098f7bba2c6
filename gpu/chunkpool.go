package gpu

import (
	"sync"

	"github.com/walkstage/walkstage/walk"
)

// chunkPool keeps the slices of chunks that their receiver gave back
// (Engine.Release) for the chunks of later batches. Copying a batch out of
// the pinned buffer into fresh memory cost a page fault (and the kernel's
// zeroing) per 4 KiB: about 2 core-seconds for the 3.1 GB of a scale-22
// run, most of the copy's time. Recycled memory is mapped already.
//
// It holds at most limit bytes of capacity: what comes back beyond that
// (the tail of a run, when every chunk is returned at once) is left to the
// garbage collector.
type chunkPool struct {
	mu   sync.Mutex
	free []walk.Chunk
	held int64 // bytes of capacity in free
}

// chunkCapBytes is the memory behind c's slices.
func chunkCapBytes(c *walk.Chunk) int64 {
	return int64(cap(c.WalkIDs))*8 + int64(cap(c.Offsets))*4 + int64(cap(c.Starts))*4 + int64(cap(c.Vertices))*4
}

// get returns a chunk with room for walks walks and vertices vertices:
// WalkIDs and Offsets of their final lengths, Vertices empty (the caller
// appends, so reused memory is written once, not cleared first).
func (p *chunkPool) get(walks, vertices int) walk.Chunk {
	var c walk.Chunk
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c = p.free[n-1]
		p.free[n-1] = walk.Chunk{}
		p.free = p.free[:n-1]
		p.held -= chunkCapBytes(&c)
	}
	p.mu.Unlock()
	c.Tag, c.Lent, c.LentRunEnd = 0, false, 0
	c.WalkIDs = resize(c.WalkIDs, walks)
	c.Offsets = resize(c.Offsets, walks+1)
	c.Starts = resize(c.Starts, walks)
	if cap(c.Vertices) < vertices {
		// An eighth more, so that the next batches' chunks, a few per cent
		// larger or smaller, fit too.
		c.Vertices = make([]uint32, 0, vertices+vertices/8)
	}
	c.Vertices = c.Vertices[:0]
	return c
}

// resize returns s with length n, reusing its memory when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// put keeps c's slices for get, unless the pool holds limit bytes already.
func (p *chunkPool) put(c walk.Chunk, limit int64) {
	b := chunkCapBytes(&c)
	if b == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+b > limit {
		return
	}
	p.free = append(p.free, walk.Chunk{WalkIDs: c.WalkIDs[:0], Offsets: c.Offsets[:0], Starts: c.Starts[:0], Vertices: c.Vertices[:0]})
	p.held += b
}
