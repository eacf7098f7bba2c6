package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// framedWalkPage writes the bytes of the general path: pages of random
// dense ids whose low byte streams are stored raw (two, one, or none of
// them), with raw frames crossing the 128 KiB block boundary at every
// offset the random walk lengths give, and a graph of ids at or above 2^24
// (a fourth stream). The general path is the one the sink took before;
// only where a low stream is raw does the framed path run at all.
func TestFramedWalkPageBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nv    int
		spans []uint32 // ids drawn below spans[i], four chunks at a time
	}{
		{"two raw streams", 1<<20 + 12345, []uint32{1<<20 + 12345}},
		{"one raw stream", 1<<20 + 12345, []uint32{4096}},
		{"none raw", 1<<20 + 12345, []uint32{200}},
		{"three raw, a fourth stream", 1<<24 + 3, []uint32{1<<24 + 3}},
		// Pages whose raw streams differ from the page before's, both
		// ways (the layout framedWalkPage guesses from the last page).
		{"raw streams changing", 1<<20 + 12345, []uint32{1<<20 + 12345, 4096, 200, 1<<20 + 12345, 4096, 1<<20 + 12345}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := ringGraph(t, tc.nv)
			walks := 12000 * len(tc.spans)
			rng := rand.New(rand.NewPCG(uint64(tc.nv), uint64(tc.spans[0])))
			var chunks []walk.Chunk
			for lo := 0; lo < walks; lo += 1000 {
				span := tc.spans[lo/4000%len(tc.spans)]
				c := walk.Chunk{Offsets: []uint32{0}}
				for id := lo; id < lo+1000; id++ {
					c.WalkIDs = append(c.WalkIDs, uint64(id))
					for range 1 + rng.IntN(81) {
						c.Vertices = append(c.Vertices, rng.Uint32N(span))
					}
					c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
				}
				chunks = append(chunks, c)
			}
			meta := BatchMeta{BatchID: "f", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 42, Engine: "cpu",
				WalkstageVersion: "test", Walks: int64(walks)}
			b1, dir1 := fileBucket(t)
			writeBatch(t, b1, meta, g, chunks, withGeneralPages())
			b2, dir2 := fileBucket(t)
			m := writeBatch(t, b2, meta, g, chunks)
			if a, b := treeDigest(t, dir1), treeDigest(t, dir2); !slices.Equal(a, b) {
				t.Fatalf("framed pages differ from the general path's:\n%v\n%v", a, b)
			}
			rows := readBatch(t, b2, m)
			if len(rows) != walks {
				t.Fatalf("read %d rows back, want %d", len(rows), walks)
			}
			// A vertex beyond the graph, found by the pass that splits
			// the page (on either path), fails the batch naming its walk.
			bad := cloneChunk(chunks[5])
			k := bad.Offsets[417] + 3
			bad.Vertices[k] = uint32(tc.nv)
			b3, _ := fileBucket(t)
			ctx := context.Background()
			w, err := NewBatchWriter(ctx, b3, "walks", meta, g)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range chunks {
				if i == 5 {
					c = bad
				}
				if err = w.Write(ctx, cloneChunk(c)); err != nil {
					break
				}
			}
			if err == nil {
				_, err = w.Commit(ctx)
			}
			if want := fmt.Sprintf("walk %d visits vertex %d", bad.WalkIDs[417], tc.nv); !errors.Is(err, ErrBadChunk) || !strings.Contains(err.Error(), want) {
				t.Fatalf("a vertex beyond the graph: %v, want ErrBadChunk saying %q", err, want)
			}
			_ = w.Abort(ctx)
		})
	}
}
