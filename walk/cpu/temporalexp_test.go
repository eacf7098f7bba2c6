package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
)

// cellGraph is vertex 0 with edges clustered around the exponential
// bias's cell boundaries for scales 1 and 2 (time keys are t + 2^63, so a
// boundary of G = 256 or 512 falls on a multiple of G) and around t = -1,
// where the boundary of the widest cell (scale >= 2^55: G = 2^63-1) falls,
// with ties and random weights.
func cellGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(38, 1))
	var times []int64
	for _, c := range []int64{256, 512, 1024} {
		for d := int64(-6); d <= 6; d++ {
			times = append(times, c+d)
		}
		times = append(times, c-1, c) // ties on both sides of the boundary
	}
	for d := int64(-4); d <= 4; d++ {
		times = append(times, d)
	}
	var edges []graph.Edge
	for i, tt := range times {
		edges = append(edges, graph.Edge{Src: 0, Dst: int64(i + 1), Time: tt, Weight: 0.25 + 4*r.Float32()})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "cells", DenseIDs: true, Weighted: true, Timed: true,
		NumVertices: len(times) + 1})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The exponential draw over windows whose mass spans two or more time cells
// (the cell sums restart at each, and the parts are weighed by their
// factor to the near end) follows the exact distribution, forward and
// backward, weighted or not, for the narrowest cells (G = 1, every time
// its own cell) and the widest (G clamped to 2^63-1).
func TestTemporalExpCellsDistribution(t *testing.T) {
	g := cellGraph(t)
	e, err := New(g, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]walk.TimeParams{
		"across-256":          {Bias: walk.TimeExponential, Scale: 1, Start: 252, HasStart: true},
		"across-512-gap":      {Bias: walk.TimeExponential, Scale: 2, Start: 507, HasStart: true, MaxGap: 10, HasMaxGap: true},
		"backward-across-256": {Bias: walk.TimeExponential, Scale: 1, Backward: true, Start: 259, HasStart: true},
		"backward-across-512": {Bias: walk.TimeExponential, Scale: 2, Backward: true, Start: 515, HasStart: true, MaxGap: 12, HasMaxGap: true},
		"cell-per-time":       {Bias: walk.TimeExponential, Scale: 0.7, Start: 254, HasStart: true},   // G = 179: cuts at multiples of 179
		"one-unit-cells":      {Bias: walk.TimeExponential, Scale: 0.003, Start: 255, HasStart: true}, // G = 1
		"widest-cells":        {Bias: walk.TimeExponential, Scale: 1 << 60, Start: -3, HasStart: true},
		"backward-widest":     {Bias: walk.TimeExponential, Scale: 1 << 60, Backward: true, Start: 2, HasStart: true},
		"all-unbounded":       {Bias: walk.TimeExponential, Scale: 3},
	}
	const n = 200_000
	starts := make([]uint32, n)
	for name, tp := range cases {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: weighted, Time: tp}
			walks, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 5, Starts: starts})
			counts := map[uint32]int{}
			for _, w := range walks {
				if len(w) != 2 {
					t.Fatalf("%s: walk %v took no step", name, w)
				}
				counts[w[1]]++
			}
			nm := name
			if weighted {
				nm += "-weighted"
			}
			c, p := pooled(counts, exactTemporalStep(g, tp, weighted), n)
			stattest.ChiSquare(t, "cells "+nm, c, p)
		}
	}
}

// The cell sums are built alike on any number of workers (the GPU's
// table is compared with ExpSums), restart at each cell, and each is its
// cell's suffix (forward) or prefix (backward) sum of the bias.
func TestTemporalExpSums(t *testing.T) {
	g := timedRMAT(t, graph.RMATOptions{Scale: 9, EdgeFactor: 8, Seed: 3, Weighted: true, TimeSpan: 4000})
	for _, c := range []struct {
		scale              float64
		backward, weighted bool
	}{{5, false, false}, {5, true, true}, {0.5, false, true}, {1e6, true, false}} {
		e, err := New(g, WithWorkers(3))
		if err != nil {
			t.Fatal(err)
		}
		alg := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: c.weighted, Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: c.scale, Backward: c.backward}}
		got, want := e.expSums(alg), walk.ExpSums(g, c.scale, c.backward, c.weighted)
		G := walk.ExpCell(c.scale)
		for v := 0; v < g.NumVertices(); v++ {
			for k := g.Offsets[v]; k < g.Offsets[v+1]; k++ {
				if math.Float64bits(got[k]) != math.Float64bits(want[k]) {
					t.Fatalf("%+v: sums[%d] %v on three workers, %v on one", c, k, got[k], want[k])
				}
				var sum float64
				cell := walk.TimeKey(g.Times[k]) / G
				for j := g.Offsets[v]; j < g.Offsets[v+1]; j++ {
					if walk.TimeKey(g.Times[j])/G != cell || !c.backward && j < k || c.backward && j > k {
						continue
					}
					o := float64(walk.TimeKey(g.Times[j]) - cell*G)
					if c.backward {
						o = float64(G-1) - o
					}
					x := math.Exp(-o / c.scale)
					if c.weighted {
						x *= float64(g.Weights[g.Offsets[v]+uint64(g.ByTime[j])])
					}
					sum += x
				}
				if math.Abs(got[k]-sum) > 1e-12*sum {
					t.Fatalf("%+v: sums[%d] = %v, want %v", c, k, got[k], sum)
				}
			}
		}
	}
}

// coarseRange leaves lowerTime's (upperTime's) answer in [fa, fb], within
// one run of coarse entries, for any range and bound, ties included.
func TestCoarseRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	times := make([]int64, 5000)
	for i := range times {
		times[i] = int64(i / 7) // runs of ties across entries
	}
	c := walk.CoarseTimes(times)
	for range 20000 {
		a := uint64(r.IntN(len(times)))
		b := a + uint64(r.IntN(len(times)-int(a)+1))
		tt := int64(r.IntN(800)) - 50
		for _, upper := range []bool{false, true} {
			want := lowerTime(times, a, b, tt)
			if upper {
				want = upperTime(times, a, b, tt)
			}
			fa, fb, g := coarseRange(c, a, b, tt, upper)
			if want < fa || want > fb || fb-fa > 2*coarseSpacing || g < fa || g > fb {
				t.Fatalf("[%d, %d) t=%d upper=%v: answer %d outside [%d, %d] or guess %d outside", a, b, tt, upper, want, fa, fb, g)
			}
			for _, gg := range []uint64{g, fa, fb, fa + (fb-fa)/3, a, b} {
				if got := timeFrom(times, fa, fb, tt, upper, gg); got != want {
					t.Fatalf("[%d, %d) t=%d upper=%v: timeFrom from %d in [%d, %d] = %d, want %d", a, b, tt, upper, gg, fa, fb, got, want)
				}
			}
		}
	}
}
