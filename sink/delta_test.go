package sink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Walk pages at the encoder's edges, written by the BatchWriter and read
// back by parquet-go and by Apache Arrow: one walk a row group, so each
// page holds one walk of 1, 2, 32, 33, 127 to 130, 257 ... vertices (a
// value count that ends a miniblock or block, or one past it), of dense
// ids and of external ids with the int64 extremes, negative ids and
// deltas that wrap around, under each codec.
func TestDeltaPagesAtEdges(t *testing.T) {
	lengths := []int{1, 2, 3, 32, 33, 34, 127, 128, 129, 130, 161, 256, 257, 258, 385, 1000}
	ext := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1, 0, 1, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	r := rand.New(rand.NewPCG(11, 12))
	for range 200 {
		ext = append(ext, int64(r.Uint64()))
	}
	edges := make([]graph.Edge, len(ext))
	for i := range ext {
		edges[i] = graph.Edge{Src: ext[i], Dst: ext[(i+1)%len(ext)]}
	}
	mapped, err := graph.FromEdges(edges, graph.BuildOptions{Name: "extremes"})
	if err != nil {
		t.Fatal(err)
	}
	if mapped.IDs == nil {
		t.Fatal("the graph of extreme ids has identity ids")
	}
	for _, tc := range []struct {
		name string
		g    *graph.Graph
	}{{"dense", ringGraph(t, 1<<22)}, {"external ids", mapped}} {
		nv := uint32(tc.g.NumVertices())
		c := walk.Chunk{Offsets: []uint32{0}}
		for k, n := range lengths {
			c.WalkIDs = append(c.WalkIDs, uint64(k))
			for i := range n {
				v := r.Uint32N(nv)
				switch {
				case k%3 == 1 && i%2 == 1: // swings between the ends: the widest deltas
					v = nv - 1
				case k%3 == 1:
					v = 0
				case k%3 == 2: // a constant delta: miniblocks of width 0
					v = uint32(i) % nv
				}
				c.Vertices = append(c.Vertices, v)
			}
			c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
		}
		chunks := []walk.Chunk{c}
		want := expectedRows(tc.g, chunks, len(lengths))
		meta := BatchMeta{BatchID: "edges", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: slices.Max(lengths)}, Seed: 42,
			Engine: "cpu", WalkstageVersion: "test", Walks: int64(len(lengths))}
		for _, comp := range []Compression{Zstd, Snappy, None} {
			t.Run(tc.name+"/"+string(comp), func(t *testing.T) {
				b, _ := fileBucket(t)
				m := writeBatch(t, b, meta, tc.g, chunks, WithCompression(comp), WithRowGroupRows(1))
				compareRows(t, readBatch(t, b, m), want)
				var got []Row
				for _, f := range m.Files {
					data, err := b.ReadAll(context.Background(), f.Key)
					if err != nil {
						t.Fatal(err)
					}
					checkLeafEncoding(t, data, DeltaBinaryPacked, comp)
					got = append(got, readArrow(t, data, m)...)
				}
				compareRows(t, got, want)
			})
		}
	}
}

// framedDeltaPage writes the bytes of the general path: pages of random
// ids packed into raw frames (several 128 KiB blocks a page), of 9-bit
// ids (raw too), of ids that repeat every 7 or 1000 values, whose packed
// bytes the codec entropy-codes or matches instead, and of a constant
// delta, whose page is too small for a raw frame; a vertex beyond the
// graph fails the batch naming its walk.
func TestFramedDeltaPageBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   func(r *rand.Rand, k int) uint32 // the k-th vertex of a chunk
	}{
		{"random ids", func(r *rand.Rand, _ int) uint32 { return r.Uint32N(1 << 22) }},
		{"9-bit ids", func(r *rand.Rand, _ int) uint32 { return r.Uint32N(1 << 9) }},
		{"period 7", func(_ *rand.Rand, k int) uint32 { return uint32(k%7) * 3 }},
		{"period 1000", func(_ *rand.Rand, k int) uint32 { return uint32(k%1000) * 3 }},
		{"constant delta", func(_ *rand.Rand, k int) uint32 { return uint32(k) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const nv = 1 << 22
			g := ringGraph(t, nv)
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			const walks = 24000
			var chunks []walk.Chunk
			for lo := 0; lo < walks; lo += 1000 {
				c := walk.Chunk{Offsets: []uint32{0}}
				for id := lo; id < lo+1000; id++ {
					c.WalkIDs = append(c.WalkIDs, uint64(id))
					for range 1 + rng.IntN(81) {
						c.Vertices = append(c.Vertices, tc.id(rng, len(c.Vertices)))
					}
					c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
				}
				chunks = append(chunks, c)
			}
			meta := BatchMeta{BatchID: "f", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 42, Engine: "cpu",
				WalkstageVersion: "test", Walks: walks}
			b1, dir1 := fileBucket(t)
			writeBatch(t, b1, meta, g, chunks, withGeneralPages(), WithWalkEncoding(DeltaBinaryPacked))
			b2, dir2 := fileBucket(t)
			m := writeBatch(t, b2, meta, g, chunks, WithWalkEncoding(DeltaBinaryPacked))
			if a, b := treeDigest(t, dir1), treeDigest(t, dir2); !slices.Equal(a, b) {
				t.Fatalf("framed pages differ from the general path's:\n%v\n%v", a, b)
			}
			compareRows(t, readBatch(t, b2, m), expectedRows(g, chunks, walks))
			bad := cloneChunk(chunks[5])
			bad.Vertices[bad.Offsets[417]] = nv
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
			if want := fmt.Sprintf("walk %d visits vertex %d", bad.WalkIDs[417], nv); !errors.Is(err, ErrBadChunk) || !strings.Contains(err.Error(), want) {
				t.Fatalf("a vertex beyond the graph: %v, want ErrBadChunk saying %q", err, want)
			}
			_ = w.Abort(ctx)
		})
	}
}
