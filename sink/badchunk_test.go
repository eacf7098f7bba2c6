package sink

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
)

// A row group that fails to encode (a vertex beyond the graph) fails the
// batch's Commit every time. The encoder used to wake the uploader before
// recording the error; the uploader stopped without one, and a Commit
// that got in between found no error and wrote a manifest without the row
// group's walks (seen as TestFramedWalkPageBytes failing under load). The
// race is tried many times, with several GOMAXPROCS, which it needs to
// show; its outcome is asserted, not its timing.
func TestBadRowGroupAlwaysFailsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("many batches")
	}
	g := ringGraph(t, 1000)
	const n = 64
	meta := BatchMeta{BatchID: "bad", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 4}, Seed: 1, Engine: "cpu", WalkstageVersion: "test", Walks: n}
	ctx := context.Background()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 8, 32} {
		runtime.GOMAXPROCS(procs)
		for it := range 700 {
			c := walk.Chunk{Offsets: []uint32{0}}
			for id := range n {
				c.WalkIDs = append(c.WalkIDs, uint64(id))
				c.Vertices = append(c.Vertices, 1, 2, 3)
				c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
			}
			c.Vertices[2] = 5000 // walk 0, beyond the graph
			b, _ := fileBucket(t)
			w, err := NewBatchWriter(ctx, b, "walks", meta, g, WithRowGroupRows(8), WithEncoders(4))
			if err != nil {
				t.Fatal(err)
			}
			if err = w.Write(ctx, c); err == nil {
				var m *output.Manifest
				if m, err = w.Commit(ctx); err == nil {
					err = fmt.Errorf("committed %d walks in %d parts", m.Walks, len(m.Files))
				}
			}
			if !errors.Is(err, ErrBadChunk) {
				t.Fatalf("GOMAXPROCS %d, batch %d: %v, want ErrBadChunk", procs, it, err)
			}
			_ = w.Abort(ctx)
		}
	}
}
