package pages

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/rle"

	"github.com/walkstage/walkstage/graph"
)

// The dictionary indices' bit-packed runs decode, with parquet-go's
// RLE/bit-packed hybrid decoder, to the indices, for every width and for
// counts that are not whole groups of 8.
func TestAppendBitPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for width := 1; width <= 32; width++ {
		for _, n := range []int{1, 7, 8, 9, 100, 1025} {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = r.Uint32() >> (32 - width)
			}
			enc := appendBitPacked(nil, vals, width)
			got, err := (&rle.Encoding{BitWidth: width}).DecodeInt32(nil, enc)
			if err != nil {
				t.Fatalf("width %d, %d values: %v", width, n, err)
			}
			if len(got) < n || len(got) != (n+7)/8*8 {
				t.Fatalf("width %d: %d values decoded of %d", width, len(got), n)
			}
			for i, v := range vals {
				if uint32(got[i]) != v {
					t.Fatalf("width %d, value %d: %d, want %d", width, i, got[i], v)
				}
			}
		}
	}
}

// stringRing is ringGraph with string ids "user:<n>".
func stringRing(t testing.TB, n int) *graph.Graph {
	t.Helper()
	edges := make([]graph.StringEdge, n)
	for i := range edges {
		edges[i] = graph.StringEdge{Src: fmt.Sprintf("user:%d", i), Dst: fmt.Sprintf("user:%d", (i+1)%n)}
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// BenchmarkEncodeStrings is BenchmarkEncode for a graph with string ids
// ("user:<n>", 1M vertices): the dictionary path (strings.go).
func BenchmarkEncodeStrings(b *testing.B) {
	const walks, length, per = 16 << 10, 80, 1024
	g := stringRing(b, 1<<20)
	chunks := randomChunks(g, walks, length, per)
	gr := &RowGroup{Rows: walks, Staged: int64(walks*12 + walks*(length+1)*4)}
	for i := range chunks {
		gr.Segments = append(gr.Segments, Segment{Chunk: &chunks[i], Lo: 0, Hi: chunks[i].Len()})
	}
	for _, comp := range []Compression{Zstd, Snappy, None} {
		b.Run(string(comp), func(b *testing.B) {
			e, err := NewEncoder(Config{Graph: g, Compression: comp, ZstdLevel: zstd.SpeedFastest, WalkEncoding: StringDictionary})
			if err != nil {
				b.Fatal(err)
			}
			runtime.LockOSThread()
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
			b.ReportMetric(float64(bytes)/vertices, "B/vertex")
		})
	}
}
