package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"

	"github.com/walkstage/walkstage/walk"
)

// splitRows is a row order over walks of random lengths with vertices
// below nv, and the walks' values mapped by ids (identity when nil).
func splitRows(r *rand.Rand, walks int, nv uint32, ids []int64) (rowOrder, []int64) {
	c := &heldChunk{Chunk: walk.Chunk{Offsets: []uint32{0}}}
	var vals []int64
	for k := range walks {
		c.WalkIDs = append(c.WalkIDs, uint64(k))
		for range 1 + r.IntN(81) {
			v := r.Uint32N(nv)
			c.Vertices = append(c.Vertices, v)
			if ids == nil {
				vals = append(vals, int64(v))
			} else {
				vals = append(vals, ids[v])
			}
		}
		c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
	}
	o := rowOrder{segs: []segment{{c, 0, walks}}, seg: make([]int32, walks), idx: make([]int32, walks)}
	for k := range walks {
		o.idx[k] = int32(k)
	}
	return o, vals
}

// The fused split writes the bytes parquet-go's BYTE_STREAM_SPLIT encoder
// writes for the mapped values, and their bounds; a vertex beyond the graph
// is an ErrBadChunk.
func TestSplitMatchesParquetGo(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const nv = 1 << 22
	ids := make([]int64, nv)
	for i := range ids {
		ids[i] = int64(r.Uint64()) // negative ones too
	}
	for _, tc := range []struct {
		name string
		ids  []int64
		two  bool // rows in two segments: not one run of a chunk
	}{{"dense", nil, false}, {"dense, two segments", nil, true}, {"mapped", ids, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rows, vals := splitRows(r, 300, nv, tc.ids)
			if tc.two {
				c := rows.segs[0].c
				rows.segs = []segment{{c, 0, 100}, {c, 100, 300}}
				for k := 100; k < 300; k++ {
					rows.seg[k] = 1
				}
			}
			if _, ok := rows.run(0, 300); ok == tc.two {
				t.Fatalf("rows in two segments: %v, but run says one run: %v", tc.two, ok)
			}
			want, err := (&bytestreamsplit.Encoding{}).EncodeInt64(nil, vals)
			if err != nil {
				t.Fatal(err)
			}
			split := func() ([]byte, int64, int64, error) {
				got := bytes.Repeat([]byte{0xee}, 8*len(vals)) // stale bytes must be overwritten
				var lo, hi int64
				if tc.ids == nil {
					lo, hi, _, err = splitDense(got, nil, len(vals), nv, 0, rows, 0, 300)
				} else {
					lo, hi, err = splitMapped(got, len(vals), tc.ids, 0, rows, 0, 300)
				}
				return got, lo, hi, err
			}
			got, lo, hi, err := split()
			if err != nil {
				t.Fatal(err)
			}
			if tc.ids == nil {
				// Only the streams a dense id reaches are written; the
				// others are zero in parquet-go's.
				k := denseStreams(nv) * len(vals)
				if slices.ContainsFunc(want[k:], func(b byte) bool { return b != 0 }) {
					t.Fatalf("parquet-go's streams beyond the first %d are not zero", denseStreams(nv))
				}
				got, want = got[:k], want[:k]
			}
			if !bytes.Equal(got, want) {
				t.Fatal("split bytes differ from parquet-go's")
			}
			if lo != slices.Min(vals) || hi != slices.Max(vals) {
				t.Fatalf("bounds %d..%d, want %d..%d", lo, hi, slices.Min(vals), slices.Max(vals))
			}
			rows.segs[0].c.Vertices[len(vals)/2] = nv
			if _, _, _, err := split(); !errors.Is(err, ErrBadChunk) {
				t.Fatalf("a vertex beyond the graph: %v, want ErrBadChunk", err)
			}
		})
	}
}

// A dense id of a graph of nv vertices has denseStreams(nv) bytes that can
// be other than zero.
func TestDenseStreams(t *testing.T) {
	for _, tc := range []struct {
		nv      uint32
		streams int
	}{{1, 1}, {256, 1}, {257, 2}, {1 << 16, 2}, {1<<16 + 1, 3}, {1 << 22, 3}, {1 << 24, 3}, {1<<24 + 1, 4}, {1<<32 - 1, 4}} {
		if got := denseStreams(tc.nv); got != tc.streams {
			t.Errorf("denseStreams(%d) = %d, want %d", tc.nv, got, tc.streams)
		}
		if tc.streams < 4 && tc.nv > 1 && uint64(tc.nv-1)>>(8*tc.streams) != 0 {
			t.Errorf("the largest id of %d vertices has bytes beyond %d", tc.nv, tc.streams)
		}
	}
}

// BenchmarkSplit compares the fused split with mapping into int64s and
// splitting them with parquet-go (the sink's way before), one page of
// dense ids.
func BenchmarkSplit(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, vals := splitRows(r, 2700, 1<<22, nil)
	s := make([]byte, 8*len(vals))
	var flat []uint32
	var err error
	b.Run("fused", func(b *testing.B) {
		for b.Loop() {
			if _, _, flat, err = splitDense(s, flat, len(vals), 1<<22, 0, rows, 0, 2700); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/vertex")
	})
	b.Run("map+parquet-go", func(b *testing.B) {
		ext := make([]int64, len(vals))
		for b.Loop() {
			i := 0
			for r := range 2700 {
				for _, v := range rows.walk(r) {
					ext[i] = int64(v)
					i++
				}
			}
			if _, err := (&bytestreamsplit.Encoding{}).EncodeInt64(s[:0], ext); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/vertex")
	})
}

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
