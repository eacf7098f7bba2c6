package walk

import "sync"

// ChunkPool keeps the slices of chunks that their receiver gave back
// (ChunkReleaser) for an engine's later chunks, up to a capacity in bytes;
// what comes back beyond it is left to the collector. Recycled memory is
// neither cleared nor faulted in again, and was written a moment ago, so
// it is often still in cache: each engine's pool says what that saved it.
// The engine sizes a chunk from what Get returns (ResizeChunkSlice).
type ChunkPool struct {
	mu   sync.Mutex
	free []Chunk
	held int64 // bytes of capacity in free
}

// ChunkCapBytes is the memory behind c's slices.
func ChunkCapBytes(c *Chunk) int64 {
	return int64(cap(c.WalkIDs))*8 + int64(cap(c.Offsets))*4 + int64(cap(c.Starts))*4 + int64(cap(c.Vertices))*4
}

// Get returns a chunk given back, its slices of length 0 (stale memory),
// or the zero Chunk when the pool is empty.
func (p *ChunkPool) Get() Chunk {
	var c Chunk
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c = p.free[n-1]
		p.free[n-1] = Chunk{}
		p.free = p.free[:n-1]
		p.held -= ChunkCapBytes(&c)
	}
	p.mu.Unlock()
	return c
}

// Put keeps c's slices for Get, unless the pool would hold more than limit
// bytes of capacity with them.
func (p *ChunkPool) Put(c Chunk, limit int64) {
	b := ChunkCapBytes(&c)
	if b == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+b > limit {
		return
	}
	p.free = append(p.free, Chunk{WalkIDs: c.WalkIDs[:0], Offsets: c.Offsets[:0], Starts: c.Starts[:0], Vertices: c.Vertices[:0]})
	p.held += b
}

// Held counts the chunks kept and their bytes of capacity.
func (p *ChunkPool) Held() (chunks int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free), p.held
}

// ResizeChunkSlice returns s with length n, reusing its memory when its
// capacity allows, else new memory of capacity max(n, size).
func ResizeChunkSlice[T any](s []T, n, size int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, max(n, size))
}
