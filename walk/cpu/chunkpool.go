package cpu

import (
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
type chunkPool struct{ walk.ChunkPool }

// get returns a chunk whose WalkIDs, Offsets and Vertices have lengths
// walks, walks+1 and vertices, from a chunk given back where there is one:
// the contents are stale, the caller writes every element.
func (p *chunkPool) get(walks, vertices int) walk.Chunk {
	c := p.Get()
	c.WalkIDs = walk.ResizeChunkSlice(c.WalkIDs, walks, walks)
	c.Offsets = walk.ResizeChunkSlice(c.Offsets, walks+1, walks+1)
	// An eighth more when new, so that the next units' chunks, whose
	// short walks vary in total by a few per cent, fit too.
	c.Vertices = walk.ResizeChunkSlice(c.Vertices, vertices, vertices+vertices/8)
	return c
}

// put keeps c's slices for get, unless the pool holds chunkPoolBytes
// already; the rest is left to the collector.
func (p *chunkPool) put(c walk.Chunk) { p.Put(c, chunkPoolBytes) }
