package ooc

import (
	"context"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// BenchmarkOutOfCore walks a scale-16 R-MAT graph under a budget of a
// quarter of what the in-memory engine needs and reports steps/s, bytes
// read per second and per step, and sweeps over the graph.
func BenchmarkOutOfCore(b *testing.B) {
	g := saveRMAT(b, graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Weighted: true})
	for _, a := range []walk.Algorithm{{Kind: walk.DeepWalk, Length: 80}, {Kind: walk.DeepWalk, Length: 80, Weighted: true}} {
		b.Run(a.ResolvedStepper().String(), func(b *testing.B) {
			e, err := New(context.Background(), g, g.File(), WithMemoryLimit(InMemoryBytes(g)/4), WithLogger(quiet()))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			jobs := []walk.Job{{Algorithm: a, Seed: 1, Starts: allStarts(g, 1)}}
			var steps, read, loads int64
			b.ResetTimer()
			for range b.N {
				if err := e.Run(context.Background(), jobs, func(walk.Chunk) error { return nil }); err != nil {
					b.Fatal(err)
				}
				steps += e.LastRunStats().Steps
				st := e.OutOfCoreStats()
				read += st.BytesRead
				loads += st.Loads
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(steps)/s/1e6, "Msteps/s")
			b.ReportMetric(float64(read)/s/1e6, "MBread/s")
			b.ReportMetric(float64(read)/float64(steps), "Bread/step")
			b.ReportMetric(float64(loads)/float64(b.N)/float64(len(e.Plan().Partitions)), "sweeps")
		})
	}
}
