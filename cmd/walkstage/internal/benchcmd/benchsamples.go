package benchcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
)

// sampleBench configures the bench's graph sampling cases (the C-SAW
// samplers, graphsample.SampleRangeOn: on the engine's device where it takes the
// case, else on the CPU): seeds drawn at random among the vertices with
// out-edges, the samples discarded.
type sampleBench struct {
	seeds             int
	frontierSize      int
	frontierSteps     int
	frontierInstances int
	workers           int
	// waveEdges is about the edges a wave holds (message.SampleWave), as
	// the stage and `walkstage walk` sample; 0: the whole case in one call.
	waveEdges int64
}

// sampleBenchCases are the sampling cases by name.
func sampleBenchCases(sb sampleBench) map[string]graphsample.SampleParams {
	return map[string]graphsample.SampleParams{
		"neighbor":          {Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}},
		"neighbor-weighted": {Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		"layer":             {Kind: graphsample.LayerSampling, LayerSizes: []int{25, 250}},
		"layer-weighted":    {Kind: graphsample.LayerSampling, LayerSizes: []int{25, 250}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		"forest-fire":       {Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2, MaxVertices: 10_000},
		"snowball":          {Kind: graphsample.Snowball, Depth: 2, MaxVertices: 10_000},
		"frontier":          {Kind: graphsample.FrontierWalk, FrontierSize: sb.frontierSize, Samples: sb.frontierSteps},
		"frontier-weighted": {Kind: graphsample.FrontierWalk, FrontierSize: sb.frontierSize, Samples: sb.frontierSteps,
			EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
	}
}

// randomSeeds draws n vertices with out-edges by splitmix64.
func randomSeeds(g *graph.Graph, n int, seed uint64) []uint32 {
	out := make([]uint32, n)
	nv := uint64(g.NumVertices())
	x := seed
	for i := range out {
		for {
			x += 0x9E3779B97F4A7C15
			z := (x ^ x>>30) * 0xBF58476D1CE4E5B9
			z = (z ^ z>>27) * 0x94D049BB133111EB
			if v := uint32((z ^ z>>31) % nv); g.Degree(v) > 0 {
				out[i] = v
				break
			}
		}
	}
	return out
}

// benchSample runs one sampling case on eng (graphsample.SampleColumnsOn,
// in waves of about sb.waveEdges edges as the stage samples, into columns
// reused from wave to wave and handed to a no-op consumer) and prints
// SEPS: sampled edges per second of the whole case (the best of repeat
// runs), the engine that sampled, the waves and the peak RSS.
func benchSample(ctx context.Context, eng walk.Engine, name string, p graphsample.SampleParams, g *graph.Graph, sb sampleBench, seed uint64, repeat int, stdout io.Writer) (benchRow, error) {
	p.Seed, p.InstancesPerSeed = seed, 1
	n := sb.seeds
	if p.Kind == graphsample.FrontierWalk {
		n, p.InstancesPerSeed = p.FrontierSize, sb.frontierInstances
	}
	starts := randomSeeds(g, n, seed)
	total := p.NumInstances(len(starts))
	var best time.Duration
	var st graphsample.SampleStats
	var waves int
	var cols graphsample.Columns
	for r := 0; r < max(repeat, 1); r++ {
		t := time.Now()
		var s graphsample.SampleStats
		var wave, nw int
		var waveEdges int64
		for lo := 0; lo < total; lo += wave {
			if sb.waveEdges > 0 {
				wave = message.SampleWave(p, sb.waveEdges, total-lo, wave, waveEdges)
			} else {
				wave = total - lo
			}
			ws, err := graphsample.SampleColumnsOn(ctx, eng, g, p, starts, lo, wave, sb.workers, &cols)
			if err != nil {
				return benchRow{}, fmt.Errorf("%s: %w", name, err)
			}
			s.Instances += ws.Instances
			s.Edges += ws.Edges
			waveEdges = ws.Edges
			nw++
		}
		if d := time.Since(t); r == 0 || d < best {
			best, st, waves = d, s, nw
		}
	}
	fmt.Fprintf(stdout, "%-18s %s on %s: %d instances, %d sampled edges in %s (%d waves): %.2f M SEPS, %.0f instances/s, peak RSS %.0f MiB\n",
		name, p, graphsample.SampleEngine(eng, p), st.Instances, st.Edges, best.Round(time.Microsecond), waves, float64(st.Edges)/best.Seconds()/1e6,
		float64(st.Instances)/best.Seconds(), peakRSSMiB())
	return benchRow{Case: name, Sampling: p.String(), SampledOn: graphsample.SampleEngine(eng, p), Instances: int64(st.Instances),
		Edges: int64(st.Edges), DurationSeconds: best.Seconds(), EdgesPerSecond: perSecond(int64(st.Edges), best),
		InstancesPerSecond: perSecond(int64(st.Instances), best), PeakRSSBytes: int64(peakRSSMiB() * (1 << 20))}, nil
}
