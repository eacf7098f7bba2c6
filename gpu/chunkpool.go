package gpu

import (
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
type chunkPool struct{ walk.ChunkPool }

// get returns a chunk with room for walks walks and vertices vertices:
// WalkIDs and Offsets of their final lengths, Vertices empty (the caller
// appends, so reused memory is written once, not cleared first).
func (p *chunkPool) get(walks, vertices int) walk.Chunk {
	c := p.Get()
	c.Tag, c.Lent, c.LentRunEnd = 0, false, 0
	c.WalkIDs = walk.ResizeChunkSlice(c.WalkIDs, walks, walks)
	c.Offsets = walk.ResizeChunkSlice(c.Offsets, walks+1, walks+1)
	c.Starts = walk.ResizeChunkSlice(c.Starts, walks, walks)
	if cap(c.Vertices) < vertices {
		// An eighth more, so that the next batches' chunks, a few per cent
		// larger or smaller, fit too.
		c.Vertices = make([]uint32, 0, vertices+vertices/8)
	}
	c.Vertices = c.Vertices[:0]
	return c
}

// put keeps c's slices for get, unless the pool holds limit bytes already.
func (p *chunkPool) put(c walk.Chunk, limit int64) { p.Put(c, limit) }
