package cpu

import (
	"context"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// BenchmarkStepCost sets the model against the CPU engine: ns a step per
// case and the model's estimate in O(1) steps, on the graph of issue 32
// (rmat scale 10, edge factor 8, undirected, weighted).
func BenchmarkStepCost(b *testing.B) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 7, Undirected: true, Weighted: true, Labels: 3, Name: "chaos"})
	if err != nil {
		b.Fatal(err)
	}
	m := walk.NewCostModel(g)
	e, _ := New(g)
	starts := make([]uint32, 0, 1000)
	for v := range uint32(g.NumVertices()) {
		if g.Degree(v) > 0 && len(starts) < cap(starts) {
			starts = append(starts, v)
		}
	}
	for _, tc := range []struct {
		name string
		a    walk.Algorithm
	}{
		{"deepwalk-alias", walk.Algorithm{Kind: walk.DeepWalk, Length: 200, Weighted: true}},
		{"deepwalk-zprs", walk.Algorithm{Kind: walk.DeepWalk, Length: 200, Weighted: true, Stepper: walk.StepperZPRS}},
		{"node2vec-p1-q1", walk.Algorithm{Kind: walk.Node2Vec, Length: 200, P: 1, Q: 1}},
		{"node2vec-p0.0625", walk.Algorithm{Kind: walk.Node2Vec, Length: 200, P: 0.0625, Q: 1}},
		{"node2vec-p1e-6", walk.Algorithm{Kind: walk.Node2Vec, Length: 200, P: 1e-6, Q: 1}},
		{"node2vec-zprs", walk.Algorithm{Kind: walk.Node2Vec, Length: 200, P: 1, Q: 1, Stepper: walk.StepperZPRS}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var steps int64
			for b.Loop() {
				if err := e.Run(context.Background(), []walk.Job{{Algorithm: tc.a, Seed: 1, Starts: starts}}, func(c walk.Chunk) error { steps += c.Steps(); return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
			b.ReportMetric(m.StepCost(tc.a), "model-steps")
		})
	}
}
