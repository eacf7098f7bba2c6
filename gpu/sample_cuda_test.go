//go:build cuda

package gpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// The device's neighbour samples equal graphsample.Sample's: unweighted and
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
	for _, p := range []graphsample.SampleParams{
		{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{3, 40, 2}},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{3, 40, 2}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
	} {
		p.Seed, p.InstancesPerSeed = 77, 2
		want, _, err := graphsample.Sample(ctx, g, p, starts, 0)
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
		// In waves (one of a single instance, one empty), into one reused
		// set of columns without edge indices: the same edges.
		cols := &graphsample.Columns{}
		var waved [][]graphsample.SampledEdge
		for lo, wave := 0, 1; lo <= len(want); lo, wave = lo+wave, min(2*wave+1, 2500) {
			wave = min(wave, len(want)-lo)
			if _, err := graphsample.SampleColumnsOn(ctx, e, g, p, starts, lo, wave, 0, cols); err != nil {
				t.Fatal(err)
			}
			waved = append(waved, cols.Edges()...)
			if wave == 0 {
				break
			}
		}
		if w := withoutEdges(want); !reflect.DeepEqual(waved, w) {
			t.Errorf("%s: columns sampled in waves differ from the CPU's", p)
		}
	}
}

// withoutEdges is edges with every Edge zero, as columns without edge
// indices give them.
func withoutEdges(edges [][]graphsample.SampledEdge) [][]graphsample.SampledEdge {
	out := make([][]graphsample.SampledEdge, len(edges))
	for k, es := range edges {
		if es != nil {
			out[k] = make([]graphsample.SampledEdge, len(es))
			for j, x := range es {
				x.Edge = 0
				out[k][j] = x
			}
		}
	}
	return out
}

