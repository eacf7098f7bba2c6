package pages

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// ringGraph is the n-cycle with dense ids: vertex ids are external ids.
func ringGraph(t testing.TB, n int) *graph.Graph {
	t.Helper()
	edges := make([]graph.Edge, n)
	for i := range edges {
		edges[i] = graph.Edge{Src: int64(i), Dst: int64((i + 1) % n)}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "ring", DenseIDs: true, NumVertices: n})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// randomChunks are walks 0..walks-1 of length steps over g's vertices,
// per walks a chunk, from a fixed xorshift stream.
func randomChunks(g *graph.Graph, walks, length, per int) []walk.Chunk {
	var out []walk.Chunk
	x := uint64(0x9e3779b97f4a7c15)
	nv := uint64(g.NumVertices())
	for lo := 0; lo < walks; lo += per {
		c := walk.Chunk{Offsets: []uint32{0}}
		for id := lo; id < min(walks, lo+per); id++ {
			c.WalkIDs = append(c.WalkIDs, uint64(id))
			for range length + 1 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				c.Vertices = append(c.Vertices, uint32(x%nv))
			}
			c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
		}
		out = append(out, c)
	}
	return out
}

// row is a fragment's row as readers see it.
type row struct {
	WalkID int64   `parquet:"walk_id"`
	Start  int64   `parquet:"start"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list"`
}

// The encoder takes a row group, not a writer: given the walks of rows
// base..base+n-1 in segments of any order, it writes a standalone Parquet
// file whose rows are those walks in walk id order, for every codec and
// walk encoding; a walk missing from the segments is an ErrBadChunk.
func TestEncodeRowGroup(t *testing.T) {
	g := ringGraph(t, 1<<16)
	const base, n = 3000, 2000
	chunks := randomChunks(g, base+n, 20, 700)
	var segs []Segment
	for i := range chunks {
		c := &chunks[i]
		lo, _ := slices.BinarySearch(c.WalkIDs, base)
		hi, _ := slices.BinarySearch(c.WalkIDs, base+n)
		if lo < hi {
			segs = append(segs, Segment{Chunk: c, Lo: lo, Hi: hi})
		}
	}
	slices.Reverse(segs) // order does not matter
	for _, comp := range []Compression{Zstd, Snappy, None} {
		for _, enc := range []WalkEncoding{DeltaBinaryPacked, ByteStreamSplit} {
			e, err := NewEncoder(Config{Graph: g, Compression: comp, ZstdLevel: zstd.SpeedFastest, WalkEncoding: enc})
			if err != nil {
				t.Fatal(err)
			}
			frag, steps, err := e.Encode(nil, &RowGroup{Base: base, Rows: n, Segments: segs})
			if err != nil {
				t.Fatalf("%s/%s: %v", comp, enc, err)
			}
			if steps != n*20 || len(e.Sums()) != 4 {
				t.Fatalf("%s/%s: %d steps, %d column sums", comp, enc, steps, len(e.Sums()))
			}
			f, err := parquet.OpenFile(bytes.NewReader(frag), int64(len(frag)))
			if err != nil {
				t.Fatalf("%s/%s: %v", comp, enc, err)
			}
			rows := make([]row, n+1)
			got, err := parquet.NewGenericReader[row](f).Read(rows)
			if err != nil && err != io.EOF || got != n {
				t.Fatalf("%s/%s: read %d rows: %v", comp, enc, got, err)
			}
			for r, rw := range rows[:n] {
				id := uint64(base + r)
				k := int(id) % 700
				c := &chunks[id/700]
				want := make([]int64, 0, 21)
				for _, v := range c.Walk(k) {
					want = append(want, int64(v))
				}
				if rw.WalkID != int64(id) || rw.Start != want[0] || rw.Length != 20 || !slices.Equal(rw.Walk, want) {
					t.Fatalf("%s/%s: row %d = %+v, want walk %d %v", comp, enc, r, rw, id, want)
				}
			}
		}
	}
	e, err := NewEncoder(Config{Graph: g, Compression: Zstd, ZstdLevel: zstd.SpeedFastest, WalkEncoding: DeltaBinaryPacked})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Encode(nil, &RowGroup{Base: base, Rows: n, Segments: segs[1:]}); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("walks missing: %v, want ErrBadChunk", err)
	}
}

// BenchmarkEncode encodes row groups of the sink's default size (16,384
// walks of 80 steps) over a 16M-vertex graph with random vertex ids, the
// walks in chunks of 1024, with one encoder: the page encoder alone, no
// part writer or store (`go test -bench Encode ./sink` measures the whole
// writer). Reported: vertices/s, cpu-ns/vertex (this thread's CPU time,
// where the OS gives it), MB/s of fragments and bytes per vertex.
func BenchmarkEncode(b *testing.B) {
	const walks, length, per = 16 << 10, 80, 1024
	g := ringGraph(b, 1<<24)
	chunks := randomChunks(g, walks, length, per)
	gr := &RowGroup{Rows: walks, Staged: int64(walks*12 + walks*(length+1)*4)}
	for i := range chunks {
		gr.Segments = append(gr.Segments, Segment{Chunk: &chunks[i], Lo: 0, Hi: chunks[i].Len()})
	}
	for _, comp := range []Compression{Zstd, Snappy, None} {
		for _, enc := range []WalkEncoding{DeltaBinaryPacked, ByteStreamSplit} {
			b.Run(string(comp)+"/"+string(enc), func(b *testing.B) {
				e, err := NewEncoder(Config{Graph: g, Compression: comp, ZstdLevel: zstd.SpeedFastest, WalkEncoding: enc})
				if err != nil {
					b.Fatal(err)
				}
				runtime.LockOSThread() // threadCPU is this thread's
				defer runtime.UnlockOSThread()
				var frag []byte
				var bytes int64
				b.ReportAllocs()
				b.ResetTimer()
				start, cpu0 := time.Now(), threadCPU()
				for range b.N {
					if frag, _, err = e.Encode(frag, gr); err != nil {
						b.Fatal(err)
					}
					bytes += int64(len(frag))
				}
				sec, cpu := time.Since(start).Seconds(), threadCPU()-cpu0
				vertices := float64(b.N) * walks * (length + 1)
				b.ReportMetric(vertices/sec, "vertices/s")
				b.ReportMetric(float64(cpu)/vertices, "cpu-ns/vertex")
				b.ReportMetric(float64(bytes)/sec/1e6, "MB/s")
				b.ReportMetric(float64(bytes)/vertices, "B/vertex")
			})
		}
	}
}
