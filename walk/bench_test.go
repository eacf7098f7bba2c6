package walk

import (
	"context"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/graph"
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
	e, _ := NewCPU(g)
	e.PrepareTables()
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	for _, a := range allAlgorithms() {
		a.Length = 80
		b.Run(a.Kind.String()+"/"+a.ResolvedSampler().String()+map[bool]string{true: "/weighted", false: ""}[a.Weighted], func(b *testing.B) {
			var steps int64
			for b.Loop() {
				err := e.Run(context.Background(), []Job{{Algorithm: a, Seed: 1, Starts: starts}}, func(c Chunk) error { steps += c.Steps(); return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
