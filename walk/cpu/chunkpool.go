package cpu

import (
	"sync"

	"github.com/walkstage/walkstage/walk"
)

// chunkPoolBytes is the most capacity the engine keeps of chunks given back
// (Engine.Release). A unit's chunk is 1,024 walks: about 32 KiB of PPR
// walks, 340 KiB of DeepWalk's 80 steps, so this holds a few hundred
// chunks, more than a sink keeps in flight between two releases.
const chunkPoolBytes = 64 << 20

// chunkPool keeps the slices of chunks that their receiver gave back for
// the chunks of later units. A chunk is 32 bytes a PPR walk (its id, offset
// and five vertices): at 100 M walks a second on 16 cores that was 3 GB/s
// of new memory, so with the few MiB a run keeps live the collector ran
// every few milliseconds, took a quarter of the cores for its marking each
// time and made every chunk's memory be cleared again
// (docs/design/cpu-engine.md, "Chunks given back"). Recycled memory is
// neither cleared nor collected, and was written a moment ago, so it is
// often still in cache.
type chunkPool struct {
	mu   sync.Mutex
	free []walk.Chunk
	held int64 // bytes of capacity in free
}

// chunkCapBytes is the memory behind c's reusable slices.
func chunkCapBytes(c *walk.Chunk) int64 {
	return int64(cap(c.WalkIDs))*8 + int64(cap(c.Offsets))*4 + int64(cap(c.Vertices))*4
}

// get returns a chunk whose WalkIDs, Offsets and Vertices have lengths
// walks, walks+1 and vertices, from a chunk given back where there is one:
// the contents are stale, the caller writes every element.
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
	c.WalkIDs = resize(c.WalkIDs, walks, walks)
	c.Offsets = resize(c.Offsets, walks+1, walks+1)
	// An eighth more when new, so that the next units' chunks, whose
	// short walks vary in total by a few per cent, fit too.
	c.Vertices = resize(c.Vertices, vertices, vertices+vertices/8)
	return c
}

// resize returns s with length n, reusing its memory when its capacity
// allows, else new memory of capacity size.
func resize[T any](s []T, n, size int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, size)
}

// put keeps c's slices for get, unless the pool holds chunkPoolBytes
// already; the rest is left to the collector.
func (p *chunkPool) put(c walk.Chunk) {
	b := chunkCapBytes(&c)
	if b == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+b > chunkPoolBytes {
		return
	}
	p.free = append(p.free, walk.Chunk{WalkIDs: c.WalkIDs[:0], Offsets: c.Offsets[:0], Vertices: c.Vertices[:0]})
	p.held += b
}
