//go:build cuda

package gpu

import (
	"context"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
)

// A merged call (graphsample.Merge: several requests' instances, each
// under its own seed and instance ids, kernels/sample.cuh's SampleSeg
// table) gives every request the device's samples of its own call, for
// each of the five device samplers, unweighted and by edge weight, and
// the CPU's merged samples where the device equals the CPU (unweighted).
// The parts differ in seed, seeds, first instance and size (one empty);
// instances_per_seed 2 makes a part start inside a seed's repetitions.
func TestSampleMergedEqualsEachRequestAlone(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	seeds := func(n, mul int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32((i*mul + 1) % g.NumVertices())
		}
		return s
	}
	parts := []graphsample.MergePart{
		{Seed: 77, Starts: seeds(600, 5), First: 0, Count: 1200},
		{Seed: 78, Starts: seeds(300, 7), First: 3, Count: 500},
		{Seed: 77, Starts: seeds(30, 11), First: 0, Count: 0},
		{Seed: 1 << 40, Starts: seeds(900, 13), First: 1199, Count: 601},
	}
	weighted := graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
	for _, p := range []graphsample.SampleParams{
		{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{3, 40, 2}, EdgeBias: weighted},
		{Kind: graphsample.LayerSampling, LayerSizes: []int{25, 250}},
		{Kind: graphsample.LayerSampling, LayerSizes: []int{10, 40}, EdgeBias: weighted},
		{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2},
		{Kind: graphsample.ForestFire, BurnProb: 0.3, Depth: 3, MaxVertices: 50, EdgeBias: weighted},
		{Kind: graphsample.Snowball, Depth: 2, MaxVertices: 500},
		{Kind: graphsample.FrontierWalk, FrontierSize: 3, Samples: 40},
		{Kind: graphsample.FrontierWalk, FrontierSize: 3, Samples: 40, EdgeBias: weighted},
	} {
		p.InstancesPerSeed = 2
		if !e.SamplesOnDevice(p) {
			t.Fatalf("%s: not on the device", p)
		}
		cols := &graphsample.Columns{WithEdges: true}
		// The parts as p takes them: frontier seeds in whole sets, the
		// instances within the request's.
		mparts := make([]graphsample.MergePart, len(parts))
		for k, pt := range parts {
			per := p.SeedsPerInstance()
			pt.Starts = pt.Starts[:len(pt.Starts)/per*per]
			n := p.NumInstances(len(pt.Starts))
			pt.First = min(pt.First, n)
			pt.Count = min(pt.Count, n-pt.First)
			mparts[k] = pt
		}
		var want [][]graphsample.SampledEdge
		for _, pt := range mparts {
			q := p
			q.Seed = pt.Seed
			if _, err := graphsample.SampleColumnsOn(ctx, e, g, q, pt.Starts, pt.First, pt.Count, 0, cols); err != nil {
				t.Fatalf("%s alone: %v", p, err)
			}
			want = append(want, cols.Edges()...)
		}
		m, starts := graphsample.Merge(p, mparts)
		st, err := graphsample.SampleColumnsOn(ctx, e, g, m, starts, 0, len(want), 0, cols)
		if err != nil {
			t.Fatalf("%s merged: %v", p, err)
		}
		got := cols.Edges()
		if d, _ := diffSamples(t, p.String()+" merged", 0, got, want); d > 0 || st.Instances != int64(len(want)) {
			t.Errorf("%s: %d of %d instances of the merged call differ from their requests' own calls", p, d, len(want))
		}
		if p.EdgeBias.Kind == graphsample.BiasConstant {
			// Through columns too: an instance without edges is nil on
			// both sides.
			cpu := &graphsample.Columns{WithEdges: true}
			if _, err := graphsample.SampleColumnsOn(ctx, nil, g, m, starts, 0, len(want), 0, cpu); err != nil {
				t.Fatal(err)
			}
			if d, _ := diffSamples(t, p.String()+" merged vs cpu", 0, got, cpu.Edges()); d > 0 {
				t.Errorf("%s: %d instances of the merged call differ from the CPU's merged call", p, d)
			}
		}
		t.Logf("%s: %d instances, %d edges merged", p, st.Instances, st.Edges)
	}
}
