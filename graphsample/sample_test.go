package graphsample

import (
	"context"
	"fmt"
	"math/bits"
	"reflect"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

func sample(t *testing.T, g *graph.Graph, p SampleParams, starts []uint32, workers int) [][]SampledEdge {
	t.Helper()
	out, st, err := Sample(context.Background(), g, p, starts, workers)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range out {
		n += int64(len(e))
	}
	if st.Edges != n || st.Instances != int64(len(out)) {
		t.Fatalf("stats %+v, want %d instances, %d edges", st, len(out), n)
	}
	return out
}

// exactSubsets enumerates the probability of every k-subset (as a bitmask
// of candidate indices) of successive sampling by weights w.
func exactSubsets(w []float64, k int) map[uint32]float64 {
	out := map[uint32]float64{}
	var rec func(mask uint32, p float64, left int)
	rec = func(mask uint32, p float64, left int) {
		if left == 0 {
			out[mask] += p
			return
		}
		var rest float64
		for i, x := range w {
			if mask&(1<<i) == 0 {
				rest += x
			}
		}
		for i, x := range w {
			if mask&(1<<i) == 0 && x > 0 {
				rec(mask|1<<i, p*x/rest, left-1)
			}
		}
	}
	rec(0, 1, k)
	return out
}

func TestSelectWithoutReplacementMatchesExactSubsetProbabilities(t *testing.T) {
	g := testGraph(t) // vertex 0: ten neighbours 1..10 of weights 1..10
	const trials = 100_000
	// k = 3 of 10 selects by keys, k = 2 of 10 draws with rejection
	// (n > 4k): both must be successive sampling.
	for _, c := range []struct {
		k        int
		weighted bool
	}{{3, false}, {3, true}, {2, false}, {2, true}} {
		k, weighted := c.k, c.weighted
		p := SampleParams{Kind: NeighborSampling, Seed: 7, InstancesPerSeed: trials, Fanouts: []int{k}}
		w := make([]float64, 10)
		for i := range w {
			w[i] = 1
			if weighted {
				w[i] = float64(g.Weights[g.Offsets[0]+uint64(i)])
			}
		}
		if weighted {
			p.EdgeBias = Bias{Kind: BiasEdgeWeight}
		}
		counts := map[uint32]int{}
		incl := make([]int, 10)
		for _, edges := range sample(t, g, p, []uint32{0}, 0) {
			if len(edges) != k {
				t.Fatalf("%d edges, want %d", len(edges), k)
			}
			var mask uint32
			for _, e := range edges {
				c := uint32(e.Edge - g.Offsets[0])
				if mask&(1<<c) != 0 {
					t.Fatalf("candidate %d selected twice", c)
				}
				mask |= 1 << c
				incl[c]++
			}
			counts[mask]++
		}
		exact := exactSubsets(w, k)
		chiSquare(t, fmt.Sprintf("k=%d weighted=%v", k, weighted), counts, exact)
		// Inclusion probabilities are the subsets' marginals.
		pi := make(map[uint32]float64)
		for mask, q := range exact {
			for c := range 10 {
				if mask&(1<<c) != 0 {
					pi[uint32(c)] += q / float64(k)
				}
			}
		}
		ic := map[uint32]int{}
		for c, n := range incl {
			ic[uint32(c)] = n
		}
		chiSquare(t, "inclusion", ic, pi)
	}
}

func TestSelectZeroBiasNeverSelected(t *testing.T) {
	g := testGraph(t)
	// Label bias 0: of vertex 0's neighbours only those with i%3 == 0
	// (3, 6, 9) qualify.
	p := SampleParams{Kind: NeighborSampling, Seed: 1, InstancesPerSeed: 1000, Fanouts: []int{5}, EdgeBias: Bias{Kind: BiasLabel, Label: 0}}
	for _, edges := range sample(t, g, p, []uint32{0}, 0) {
		if len(edges) != 3 {
			t.Fatalf("%d edges, want the 3 of label 0", len(edges))
		}
		for _, e := range edges {
			if g.Labels[e.Edge] != 0 {
				t.Fatalf("edge %+v has label %d", e, g.Labels[e.Edge])
			}
		}
	}
}

func TestNeighborSamplingFanoutsExact(t *testing.T) {
	g := testGraph(t)
	for _, replace := range []bool{false, true} {
		p := SampleParams{Kind: NeighborSampling, Seed: 3, InstancesPerSeed: 50, Fanouts: []int{4, 2, 5}, Replace: replace}
		for i, edges := range sample(t, g, p, []uint32{0, 1, 11, 15}, 0) {
			frontier := []uint32{[]uint32{0, 1, 11, 15}[i/50]}
			k := 0
			for h, f := range p.Fanouts {
				var next []uint32
				for _, v := range frontier {
					want := min(f, g.Degree(v))
					if replace && g.Degree(v) > 0 {
						want = f
					}
					seen := map[uint64]bool{}
					for range want {
						e := edges[k]
						k++
						if e.Hop != int32(h) || e.Src != v || e.Dst != g.Targets[e.Edge] || e.Edge < g.Offsets[v] || e.Edge >= g.Offsets[v+1] {
							t.Fatalf("instance %d edge %d = %+v, want hop %d from %d", i, k-1, e, h, v)
						}
						if seen[e.Edge] && !replace {
							t.Fatalf("edge %d selected twice", e.Edge)
						}
						seen[e.Edge] = true
						next = append(next, e.Dst)
					}
				}
				frontier = next
			}
			if k != len(edges) {
				t.Fatalf("instance %d: %d edges, want %d", i, len(edges), k)
			}
		}
	}
}

func TestLayerSamplingSizesExact(t *testing.T) {
	g := testGraph(t)
	for _, p := range []SampleParams{
		{Kind: LayerSampling, Seed: 5, InstancesPerSeed: 200, LayerSizes: []int{4, 6}},                                       // keys
		{Kind: LayerSampling, Seed: 5, InstancesPerSeed: 200, LayerSizes: []int{2, 1}},                                       // rejection
		{Kind: LayerSampling, Seed: 5, InstancesPerSeed: 200, LayerSizes: []int{2, 1}, EdgeBias: Bias{Kind: BiasEdgeWeight}}, // weighted
	} {
		layerSizesExact(t, g, p)
	}
}

// Layer selection over a one-vertex frontier is successive sampling, by
// keys (k = 3 of 10) and by rejection draws (k = 2 of 10).
func TestLayerSamplingMatchesExactSubsetProbabilities(t *testing.T) {
	g := testGraph(t)
	for _, k := range []int{2, 3} {
		for _, weighted := range []bool{false, true} {
			p := SampleParams{Kind: LayerSampling, Seed: 21, InstancesPerSeed: 100_000, LayerSizes: []int{k}}
			w := make([]float64, 10)
			for i := range w {
				w[i] = 1
				if weighted {
					w[i] = float64(g.Weights[g.Offsets[0]+uint64(i)])
				}
			}
			if weighted {
				p.EdgeBias = Bias{Kind: BiasEdgeWeight}
			}
			counts := map[uint32]int{}
			for _, edges := range sample(t, g, p, []uint32{0}, 0) {
				var mask uint32
				for _, e := range edges {
					mask |= 1 << (e.Edge - g.Offsets[0])
				}
				counts[mask]++
			}
			chiSquare(t, fmt.Sprintf("layer k=%d weighted=%v", k, weighted), counts, exactSubsets(w, k))
		}
	}
}

func layerSizesExact(t *testing.T, g *graph.Graph, p SampleParams) {
	t.Helper()
	for _, edges := range sample(t, g, p, []uint32{0}, 0) {
		frontier := map[uint32]bool{0: true}
		k := 0
		for h, size := range p.LayerSizes {
			cands := 0
			for v := range frontier {
				cands += g.Degree(v)
			}
			next := map[uint32]bool{}
			seen := map[uint64]bool{}
			for range min(size, cands) {
				e := edges[k]
				k++
				if e.Hop != int32(h) || !frontier[e.Src] || seen[e.Edge] || e.Edge < g.Offsets[e.Src] || e.Edge >= g.Offsets[e.Src+1] {
					t.Fatalf("hop %d edge %+v not a fresh out-edge of the frontier %v", h, e, frontier)
				}
				seen[e.Edge] = true
				next[e.Dst] = true
			}
			frontier = next
		}
		if k != len(edges) {
			t.Fatalf("%d edges, want %d", len(edges), k)
		}
	}
}

func TestSnowballIsBreadthFirst(t *testing.T) {
	g := testGraph(t)
	p := SampleParams{Kind: Snowball, Seed: 9, InstancesPerSeed: 1, Depth: 2}
	edges := sample(t, g, p, []uint32{1}, 1)[0]
	// By hand: BFS from 1, each new vertex reached by the first frontier
	// vertex (in order) with an edge to it.
	seen := map[uint32]bool{1: true}
	frontier := []uint32{1}
	var want []SampledEdge
	for h := 0; h < 2; h++ {
		var next []uint32
		for _, v := range frontier {
			for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
				if u := g.Targets[e]; !seen[u] {
					seen[u] = true
					want = append(want, SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: e})
					next = append(next, u)
				}
			}
		}
		frontier = next
	}
	if !reflect.DeepEqual(edges, want) {
		t.Fatalf("snowball\n got %v\nwant %v", edges, want)
	}
	p.MaxVertices = 4
	if got := sample(t, g, p, []uint32{1}, 1)[0]; !reflect.DeepEqual(got, want[:3]) {
		t.Fatalf("max_vertices 4: got %v, want %v", got, want[:3])
	}
}

