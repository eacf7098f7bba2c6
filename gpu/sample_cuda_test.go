//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// The device's neighbour samples equal walk.Sample's: unweighted and
// weighted, fan-outs that take every edge, draw with rejection and fall
// back to keys.
func TestSampleNeighborsMatchesCPU(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	starts := make([]uint32, 3000)
	for i := range starts {
		starts[i] = uint32(i * 5 % g.NumVertices())
	}
	for _, p := range []walk.SampleParams{
		{Kind: walk.NeighborSampling, Fanouts: []int{25, 10}},
		{Kind: walk.NeighborSampling, Fanouts: []int{25, 10}, EdgeBias: walk.Bias{Kind: walk.BiasEdgeWeight}},
		{Kind: walk.NeighborSampling, Fanouts: []int{3, 40, 2}},
		{Kind: walk.NeighborSampling, Fanouts: []int{3, 40, 2}, EdgeBias: walk.Bias{Kind: walk.BiasEdgeWeight}},
	} {
		p.Seed, p.InstancesPerSeed = 77, 2
		want, _, err := walk.Sample(ctx, g, p, starts, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := e.SampleNeighbors(ctx, p, starts)
		if err != nil {
			t.Fatal(err)
		}
		diff := 0
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				if diff == 0 {
					t.Logf("%s: instance %d\n gpu %v\n cpu %v", p, i, headEdges(got[i]), headEdges(want[i]))
				}
				diff++
			}
		}
		t.Logf("%s: %d instances, %d edges, %d differ; kernels %s", p, st.Instances, st.Edges, diff, st.Kernel)
		if diff > 0 {
			t.Errorf("%s: %d of %d instances differ from the CPU's", p, diff, len(want))
		}
	}
}

func headEdges(es []walk.SampledEdge) string {
	if len(es) > 6 {
		return fmt.Sprint(es[:6], "...")
	}
	return fmt.Sprint(es)
}

// TestSampleNeighborsSEPS logs SEPS (sampled edges over kernel time) of
// fan-out [25, 10], unweighted and weighted, on R-MAT scales 18 and 22 with
// 1 M seeds, beside the CPU's walk.Sample on the same host.
func TestSampleNeighborsSEPS(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark")
	}
	ctx := context.Background()
	for _, scale := range []int{18, 22} {
		t0 := time.Now()
		g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true,
			Name: fmt.Sprintf("rmat%d", scale)})
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(t, g)
		t.Logf("scale %d: V=%d E=%d ready in %s", scale, g.NumVertices(), g.NumEdges(), time.Since(t0))
		starts := make([]uint32, 1_000_000)
		for i := range starts {
			starts[i] = uint32(uint64(i) * 2654435761 % uint64(g.NumVertices()))
		}
		for _, weighted := range []bool{false, true} {
			p := walk.SampleParams{Kind: walk.NeighborSampling, Fanouts: []int{25, 10}, Seed: 1, InstancesPerSeed: 1}
			if weighted {
				p.EdgeBias = walk.Bias{Kind: walk.BiasEdgeWeight}
			}
			var best SampleStats
			for r := 0; r < 3; r++ {
				_, st, err := e.SampleNeighbors(ctx, p, starts)
				if err != nil {
					t.Fatal(err)
				}
				if r == 0 || st.Kernel < best.Kernel {
					best = st
				}
			}
			tc := time.Now()
			_, cst, _ := walk.Sample(ctx, g, p, starts, 0)
			cpu := time.Since(tc)
			t.Logf("SEPS scale %d weighted=%v: %d edges, kernels %s = %.0f M SEPS; wall with host frontier %s = %.0f M edges/s; CPU (%d cores) %s = %.1f M SEPS",
				scale, weighted, best.Edges, best.Kernel, float64(best.Edges)/best.Kernel.Seconds()/1e6, best.Wall,
				float64(best.Edges)/best.Wall.Seconds()/1e6, runtime.NumCPU(), cpu, float64(cst.Edges)/cpu.Seconds()/1e6)
		}
		e.Close()
		g.Close()
	}
}
