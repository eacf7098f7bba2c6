package sink

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/walk"
)

// The benchmarks write one batch of 1M walks of 80 steps (81M walk
// vertices) per iteration over a 16M-vertex graph with random vertex ids, so
// compression sees realistic, poorly compressible data. Chunks of 1024 walks
// arrive in walk id order, as the CPU engine emits them. The sink only reads
// a chunk's slices, so the benchmark shares vertex data between chunks and
// measures the sink alone. Run with
//
//	go test -run '^$' -bench . -benchtime 1x ./sink/
//
// WALKSTAGE_BENCH_WALKS, WALKSTAGE_BENCH_ROW_GROUP, WALKSTAGE_BENCH_UPLOADS
// and WALKSTAGE_BENCH_FILE_BYTES change the batch size, the walks per row
// group, the parallel uploads per part and the part size (default: the
// sink's defaults).
//
// Each target and codec is run with both walk encodings
// (Encode/file/zstd/delta_binary_packed, .../byte_stream_split).
//
// BenchmarkEncode is the whole writer (encoders, part writer, uploads,
// commit) into each store; the page encoder alone, on row groups in
// memory, is sink/pages' BenchmarkEncode (go test -bench Encode
// ./sink/pages).
//
// Reported: vertices/s (walk vertices encoded and uploaded per second,
// Commit included), cpu-ns/vertex (the process's CPU time, all its
// threads, a walk vertex: less at the mercy of a shared machine than the
// rate; an in-process S3 server's counts too), MB/s of Parquet, bytes per
// vertex, held-MiB (the most the writer accounted for at once, see
// WithMemoryLimit) and heap-MiB (the peak Go heap above the starting heap,
// garbage not yet collected included, so an upper bound).
var (
	benchWalks    = envInt("WALKSTAGE_BENCH_WALKS", 1<<20)
	benchRowGroup = envInt("WALKSTAGE_BENCH_ROW_GROUP", 0)
	benchUploads  = envInt("WALKSTAGE_BENCH_UPLOADS", 0)
	benchFile     = envInt("WALKSTAGE_BENCH_FILE_BYTES", 0)
)

const (
	benchLength = 80
	benchChunk  = 1024
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type benchTarget struct {
	name string
	url  func(b *testing.B) string
}

func BenchmarkEncode(b *testing.B) {
	g := ringGraph(b, 1<<24)
	tmpl := bigChunks(g, benchChunk*16, benchLength, benchChunk)
	for _, tg := range []benchTarget{
		{"file", func(b *testing.B) string { return "file://" + b.TempDir() }},
		{"gofakes3", func(b *testing.B) string { return fakeS3(b) }},
		{"versitygw", func(b *testing.B) string { return versityGW(b) }},
	} {
		for _, comp := range []Compression{Zstd, Snappy, None} {
			for _, enc := range []WalkEncoding{DeltaBinaryPacked, ByteStreamSplit} {
				b.Run(tg.name+"/"+string(comp)+"/"+string(enc), func(b *testing.B) {
					bucket := openS3(b, tg.url(b))
					benchWrite(b, bucket, g, tmpl, WithCompression(comp), WithWalkEncoding(enc))
				})
			}
		}
	}
}

func benchWrite(b *testing.B, bucket interface{ Close() error }, g *graph.Graph, tmpl []walk.Chunk, opts ...Option) {
	bk := bucket.(*blob.Bucket)
	ctx := context.Background()
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: benchLength}
	peak := trackPeakHeap()
	var bytes, held int64
	if benchRowGroup > 0 {
		opts = append(opts, WithRowGroupRows(benchRowGroup))
	}
	if benchUploads > 0 {
		opts = append(opts, WithUploadBuffer(DefaultUploadBuffer, benchUploads))
	}
	if benchFile > 0 {
		opts = append(opts, WithFileBytes(int64(benchFile)))
	}
	b.ResetTimer()
	start := time.Now()
	cpu0 := processCPU()
	for i := range b.N {
		w, err := NewBatchWriter(ctx, bk, "bench", BatchMeta{BatchID: "bench", Algorithm: algo, Seed: uint64(i), Engine: "cpu", Walks: int64(benchWalks)}, g, opts...)
		if err != nil {
			b.Fatal(err)
		}
		for lo := 0; lo < benchWalks; lo += benchChunk {
			t := tmpl[(lo/benchChunk)%len(tmpl)]
			n := min(benchChunk, benchWalks-lo)
			ids := make([]uint64, n)
			for k := range ids {
				ids[k] = uint64(lo + k)
			}
			if err := w.Write(ctx, walk.Chunk{WalkIDs: ids, Offsets: t.Offsets[:n+1], Vertices: t.Vertices[:t.Offsets[n]]}); err != nil {
				b.Fatal(err)
			}
		}
		m, err := w.Commit(ctx)
		if err != nil {
			b.Fatal(err)
		}
		bytes += m.Bytes
		held = max(held, w.PeakHeldBytes())
	}
	sec := time.Since(start).Seconds()
	cpu := processCPU() - cpu0
	b.StopTimer()
	vertices := float64(b.N) * float64(benchWalks) * (benchLength + 1)
	b.ReportMetric(vertices/sec, "vertices/s")
	b.ReportMetric(float64(cpu)/vertices, "cpu-ns/vertex")
	b.ReportMetric(float64(bytes)/sec/1e6, "MB/s")
	b.ReportMetric(float64(bytes)/vertices, "B/vertex")
	b.ReportMetric(float64(held)/(1<<20), "held-MiB")
	b.ReportMetric(float64(peak())/(1<<20), "heap-MiB")
}

