package gpu

import (
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// TestChunkPoolReusesWithinLimit: a chunk given back is reused by the next
// get that fits it; one that does not fit gets new vertex memory; the pool
// keeps no more than its limit.
func TestChunkPoolReusesWithinLimit(t *testing.T) {
	var p chunkPool
	c := p.get(10, 100)
	if len(c.WalkIDs) != 10 || len(c.Offsets) != 11 || len(c.Vertices) != 0 || cap(c.Vertices) < 100 {
		t.Fatalf("get(10, 100): %d ids, %d offsets, %d/%d vertices", len(c.WalkIDs), len(c.Offsets), len(c.Vertices), cap(c.Vertices))
	}
	c.Vertices = append(c.Vertices, make([]uint32, 100)...)
	c.Tag = 7
	ids, verts := &c.WalkIDs[0], &c.Vertices[0]
	p.put(c, 1<<20)
	d := p.get(8, 90)
	if &d.WalkIDs[0] != ids || &d.Vertices[:1][0] != verts || d.Tag != 0 || len(d.WalkIDs) != 8 || len(d.Offsets) != 9 {
		t.Fatalf("a chunk given back was not reused: %+v", d)
	}
	p.put(d, 1<<20)
	e := p.get(8, 1000)
	if &e.WalkIDs[0] != ids || cap(e.Vertices) < 1000 || &e.Vertices[:1][0] == verts {
		t.Fatal("a chunk too small for the vertices asked for kept its vertex memory")
	}
	p.put(e, walk.ChunkCapBytes(&e)-1)
	if n, b := p.Held(); n != 0 || b != 0 {
		t.Fatalf("the pool kept %d chunks (%d bytes) beyond its limit", n, b)
	}
	p.put(walk.Chunk{}, 1<<20)
	if n, _ := p.Held(); n != 0 {
		t.Fatal("the pool kept an empty chunk")
	}
}