func TestForestFireBurnsNewVerticesGeometrically(t *testing.T) {
	g := testGraph(t)
	const trials = 50_000
	p := SampleParams{Kind: ForestFire, Seed: 11, InstancesPerSeed: trials, BurnProb: 0.7, Depth: 2, MaxVertices: 8}
	hop0 := map[uint32]int{}
	single := map[uint32]int{} // the one vertex burnt when x = 1 (drawn with rejection)
	pairs := map[uint32]int{}  // the pair burnt when x = 2
	for _, edges := range sample(t, g, p, []uint32{0}, 0) {
		in := map[uint32]bool{0: true}
		frontier := map[uint32]bool{0: true}
		next := map[uint32]bool{}
		h := int32(0)
		n0 := 0
		for _, e := range edges {
			if e.Hop != h {
				if e.Hop != h+1 {
					t.Fatalf("hop %d after %d", e.Hop, h)
				}
				h, frontier, next = e.Hop, next, map[uint32]bool{}
			}
			if !frontier[e.Src] || in[e.Dst] || g.Targets[e.Edge] != e.Dst {
				t.Fatalf("edge %+v: source not in the frontier or target already burnt", e)
			}
			in[e.Dst], next[e.Dst] = true, true
			if h == 0 {
				n0++
			}
		}
		if len(in) > p.MaxVertices || h > 1 {
			t.Fatalf("%d vertices over %d hops", len(in), h+1)
		}
		hop0[uint32(min(n0, 7))]++
		switch n0 {
		case 1:
			single[edges[0].Dst]++
		case 2:
			pairs[1<<(edges[0].Dst-1)|1<<(edges[1].Dst-1)]++
		}
	}
	uniform := map[uint32]float64{}
	for v := uint32(1); v <= 10; v++ {
		uniform[v] = 0.1
	}
	chiSquare(t, "burnt vertex", single, uniform)
	ones := make([]float64, 10)
	for i := range ones {
		ones[i] = 1
	}
	chiSquare(t, "burnt pair", pairs, exactSubsets(ones, 2))
	// Hop 0 burns min(x, 7) of the seed's ten neighbours (7 = max_vertices
	// 8 less the seed), x geometric: P(x = j) = (1-p) p^j.
	exact := map[uint32]float64{}
	q := 1.0
	for j := range 7 {
		exact[uint32(j)] = (1 - 0.7) * q
		q *= 0.7
	}
	exact[7] = q
	chiSquare(t, "burn count", hop0, exact)
}

