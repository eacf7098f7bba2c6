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
				err := e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 1, Starts: starts}}, func(c walk.Chunk) error { steps += c.Steps(); return nil })
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
