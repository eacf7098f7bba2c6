package cpu

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

var benchGraph = sync.OnceValues(func() (*graph.Graph, error) {
	return graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Labels: 5, Name: "bench"})
})

// BenchmarkCPU reports steps/s for each algorithm on an R-MAT scale-16 graph
// (one 80-step walk per vertex). `walkstage bench` runs the full-size suite.
func BenchmarkCPU(b *testing.B) {
	g, err := benchGraph()
	if err != nil {
		b.Fatal(err)
	}
	e, _ := New(g, WithFusedTableLimit(1<<40))
	e.PrepareTables()
	packed, _ := New(g, WithFusedTableLimit(0)) // weighted DeepWalk and PPR without the fused table
	packed.PrepareTables()
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	type benchRun struct {
		name string
		e    *Engine
		a    walk.Algorithm
	}
	var runs []benchRun
	for _, a := range allAlgorithms() {
		a.Length = 80
		name := a.Kind.String() + "/" + walk.StepperName(a, g) + map[bool]string{true: "/weighted", false: ""}[a.Weighted]
		runs = append(runs, benchRun{name, e, a})
		if e.fusedFor(a) {
			runs = append(runs, benchRun{name + "/packed", packed, a})
		}
	}
	for _, r := range runs {
		e, a := r.e, r.a
		b.Run(r.name, func(b *testing.B) {
			var steps int64
			for b.Loop() {
				err := e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 1, Starts: starts}}, func(ch walk.Chunk) error { steps += ch.Steps(); return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkBuildFused reports the fused table's build time per edge on an
// R-MAT graph of WALKSTAGE_BENCH_SCALE (default 18; at 20 the offsets, 8
// MiB, no longer sit in L2): "alloc": a fresh table each time, as an engine builds it;
// "fill": the same table again, the computation alone).
func BenchmarkBuildFused(b *testing.B) {
	scale := 18
	if v, err := strconv.Atoi(os.Getenv("WALKSTAGE_BENCH_SCALE")); err == nil && v > 0 {
		scale = v
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("alloc", func(b *testing.B) {
		for b.Loop() {
			owner := new(Engine)
			buildFused(g, owner)
			runtime.KeepAlive(owner)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(g.NumEdges()), "ns/edge")
	})
	b.Run("fill", func(b *testing.B) {
		tab := make([]fusedEntry, g.NumEdges())
		for b.Loop() {
			fillFused(tab, g, 0)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(g.NumEdges()), "ns/edge")
	})
}

// BenchmarkTemporal reports steps/s of temporal walks (80 steps, one per
// vertex) for each time bias on a timed R-MAT graph of
// WALKSTAGE_BENCH_SCALE (default 18), times in [0, 10^6) and the
// exponential bias's scale 10^4: `walkstage bench --time-scale 10000` on
// `graph generate --times 1000000`, in-process and with the tables built
// before the clock starts (WithWorkers from GOMAXPROCS: -cpu 1,2 compares
// one core with two).
func BenchmarkTemporal(b *testing.B) {
	scale := 18
	if v, err := strconv.Atoi(os.Getenv("WALKSTAGE_BENCH_SCALE")); err == nil && v > 0 {
		scale = v
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, TimeSpan: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	for _, c := range []struct {
		name string
		tp   walk.TimeParams
	}{
		{"uniform", walk.TimeParams{}},
		{"linear", walk.TimeParams{Bias: walk.TimeLinear}},
		{"exponential", walk.TimeParams{Bias: walk.TimeExponential, Scale: 10_000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e, err := New(g, WithWorkers(runtime.GOMAXPROCS(0)))
			if err != nil {
				b.Fatal(err)
			}
			job := walk.Job{Algorithm: walk.Algorithm{Kind: walk.Temporal, Length: 80, Time: c.tp}, Seed: 1, Starts: starts}
			discard := func(walk.Chunk) error { return nil }
			if err := e.Run(context.Background(), []walk.Job{job}, discard); err != nil { // builds the tables
				b.Fatal(err)
			}
			var steps int64
			for b.Loop() {
				err := e.Run(context.Background(), []walk.Job{job}, func(ch walk.Chunk) error { steps += ch.Steps(); return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