func TestFrontierWalkPicksSlotsByDegree(t *testing.T) {
	g := testGraph(t)
	const trials = 100_000
	// Slots 0 (degree 10), 15 (a dead end, degree 0), 11 (degree 2).
	p := SampleParams{Kind: FrontierWalk, Seed: 13, InstancesPerSeed: trials, FrontierSize: 3, Samples: 6}
	first := map[uint32]int{}
	for _, edges := range sample(t, g, p, []uint32{0, 15, 11}, 0) {
		slots := []uint32{0, 15, 11}
		for t2, e := range edges {
			j := -1
			for k, v := range slots {
				if v == e.Src {
					j = k
				}
			}
			if e.Hop != int32(t2) || j < 0 || g.Targets[e.Edge] != e.Dst || e.Edge < g.Offsets[e.Src] || e.Edge >= g.Offsets[e.Src+1] {
				t.Fatalf("step %d edge %+v not from the frontier %v", t2, e, slots)
			}
			if t2 == 0 {
				first[e.Src]++
			}
			// which slot: the lowest one holding Src is not necessarily the
			// one picked, but the multiset of slots is what matters.
			slots[j] = e.Dst
		}
	}
	chiSquare(t, "first slot", first, map[uint32]float64{0: 10.0 / 12, 11: 2.0 / 12})
}

