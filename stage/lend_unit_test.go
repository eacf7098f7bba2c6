package stage

import (
	"context"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// releasingEngine is an engine that takes chunks back (as the GPU engine's
// Release does) and counts them by their first walk id.
type releasingEngine struct {
	walk.Engine
	mu   sync.Mutex
	back map[uint64]int
}

var _ walk.ChunkReleaser = (*releasingEngine)(nil)

func (e *releasingEngine) Release(c walk.Chunk) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.back[c.WalkIDs[0]]++
}

// A batch whose Write failed drains the rest of its chunks, and every
// chunk goes back to the engine exactly once: the refused one through the
// writer, the drained ones through write. A lent chunk (the GPU engine's
// WALKSTAGE_GPU_LEND_CHUNKS) kept by nobody would hold its batch buffer for
// ever.
func TestWriteGivesBackEveryChunkAfterAFailure(t *testing.T) {
	_, g := testGraphCached(t)
	cpu, err := cpu.New(g, cpu.WithWorkers(1), cpu.WithChunkSize(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	eng := &releasingEngine{Engine: cpu, back: map[uint64]int{}}
	v := newServed(g, eng)
	b, err := store.OpenBucket(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	const walks = 50
	meta := sink.BatchMeta{BatchID: "lent", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, Seed: 1, Engine: "cpu", Walks: walks}
	w, err := sink.NewBatchWriter(ctx, b, "walks", meta, g, sink.WithChunkRelease(v.releaseChunk))
	if err != nil {
		t.Fatal(err)
	}
	// The writer is aborted before the first chunk: every Write fails.
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	bt := &batch{w: w, chunks: make(chan walk.Chunk, 16), written: make(chan struct{})}
	go (&Stage{}).write(ctx, bt, v)
	starts := make([]uint32, walks)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	var sent []uint64
	err = cpu.Run(ctx, []walk.Job{{Algorithm: meta.Algorithm, Seed: 1, Starts: starts}}, func(c walk.Chunk) error {
		c.Lent = true
		sent = append(sent, c.WalkIDs[0])
		bt.chunks <- c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(bt.chunks)
	<-bt.written
	if bt.wErr == nil {
		t.Fatal("Write after Abort succeeded")
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(sent) < 3 || len(eng.back) != len(sent) {
		t.Fatalf("%d chunks sent, %d came back", len(sent), len(eng.back))
	}
	for _, id := range sent {
		if eng.back[id] != 1 {
			t.Fatalf("the chunk from walk %d came back %d times, want 1", id, eng.back[id])
		}
	}
}