// A sampling request's Parquet objects are the same bytes whether the
// engine samples on the device or the CPU does: graphsample.SampleRangeOn in
// waves of instances, as the stage and walkstage walk sample, into the
// sink's writer. (Real batches also record the engine that sampled in the
// manifest and the Parquet key-value metadata, graphsample.SampleEngine; here
// both writers are given one name so that the bytes can be compared.)
func TestSampleParquetMatchesCPU(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 4, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	starts := make([]uint32, 4000)
	for i := range starts {
		starts[i] = uint32(i * 3 % g.NumVertices())
	}
	for _, p := range []graphsample.SampleParams{
		{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{10, 5, 3}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.LayerSampling, LayerSizes: []int{25, 250}},
		{Kind: graphsample.LayerSampling, LayerSizes: []int{10, 100}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.FrontierWalk, FrontierSize: 50, Samples: 2000, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2, MaxVertices: 200, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.Snowball, Depth: 2, MaxVertices: 100},
	} {
		p.Seed, p.InstancesPerSeed = 11, 2
		if got := graphsample.SampleEngine(e, p); got != "gpu" {
			t.Fatalf("%s: SampleEngine = %q, want gpu", p, got)
		}
		n := p.NumInstances(len(starts))
		var objects [2][][]byte
		var edges [2]int64
		for k, eng := range []walk.Engine{e, nil} {
			b, err := store.OpenBucket(ctx, "file://"+t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			meta := sink.BatchMeta{BatchID: "b", Seed: p.Seed, Engine: "either", WalkstageVersion: "test", Sample: &p,
				Instances: int64(n), SampleEdgeWeight: p.Weighted()}
			w, err := sink.NewBatchWriter(ctx, b, "walks", meta, g, sink.WithFileBytes(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			const wave = 1500
			for lo := 0; lo < n; lo += wave {
				es, st, err := graphsample.SampleRangeOn(ctx, eng, g, p, starts, lo, min(wave, n-lo), 0)
				if err != nil {
					t.Fatal(err)
				}
				edges[k] += st.Edges
				seeds := make([]int64, len(es))
				for j := range seeds {
					seeds[j] = g.ExternalID(starts[(lo+j)/p.InstancesPerSeed*p.SeedsPerInstance()])
				}
				if err := w.WriteSamples(ctx, int64(lo), seeds, es); err != nil {
					t.Fatal(err)
				}
			}
			m, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Files {
				data, err := b.ReadAll(ctx, f.Key)
				if err != nil {
					t.Fatal(err)
				}
				objects[k] = append(objects[k], data)
			}
			b.Close()
		}
		same := len(objects[0]) == len(objects[1])
		var size int
		for i := 0; same && i < len(objects[0]); i++ {
			same = bytes.Equal(objects[0][i], objects[1][i])
			size += len(objects[0][i])
		}
		t.Logf("%s: %d instances, %d edges on the device, %d on the CPU, %d objects of %d bytes, identical %v", p, n, edges[0], edges[1],
			len(objects[0]), size, same)
		if !same || edges[0] != edges[1] || edges[0] == 0 {
			t.Errorf("%s: the device's objects differ from the CPU's", p)
		}
	}
}

// The device's layer samples equal graphsample.Sample's, nil for nil: on R-MAT
// (rejection draws, keys over small frontiers, layers that take every edge)
// and on a hub whose one heavy edge defeats the draws, so the keys decide,
// stored when they fit the warp's buffer and recomputed round by round when
// they do not.
func TestSampleLayerMatchesCPU(t *testing.T) {
	ctx := context.Background()
	rmat, hub := rmatAndHub(t)
	weighted := graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
	for _, c := range []struct {
		g      *graph.Graph
		starts int
		p      graphsample.SampleParams
	}{
		{rmat, 3000, graphsample.SampleParams{LayerSizes: []int{25, 250}}},
		{rmat, 3000, graphsample.SampleParams{LayerSizes: []int{25, 250}, EdgeBias: weighted}},
		{rmat, 3000, graphsample.SampleParams{LayerSizes: []int{3, 40, 2}}},
		{rmat, 3000, graphsample.SampleParams{LayerSizes: []int{3, 40, 2}, EdgeBias: weighted}},
		{rmat, 1000, graphsample.SampleParams{LayerSizes: []int{200, 1000}}},
		{rmat, 1000, graphsample.SampleParams{LayerSizes: []int{200, 1000}, EdgeBias: weighted}},
		{hub, 50, graphsample.SampleParams{LayerSizes: []int{2, 5}, EdgeBias: weighted}},   // hop 0: keys recomputed
		{hub, 50, graphsample.SampleParams{LayerSizes: []int{2, 300}, EdgeBias: weighted}}, // hop 0: keys stored
		{hub, 50, graphsample.SampleParams{LayerSizes: []int{2, 5}}},
	} {
		e := newEngine(t, c.g)
		p := c.p
		p.Kind, p.Seed, p.InstancesPerSeed = graphsample.LayerSampling, 77, 2
		starts := make([]uint32, c.starts)
		for i := range starts {
			starts[i] = uint32(i * 5 % c.g.NumVertices())
		}
		want, _, err := graphsample.Sample(ctx, c.g, p, starts, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := e.SampleLayer(ctx, p, starts)
		if err != nil {
			t.Fatal(err)
		}
		diff, empty := diffSamples(t, c.g.Name+" "+p.String(), 0, got, want)
		t.Logf("%s %s: %d instances (%d without edges), %d edges, %d differ; kernel %s", c.g.Name, p, st.Instances, empty, st.Edges, diff, st.Kernel)
		if diff > 0 || len(got) != len(want) {
			t.Errorf("%s %s: %d of %d instances differ from the CPU's", c.g.Name, p, diff, len(want))
		}
		e.Close()
	}
}

// The device's frontier walks equal graphsample.Sample's, empty for empty: large
// frontiers (a lane's range of slots over several loads) and single-slot
// ones, unweighted and weighted, step counts that are not multiples of 32,
// and a seed set of isolated vertices, whose walk stops before its first
// step.
func TestSampleFrontierMatchesCPU(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	var isolated []uint32
	for v := uint32(0); int(v) < g.NumVertices() && len(isolated) < 50; v++ {
		if g.Degree(v) == 0 {
			isolated = append(isolated, v)
		}
	}
	for _, c := range []struct {
		size, samples, sets int
		weighted            bool
	}{{2000, 1000, 20, false}, {2000, 1000, 20, true}, {1, 500, 300, false}, {1, 500, 300, true}, {50, 3000, 40, true},
		{5000, 333, 6, false}} {
		p := graphsample.SampleParams{Kind: graphsample.FrontierWalk, FrontierSize: c.size, Samples: c.samples, Seed: 77, InstancesPerSeed: 2}
		if c.weighted {
			p.EdgeBias = graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
		}
		starts := make([]uint32, c.size*c.sets)
		for i := range starts {
			starts[i] = uint32(uint64(i) * 2654435761 % uint64(g.NumVertices()))
		}
		if c.size == 50 { // the last set: isolated vertices only
			copy(starts[len(starts)-50:], isolated)
		}
		want, _, err := graphsample.Sample(ctx, g, p, starts, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := e.SampleFrontier(ctx, p, starts)
		if err != nil {
			t.Fatal(err)
		}
		diff, empty := diffSamples(t, p.String(), 0, got, want)
		t.Logf("%s: %d instances (%d without edges), %d edges, %d differ; kernel %s", p, st.Instances, empty, st.Edges, diff, st.Kernel)
		if diff > 0 || len(got) != len(want) {
			t.Errorf("%s: %d of %d instances differ from the CPU's", p, diff, len(want))
		}
	}
}

// The device's forest-fire and snowball samples equal graphsample.Sample's, nil
// for nil: on R-MAT (draws with rejection at high degrees, keys over the
// candidates at low ones, max_vertices cuts, samples that outgrow the
// warps' first slices and run again), on the hub graph, and on a clique
// whose later hops find most targets sampled, so the draws run out and
// every remaining candidate burns.
func TestSampleFireMatchesCPU(t *testing.T) {
	ctx := context.Background()
	rmat, hub := rmatAndHub(t)
	var edges []graph.Edge
	const k = 64
	for i := int64(0); i < k; i++ {
		for j := int64(0); j < k; j++ {
			if i != j {
				edges = append(edges, graph.Edge{Src: i, Dst: j, Weight: float32((i*7+j*3)%10 + 1)})
			}
		}
	}
	clique, err := graph.FromEdges(edges, graph.BuildOptions{Name: "clique", Weighted: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	weighted := graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
	fire := func(p float64, depth, maxv int, b graphsample.Bias) graphsample.SampleParams {
		return graphsample.SampleParams{Kind: graphsample.ForestFire, BurnProb: p, Depth: depth, MaxVertices: maxv, EdgeBias: b}
	}
	snow := func(depth, maxv int) graphsample.SampleParams {
		return graphsample.SampleParams{Kind: graphsample.Snowball, Depth: depth, MaxVertices: maxv}
	}
	for _, c := range []struct {
		g      *graph.Graph
		starts int
		p      graphsample.SampleParams
	}{
		{rmat, 3000, fire(0.7, 2, 0, graphsample.Bias{})},
		{rmat, 3000, fire(0.7, 2, 0, weighted)},
		{rmat, 3000, fire(0.3, 3, 50, graphsample.Bias{})},
		{rmat, 3000, fire(0.3, 3, 50, weighted)},
		{rmat, 1000, fire(0.9, 3, 5000, graphsample.Bias{})}, // past the first 1,024-edge slices
		{rmat, 1000, fire(0.9, 3, 5000, weighted)},
		{rmat, 3000, snow(2, 500)},
		{rmat, 500, snow(2, 0)},
		{rmat, 3000, snow(3, 100)},
		{hub, 50, fire(0.7, 2, 0, weighted)},
		{hub, 50, fire(0.95, 3, 0, graphsample.Bias{})},
		{hub, 50, snow(2, 0)},
		{hub, 50, fire(0.99, 2, 0, weighted)}, // the hub's burns pass the first 256 picks
		{clique, 64, fire(0.8, 4, 0, graphsample.Bias{})},
		{clique, 64, fire(0.8, 4, 0, weighted)},
		{clique, 64, fire(0.5, 3, 20, weighted)},
	} {
		e := newEngine(t, c.g)
		p := c.p
		p.Seed, p.InstancesPerSeed = 77, 2
		starts := make([]uint32, c.starts)
		for i := range starts {
			starts[i] = uint32(i * 5 % c.g.NumVertices())
		}
		want, _, err := graphsample.Sample(ctx, c.g, p, starts, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := e.SampleFire(ctx, p, starts)
		if err != nil {
			t.Fatal(err)
		}
		diff, empty := diffSamples(t, c.g.Name+" "+p.String(), 0, got, want)
		t.Logf("%s %s: %d instances (%d without edges), %d edges, %d differ; kernel %s, %d rounds", c.g.Name, p, st.Instances, empty,
			st.Edges, diff, st.Kernel, st.Rounds)
		if diff > 0 || len(got) != len(want) {
			t.Errorf("%s %s: %d of %d instances differ from the CPU's", c.g.Name, p, diff, len(want))
		}
		e.Close()
	}
}

// With tiny first slices and pools, forest fire and snowball take many
// rounds (instances that outgrow their slices, instances that find the
// pool full) and still equal graphsample.Sample's, for a range of instances that
// does not start at 0.
func TestSampleFireRoundsMatchCPU(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	saved := fireFirst
	defer func() { fireFirst = saved }()
	fireFirst.edges, fireFirst.picks, fireFirst.perInstance, fireFirst.pool = 4, 1, 1, 0
	starts := make([]uint32, 2000)
	for i := range starts {
		starts[i] = uint32(i * 7 % g.NumVertices())
	}
	for _, p := range []graphsample.SampleParams{
		{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2},
		{Kind: graphsample.ForestFire, BurnProb: 0.9, Depth: 3, MaxVertices: 3000, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
		{Kind: graphsample.Snowball, Depth: 2, MaxVertices: 300},
	} {
		p.Seed, p.InstancesPerSeed = 5, 2
		const first, count = 700, 3000
		want, _, err := graphsample.SampleRange(ctx, g, p, starts, first, count, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := e.SampleFireRange(ctx, p, starts, first, count)
		if err != nil {
			t.Fatal(err)
		}
		diff, _ := diffSamples(t, p.String(), first, got, want)
		t.Logf("%s: %d instances, %d edges, %d differ; %d rounds, kernels %s", p, st.Instances, st.Edges, diff, st.Rounds, st.Kernel)
		if diff > 0 || len(got) != len(want) || st.Rounds < 2 {
			t.Errorf("%s: %d of %d instances differ from the CPU's (%d rounds)", p, diff, len(want), st.Rounds)
		}
	}
}

// TestSampleFireSEPS logs SEPS of forest fire (p = 0.7, depth 2,
// unweighted and weighted) and snowball (depth 2, max_vertices 100) on
// R-MAT scales 18 and 22 (WALKSTAGE_SEPS_SCALES) with 1 M seeds, best of 2,
// beside the CPU's graphsample.Sample on the same host.
func TestSampleFireSEPS(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark")
	}
	ctx := context.Background()
	for _, scale := range sepsScales(t) {
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
		for _, p := range []graphsample.SampleParams{
			{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2},
			{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}},
			{Kind: graphsample.Snowball, Depth: 2, MaxVertices: 100},
		} {
			p.Seed, p.InstancesPerSeed = 1, 1
			var best SampleStats
			var got [][]graphsample.SampledEdge
			for r := 0; r < 2; r++ {
				out, st, err := e.SampleFire(ctx, p, starts)
				if err != nil {
					t.Fatal(err)
				}
				if r == 0 || st.Kernel < best.Kernel {
					best = st
				}
				got = out
			}
			tc := time.Now()
			want, cst, _ := graphsample.Sample(ctx, g, p, starts, 0)
			cpu := time.Since(tc)
			same := reflect.DeepEqual(got, want)
			t.Logf("SEPS %s scale %d: %d edges, kernels %s (%d rounds) = %.0f M SEPS; wall %s = %.0f M edges/s; CPU (%d cores) %s = %.1f M SEPS; same as the CPU %v",
				p, scale, best.Edges, best.Kernel, best.Rounds, float64(best.Edges)/best.Kernel.Seconds()/1e6, best.Wall,
				float64(best.Edges)/best.Wall.Seconds()/1e6, runtime.NumCPU(), cpu, float64(cst.Edges)/cpu.Seconds()/1e6, same)
			if !same {
				t.Errorf("%s scale %d: the device's samples differ from the CPU's", p, scale)
			}
			got, want = nil, nil
			runtime.GC()
		}
		e.Close()
		g.Close()
	}
}

func headEdges(es []graphsample.SampledEdge) string {
	if len(es) > 6 {
		return fmt.Sprint(es[:6], "...")
	}
	return fmt.Sprint(es)
}

// TestSampleNeighborsSEPS logs SEPS (sampled edges over kernel time) of
// neighbour sampling with fan-out [25, 10] and layer sampling with sizes
// [25, 250], unweighted and weighted, on R-MAT scales 18 and 22 with 1 M
// seeds, beside the CPU's graphsample.Sample on the same host
// (WALKSTAGE_SEPS_SCALES picks other scales).
func TestSampleNeighborsSEPS(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark")
	}
	ctx := context.Background()
	for _, scale := range sepsScales(t) {
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
		for _, c := range []struct {
			kind     graphsample.SampleKind
			weighted bool
		}{{graphsample.NeighborSampling, false}, {graphsample.NeighborSampling, true}, {graphsample.LayerSampling, false}, {graphsample.LayerSampling, true}} {
			p := graphsample.SampleParams{Kind: c.kind, Fanouts: []int{25, 10}, Seed: 1, InstancesPerSeed: 1}
			sample := e.SampleNeighbors
			if c.kind == graphsample.LayerSampling {
				p.Fanouts, p.LayerSizes, sample = nil, []int{25, 250}, e.SampleLayer
			}
			weighted := c.weighted
			if weighted {
				p.EdgeBias = graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
			}
			if c.kind == graphsample.NeighborSampling {
				// Into reused columns (no edge indices), as the stage and
				// the bench sample; the copy back through the pinned
				// staging buffers and, for comparison, straight into
				// pageable memory.
				for _, stage := range []int64{defaultStagingBytes, 0} {
					e.staging.size = stage
					var cols graphsample.Columns
					var best SampleStats
					for r := 0; r < 3; r++ {
						st, err := e.SampleNeighborColumns(ctx, p, starts, 0, -1, &cols)
						if err != nil {
							t.Fatal(err)
						}
						if r == 0 || st.Wall < best.Wall {
							best = st
						}
					}
					t.Logf("SEPS %s scale %d weighted=%v staging %d MiB: %d edges, selection kernels %s = %.0f M SEPS; on-device bookkeeping %s; copy back %s (%.1f GB/s); whole call %s = %.0f M edges/s",
						p.Kind, scale, weighted, stage>>20, best.Edges, best.Kernel, float64(best.Edges)/best.Kernel.Seconds()/1e6,
						best.Resolve, best.Copy, float64(best.Edges)*12/best.Copy.Seconds()/1e9, best.Wall, float64(best.Edges)/best.Wall.Seconds()/1e6)
				}
				e.staging.size = defaultStagingBytes
				if weighted {
					continue // the CPU's figure: below, once
				}
				tc := time.Now()
				_, cst, _ := graphsample.Sample(ctx, g, p, starts, 0)
				cpu := time.Since(tc)
				t.Logf("SEPS %s scale %d: CPU (%d cores) %s = %.1f M SEPS", p.Kind, scale, runtime.NumCPU(), cpu, float64(cst.Edges)/cpu.Seconds()/1e6)
				continue
			}
			var best SampleStats
			for r := 0; r < 3; r++ {
				_, st, err := sample(ctx, p, starts)
				if err != nil {
					t.Fatal(err)
				}
				if r == 0 || st.Kernel < best.Kernel {
					best = st
				}
			}
			t.Logf("SEPS %s scale %d weighted=%v: %d edges, kernels %s = %.0f M SEPS; packing on the device %s; copy back (with edge indices) %s; whole call %s = %.0f M edges/s",
				p.Kind, scale, weighted, best.Edges, best.Kernel, float64(best.Edges)/best.Kernel.Seconds()/1e6, best.Resolve, best.Copy, best.Wall,
				float64(best.Edges)/best.Wall.Seconds()/1e6)
		}
		e.Close()
		g.Close()
	}
}

// sepsScales are the R-MAT scales of the SEPS tests: 18 and 22, or
// WALKSTAGE_SEPS_SCALES (e.g. "22").
func sepsScales(t *testing.T) []int {
	scales := []int{18, 22}
	if v := os.Getenv("WALKSTAGE_SEPS_SCALES"); v != "" {
		scales = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("WALKSTAGE_SEPS_SCALES=%q", v)
			}
			scales = append(scales, n)
		}
	}
	return scales
}

// TestSampleFrontierSEPS logs the frontier walk's SEPS (frontier 2,000,
// 100,000 steps, 8,192 instances; best of 2), unweighted and weighted, beside
// the CPU's on 256 of the instances.
func TestSampleFrontierSEPS(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark")
	}
	ctx := context.Background()
	for _, scale := range sepsScales(t) {
		g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true,
			Name: fmt.Sprintf("rmat%d", scale)})
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(t, g)
		frontierSEPS(ctx, t, e, g, scale)
		e.Close()
		g.Close()
	}
}

// frontierSEPS is TestSampleFrontierSEPS on one graph.
func frontierSEPS(ctx context.Context, t *testing.T, e *Engine, g *graph.Graph, scale int) {
	const size, steps, instances, cpuInstances = 2000, 100_000, 8192, 256
	starts := make([]uint32, size*instances)
	for i := range starts {
		starts[i] = uint32(uint64(i) * 2654435761 % uint64(g.NumVertices()))
	}
	for _, weighted := range []bool{false, true} {
		p := graphsample.SampleParams{Kind: graphsample.FrontierWalk, FrontierSize: size, Samples: steps, Seed: 1, InstancesPerSeed: 1}
		if weighted {
			p.EdgeBias = graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
		}
		var best SampleStats
		for r := 0; r < 2; r++ {
			_, st, err := e.SampleFrontier(ctx, p, starts)
			if err != nil {
				t.Fatal(err)
			}
			if r == 0 || st.Kernel < best.Kernel {
				best = st
			}
			runtime.GC()
		}
		tc := time.Now()
		_, cst, _ := graphsample.Sample(ctx, g, p, starts[:size*cpuInstances], 0)
		cpu := time.Since(tc)
		t.Logf("SEPS frontier scale %d weighted=%v, %d instances: %d edges, kernel %s = %.0f M SEPS; wall %s = %.0f M edges/s; CPU (%d cores, %d instances) %s = %.1f M SEPS",
			scale, weighted, instances, best.Edges, best.Kernel, float64(best.Edges)/best.Kernel.Seconds()/1e6, best.Wall,
			float64(best.Edges)/best.Wall.Seconds()/1e6, runtime.NumCPU(), cpuInstances, cpu, float64(cst.Edges)/cpu.Seconds()/1e6)
	}
}

// rmatAndHub are the sampler tests' graphs: R-MAT scale 14, weighted and
// undirected, and a weighted hub whose 1,000 spokes have one heavy edge
// (1e9 against 1e-3), so rejection draws fail and the keys decide.
func rmatAndHub(t *testing.T) (rmat, hub *graph.Graph) {
	t.Helper()
	rmat, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Name: "rmat14"})
	if err != nil {
		t.Fatal(err)
	}
	var edges []graph.Edge
	const spokes = 1000
	for i := int64(1); i <= spokes; i++ {
		w := float32(1e-3)
		if i == 1 {
			w = 1e9
		}
		edges = append(edges, graph.Edge{Src: 0, Dst: i, Weight: w})
		for _, d := range []int64{1, 2, 3} {
			edges = append(edges, graph.Edge{Src: i, Dst: (i+d)%spokes + 1, Weight: float32(d)})
		}
		edges = append(edges, graph.Edge{Src: i, Dst: 0, Weight: 1})
	}
	hub, err = graph.FromEdges(edges, graph.BuildOptions{Name: "hub", Weighted: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	return rmat, hub
}

// diffSamples counts the instances of got that differ from want's
// (reflect.DeepEqual: a nil and an empty instance differ) and want's
// instances without edges, and logs the first difference (instances
// numbered from first).
func diffSamples(t *testing.T, name string, first int, got, want [][]graphsample.SampledEdge) (diff, empty int) {
	t.Helper()
	for i := range want {
		if len(want[i]) == 0 {
			empty++
		}
		var g []graphsample.SampledEdge
		if i < len(got) {
			g = got[i]
		}
		if !reflect.DeepEqual(g, want[i]) {
			if diff == 0 {
				t.Logf("%s: instance %d (%d edges on the device, %d on the CPU)\n gpu %v\n cpu %v", name, first+i,
					len(g), len(want[i]), headEdges(g), headEdges(want[i]))
			}
			diff++
		}
	}
	return diff, empty
}