// trackPeakHeap samples the heap every 10ms until the returned function is
// called, which reports the peak seen above the heap at the start (the
// graph and the chunk templates), i.e. what the sink itself held.
func trackPeakHeap() func() uint64 {
	runtime.GC()
	base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		return peak.Load() - min(peak.Load(), base[0].Value.Uint64())
	}
}

// BenchmarkWriteSamples writes one samples batch an iteration: neighbour
// samples of fan-out [25, 10] (275 edges an instance, src of hop 1 the
// seed) over a 16M-vertex graph with random targets, WALKSTAGE_BENCH_EDGES
// edges in all (default 4M), handed over 4,096 instances at a time as
// `walkstage walk` hands them (graphsample.Columns). Reported: edges/s (Commit included),
// cpu-ns/edge (the process's CPU time an edge, steadier than the rate on a shared machine), MB/s,
// bytes per edge and the peak Go heap above the start.
func BenchmarkWriteSamples(b *testing.B) {
	const fan1, fan2 = 25, 10
	per := fan1 + fan1*fan2
	g := ringGraph(b, 1<<24)
	n := envInt("WALKSTAGE_BENCH_EDGES", 4<<20) / per
	r := rand.New(rand.NewPCG(1, 2))
	nv := uint32(g.NumVertices())
	edges := make([][]graphsample.SampledEdge, n)
	seeds := make([]int64, n)
	for i := range edges {
		seed := r.Uint32N(nv)
		seeds[i] = int64(seed)
		es := make([]graphsample.SampledEdge, 0, per)
		var hop1 [fan1]uint32
		for k := range hop1 {
			hop1[k] = r.Uint32N(nv)
			es = append(es, graphsample.SampledEdge{Hop: 0, Src: seed, Dst: hop1[k], Edge: uint64(seed)})
		}
		for _, v := range hop1 {
			for range fan2 {
				es = append(es, graphsample.SampledEdge{Hop: 1, Src: v, Dst: r.Uint32N(nv), Edge: uint64(v)})
			}
		}
		edges[i] = es
	}
	p := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Seed: 1, InstancesPerSeed: 1, Fanouts: []int{fan1, fan2}}
	// Columns of 4,096 instances each, as `walkstage walk` hands waves over.
	var waves []*graphsample.Columns
	for lo := 0; lo < n; lo += 4096 {
		c := &graphsample.Columns{}
		c.SetEdges(edges[lo:min(lo+4096, n)], 0)
		waves = append(waves, c)
	}
	bk, _ := fileBucket(b)
	ctx := context.Background()
	peak := trackPeakHeap()
	var bytes int64
	b.ResetTimer()
	start := time.Now()
	cpu0 := processCPU()
	for i := range b.N {
		meta := BatchMeta{BatchID: "bench-" + strconv.Itoa(i), Seed: 1, Engine: "cpu", WalkstageVersion: "bench", Sample: &p, Instances: int64(n)}
		w, err := NewBatchWriter(ctx, bk, "bench", meta, g)
		if err != nil {
			b.Fatal(err)
		}
		for j, c := range waves {
			lo := j * 4096
			if err := w.WriteSampleColumns(ctx, int64(lo), seeds[lo:lo+c.Instances()], c); err != nil {
				b.Fatal(err)
			}
		}
		m, err := w.Commit(ctx)
		if err != nil {
			b.Fatal(err)
		}
		bytes += m.Bytes
	}
	sec := time.Since(start).Seconds()
	cpu := processCPU() - cpu0
	b.StopTimer()
	total := float64(b.N) * float64(n*per)
	b.ReportMetric(total/sec, "edges/s")
	b.ReportMetric(float64(cpu)/total, "cpu-ns/edge")
	b.ReportMetric(float64(bytes)/sec/1e6, "MB/s")
	b.ReportMetric(float64(bytes)/total, "B/edge")
	b.ReportMetric(float64(peak())/(1<<20), "heap-MiB")
}

// processCPU is the process's CPU time (user and system) in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