func TestSampleDeterministicAcrossWorkers(t *testing.T) {
	g := testGraph(t)
	starts := []uint32{0, 1, 2, 3, 11, 12, 15, 4}
	for _, p := range []SampleParams{
		{Kind: NeighborSampling, Fanouts: []int{3, 2}, EdgeBias: Bias{Kind: BiasEdgeWeight}},
		{Kind: NeighborSampling, Fanouts: []int{3, 2}, Replace: true},
		{Kind: LayerSampling, LayerSizes: []int{3, 5}},
		{Kind: ForestFire, BurnProb: 0.5, Depth: 3},
		{Kind: Snowball, Depth: 2},
		{Kind: FrontierWalk, FrontierSize: 4, Samples: 20},
	} {
		p.Seed, p.InstancesPerSeed = 99, 37
		a := sample(t, g, p, starts, 1)
		b := sample(t, g, p, starts, 4)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: 1 and 4 workers differ", p)
		}
		var waves [][]SampledEdge
		for lo := 0; lo < len(a); lo += 50 {
			w, _, err := SampleRange(context.Background(), g, p, starts, lo, min(50, len(a)-lo), 2)
			if err != nil {
				t.Fatal(err)
			}
			waves = append(waves, w...)
		}
		if !reflect.DeepEqual(a, waves) {
			t.Errorf("%s: waves of 50 instances differ from one call", p)
		}
		p.Seed++
		if c := sample(t, g, p, starts, 4); reflect.DeepEqual(a, c) && p.Kind != Snowball {
			t.Errorf("%s: another seed gives the same samples", p)
		}
	}
}

// A call of one wave checks the seeds its instances start from, not the
// whole request's (checked once a wave, that scan cost as much as the
// wave's sampling on the GPU); a seed beyond the graph still fails the
// wave that starts from it, and the other waves sample as they would with
// a good seed in its place.
func TestSampleRangeChecksOnlyItsSeeds(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	bad := uint32(g.NumVertices() + 5)
	for _, c := range []struct {
		p            SampleParams
		good         [2]int // a range whose seeds are good
		withBad      [2]int // a range whose last instance starts from the bad seed
		wantRangeLen int    // len(RangeSeeds) of good
	}{
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{3, 2}}, [2]int{0, 15}, [2]int{14, 2}, 5},
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{3, 2}}, [2]int{4, 7}, [2]int{15, 1}, 3},
		{SampleParams{Kind: FrontierWalk, FrontierSize: 2, Samples: 5}, [2]int{0, 6}, [2]int{5, 2}, 4},
		{SampleParams{Kind: FrontierWalk, FrontierSize: 2, Samples: 5}, [2]int{3, 2}, [2]int{8, 1}, 2},
	} {
		c.p.Seed, c.p.InstancesPerSeed = 5, 3
		starts := []uint32{0, 1, 2, 3, 11, bad}
		if got := len(c.p.RangeSeeds(starts, c.good[0], c.good[1])); got != c.wantRangeLen {
			t.Errorf("%s: RangeSeeds of instances %v: %d seeds, want %d", c.p, c.good, got, c.wantRangeLen)
		}
		got, _, err := SampleRange(ctx, g, c.p, starts, c.good[0], c.good[1], 2)
		if err != nil {
			t.Fatalf("%s: instances %v from good seeds: %v", c.p, c.good, err)
		}
		fixed := append([]uint32(nil), starts...)
		fixed[len(fixed)-1] = 4
		want, _, err := SampleRange(ctx, g, c.p, fixed, c.good[0], c.good[1], 2)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: instances %v depend on a seed they do not start from", c.p, c.good)
		}
		if _, _, err := SampleRange(ctx, g, c.p, starts, c.withBad[0], c.withBad[1], 2); err == nil {
			t.Errorf("%s: instances %v start from seed %d beyond the graph, and no error", c.p, c.withBad, bad)
		}
	}
}

