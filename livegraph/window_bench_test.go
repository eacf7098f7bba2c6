package livegraph

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// BenchmarkWindowSliding streams 8 Mi edge updates whose times move forward
// (64 a millisecond of event time, so the stream spans 131 s of event time)
// into a live graph over a timed base of 65,536 vertices and 1 Mi edges
// spread over the first window, with a window of 8 s ("window", 512 Ki
// inserts' worth) and without one ("none"). Endpoints are skewed toward low
// ids, one insert in a hundred names a new vertex, one update in ten deletes
// an edge inserted a moment before. It reports the delta's size: the most
// appended edges it held at a publication (every 64 Ki updates), at the
// end, its counted bytes at the end and the Go heap's growth over the base
// (after a GC), the edges evicted, and updates per CPU second.
func BenchmarkWindowSliding(b *testing.B) {
	const (
		v       = 1 << 16
		n, per  = 8 << 20, 4096
		perMs   = 64
		window  = 8 * time.Second
		baseLen = 1 << 20
	)
	rng := rand.New(rand.NewPCG(11, 11))
	skewed := func() int64 { return int64(float64(v) * rng.Float64() * rng.Float64()) }
	ms := window.Milliseconds()
	edges := make([]graph.Edge, baseLen)
	for i := range edges {
		edges[i] = graph.Edge{Src: skewed(), Dst: skewed(), Time: rng.Int64N(ms)}
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "sliding", DenseIDs: true, NumVertices: v, Timed: true,
		Duplicates: graph.DupKeepAll, SelfLoops: true})
	if err != nil {
		b.Fatal(err)
	}
	edges = nil
	var recs [][]Update
	next := int64(v)
	var last [16]Update
	for i := 0; i < n; i += per {
		rec := make([]Update, per)
		for k := range rec {
			tm := ms + int64(i+k)/perMs
			if rng.IntN(10) == 0 {
				p := last[rng.IntN(len(last))]
				rec[k] = Update{Op: Delete, Src: p.Src, Dst: p.Dst}
				continue
			}
			s, d := skewed(), skewed()
			if rng.IntN(100) == 0 {
				d, next = next, next+1
			}
			rec[k] = Update{Op: Insert, Src: s, Dst: d, Time: tm - rng.Int64N(50), Has: HasTime}
			last[rng.IntN(len(last))] = rec[k]
		}
		recs = append(recs, rec)
	}
	for _, win := range []bool{true, false} {
		b.Run(map[bool]string{true: "window", false: "none"}[win], func(b *testing.B) {
			var opts []Option
			if win {
				opts = append(opts, WithWindow(window, 0))
			}
			var peak int64
			var st Stats
			var heap float64
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				runtime.GC()
				var m0 runtime.MemStats
				runtime.ReadMemStats(&m0)
				l, err := New(base, opts...)
				if err != nil {
					b.Fatal(err)
				}
				c0 := cpuTime()
				b.StartTimer()
				peak = 0
				for i, r := range recs {
					if err := l.Apply(0, int64(i), r); err != nil {
						b.Fatal(err)
					}
					if i%16 == 15 {
						peak = max(peak, l.Publish().Stats().DeltaEdges)
					}
				}
				s := l.Publish()
				b.StopTimer()
				cpu += cpuTime() - c0
				st = s.Stats()
				runtime.GC()
				var m1 runtime.MemStats
				runtime.ReadMemStats(&m1)
				heap = float64(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
				runtime.KeepAlive(s)
				b.StartTimer()
			}
			b.ReportMetric(float64(peak), "delta-edges-max")
			b.ReportMetric(float64(st.DeltaEdges), "delta-edges-end")
			b.ReportMetric(float64(st.Bytes)/(1<<20), "delta-MiB-end")
			b.ReportMetric(heap/(1<<20), "heap-MiB-end")
			b.ReportMetric(float64(st.Evicted), "evicted")
			b.ReportMetric(float64(st.Late), "late")
			b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "updates/cpu-s")
		})
	}
}
