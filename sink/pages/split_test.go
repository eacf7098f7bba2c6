package pages

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"

	"github.com/walkstage/walkstage/walk"
)

// splitRows is a row order over walks of random lengths with vertices
// below nv, and the walks' values mapped by ids (identity when nil).
func splitRows(r *rand.Rand, walks int, nv uint32, ids []int64) (rowOrder, []int64) {
	c := &walk.Chunk{Offsets: []uint32{0}}
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
	o := rowOrder{segs: []Segment{{c, 0, walks}}, seg: make([]int32, walks), idx: make([]int32, walks)}
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
				c := rows.segs[0].Chunk
				rows.segs = []Segment{{c, 0, 100}, {c, 100, 300}}
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
			rows.segs[0].Chunk.Vertices[len(vals)/2] = nv
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