func TestSampleKeyIsPhiloxCounter(t *testing.T) {
	k := SampleKey{Seed: 0x0123456789abcdef, Instance: 5, Slot: 6, Hop: 7, Candidate: 13}
	w := walk.Philox4x32([4]uint32{5, 6, 7, 3}, [2]uint32{0x89abcdef, 0x01234567})
	if k.Word() != w[1] {
		t.Fatalf("word %x, want %x", k.Word(), w[1])
	}
	hi, _ := bits.Mul64(1<<63, 6)
	if h, _ := mul64(1<<63, 6); h != hi {
		t.Fatal("mul64")
	}
}

func TestSampleParamsValidate(t *testing.T) {
	g := testGraph(t)
	for _, p := range []SampleParams{
		{Kind: NeighborSampling, InstancesPerSeed: 1},
		{Kind: NeighborSampling, InstancesPerSeed: 1, Fanouts: []int{0}},
		{Kind: NeighborSampling, InstancesPerSeed: 0, Fanouts: []int{1}},
		{Kind: NeighborSampling, InstancesPerSeed: 1, Fanouts: []int{1}, Depth: 2},
		{Kind: LayerSampling, InstancesPerSeed: 1, LayerSizes: []int{1}, Replace: true},
		{Kind: ForestFire, InstancesPerSeed: 1, BurnProb: 1, Depth: 1},
		{Kind: ForestFire, InstancesPerSeed: 1, BurnProb: 0.5},
		{Kind: Snowball, InstancesPerSeed: 1, Depth: 1, EdgeBias: Bias{Kind: BiasEdgeWeight}},
		{Kind: FrontierWalk, InstancesPerSeed: 1, FrontierSize: 2},
		{Kind: FrontierWalk, InstancesPerSeed: 1, Samples: 2},
		{Kind: NeighborSampling, InstancesPerSeed: 1, Fanouts: []int{1}, EdgeBias: Bias{Kind: BiasLabel, Label: 9}},
	} {
		if err := p.Validate(g); err == nil {
			t.Errorf("%+v: valid", p)
		}
	}
}

// benchGraph is the CPU engine's bench graph (walk/cpu/bench_test.go).
var benchGraph = sync.OnceValues(func() (*graph.Graph, error) {
	return graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Labels: 5, Name: "bench"})
})

// BenchmarkSample reports SEPS (sampled edges per second) and allocations
// for each sampler on the R-MAT scale-16 bench graph, 1,000 seeds.
// `walkstage bench --algorithms neighbor,...` runs the full-size cases.
func BenchmarkSample(b *testing.B) {
	g, err := benchGraph()
	if err != nil {
		b.Fatal(err)
	}
	var starts []uint32
	for v := uint32(0); len(starts) < 2000; v += 7 {
		if g.Degree(v%uint32(g.NumVertices())) > 0 {
			starts = append(starts, v%uint32(g.NumVertices()))
		}
	}
	for _, c := range []struct {
		name string
		p    SampleParams
		n    int
	}{
		{"neighbor", SampleParams{Kind: NeighborSampling, Fanouts: []int{25, 10}}, 1000},
		{"neighbor-weighted", SampleParams{Kind: NeighborSampling, Fanouts: []int{25, 10}, EdgeBias: Bias{Kind: BiasEdgeWeight}}, 1000},
		{"layer", SampleParams{Kind: LayerSampling, LayerSizes: []int{25, 250}}, 1000},
		{"forest-fire", SampleParams{Kind: ForestFire, BurnProb: 0.7, Depth: 2}, 1000},
		{"frontier", SampleParams{Kind: FrontierWalk, FrontierSize: 2000, Samples: 20000}, 2000},
	} {
		c.p.Seed, c.p.InstancesPerSeed = 1, 1
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var edges int64
			for b.Loop() {
				_, st, err := Sample(context.Background(), g, c.p, starts[:c.n], 0)
				if err != nil {
					b.Fatal(err)
				}
				edges += st.Edges
			}
			b.ReportMetric(float64(edges)/b.Elapsed().Seconds()/1e6, "MSEPS")
		})
	}
}
