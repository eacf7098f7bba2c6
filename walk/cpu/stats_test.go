package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
)

func chiSquareCritical(df int) float64 { return stattest.Critical(df) }

func chiSquare(t *testing.T, name string, counts map[uint32]int, probs map[uint32]float64) {
	t.Helper()
	stattest.ChiSquare(t, name, counts, probs)
}

func testGraph(t testing.TB) *graph.Graph { return stattest.Graph(t) }

// exactStep gives the exact next-vertex distribution from cur (after prev)
// for algorithm a, straight from the definitions.
func exactStep(g *graph.Graph, a walk.Algorithm, step int, prev, cur uint32) map[uint32]float64 {
	probs := map[uint32]float64{}
	a0, b0 := g.Offsets[cur], g.Offsets[cur+1]
	var sum float64
	for e := a0; e < b0; e++ {
		w := 1.0
		if a.Weighted {
			w = float64(g.Weights[e])
		}
		x := g.Targets[e]
		switch a.Kind {
		case walk.Node2Vec:
			if prev != graph.NoVertex {
				switch {
				case x == prev:
					w /= a.P
				case g.HasEdge(prev, x):
				default:
					w /= a.Q
				}
			}
		case walk.MetaPath:
			if g.Labels[e] != a.Schema[step%len(a.Schema)] {
				w = 0
			}
		}
		probs[x] += w
		sum += w
	}
	for x := range probs {
		probs[x] /= sum
	}
	return probs
}

func TestStepMatchesExactTransitionProbabilities(t *testing.T) {
	g := testGraph(t)
	cases := []struct {
		name      string
		alg       walk.Algorithm
		step      uint32
		prev, cur uint32
	}{
		{"deepwalk uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, 0, graph.NoVertex, 0},
		{"deepwalk alias", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true}, 0, graph.NoVertex, 0},
		{"deepwalk alias, vertex 3", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true}, 3, 0, 3},
		{"deepwalk zprs weighted", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true, Stepper: walk.StepperZPRS}, 0, graph.NoVertex, 0},
		{"deepwalk dprs weighted", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true, Stepper: walk.StepperDPRS}, 0, graph.NoVertex, 0},
		{"deepwalk zprs uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Stepper: walk.StepperZPRS}, 0, graph.NoVertex, 0},
		{"node2vec rejection", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, P: 2, Q: 0.5}, 1, 3, 0},
		{"node2vec rejection weighted", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 2, Q: 0.5}, 1, 3, 0},
		{"node2vec rejection weighted, q>1", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 0.25, Q: 4}, 2, 0, 4},
		{"node2vec first step", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 2, Q: 0.5}, 0, graph.NoVertex, 0},
		// prev 15 is adjacent to nothing, so every candidate is outward and is
		// accepted with probability 1e-5: nearly every step takes the exact scan.
		{"node2vec fallback scan", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 1e-5, Q: 1}, 1, 15, 0},
		{"node2vec zprs", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 2, Q: 0.5, Stepper: walk.StepperZPRS}, 1, 3, 0},
		{"node2vec dprs", walk.Algorithm{Kind: walk.Node2Vec, Length: 5, Weighted: true, P: 2, Q: 0.5, Stepper: walk.StepperDPRS}, 1, 3, 0},
		{"metapath weighted label tables", walk.Algorithm{Kind: walk.MetaPath, Length: 5, Weighted: true, Schema: []uint8{1, 2}}, 2, graph.NoVertex, 0},
		{"metapath unweighted label tables", walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0, 2}}, 1, graph.NoVertex, 0},
		{"metapath weighted zprs", walk.Algorithm{Kind: walk.MetaPath, Length: 5, Weighted: true, Schema: []uint8{1, 2}, Stepper: walk.StepperZPRS}, 2, graph.NoVertex, 0},
		{"metapath unweighted dprs", walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0, 2}, Stepper: walk.StepperDPRS}, 1, graph.NoVertex, 0},
	}
	const n = 400000
	owner := new(Engine) // keeps the tables mapped (hugemem.Alloc)
	defer runtime.KeepAlive(owner)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.alg.Validate(g); err != nil {
				t.Fatal(err)
			}
			var tab []aliasEntry
			if needsAlias(c.alg) {
				tab = buildPacked(g, owner)
			}
			s := newStepper(g, c.alg, 0x5eed, tab)
			if walk.UsesLabelTables(c.alg, g) {
				s.segs = buildLabelTables(g, owner)
			}
			counts := map[uint32]int{}
			for id := uint64(0); id < n; id++ {
				x, ok := s.step(id, c.step, c.prev, c.cur)
				if !ok {
					t.Fatalf("walk %d ended at %d although it has matching edges", id, c.cur)
				}
				counts[x]++
			}
			chiSquare(t, c.name, counts, exactStep(g, c.alg, int(c.step), c.prev, c.cur))
		})
	}
}

// TestReservoirSamplersExact drives ZPRS and DPRS directly with sizes that
// are not multiples of the lane count, zero biases and one dominant element.
func TestReservoirSamplersExact(t *testing.T) {
	sizes := []int{1, 5, 31, 32, 33, 100, 1000}
	for _, n := range sizes {
		bias := func(i int) float64 {
			if i%5 == 3 {
				return 0
			}
			return float64(1 + (i*7)%11)
		}
		probs := map[uint32]float64{}
		var sum float64
		for i := 0; i < n; i++ {
			sum += bias(i)
		}
		if sum == 0 {
			continue
		}
		for i := 0; i < n; i++ {
			if bias(i) > 0 {
				probs[uint32(i)] = bias(i) / sum
			}
		}
		for _, alg := range []struct {
			name string
			fn   func(int, int, func(int) float64, func(int) uint32) int
		}{{"zprs", zprs}, {"dprs", dprs}} {
			counts := map[uint32]int{}
			trials := 200 * n
			if trials < 100000 {
				trials = 100000
			}
			for trial := 0; trial < trials; trial++ {
				w := func(i int) uint32 {
					x, _, _, _ := walk.Philox(uint32(trial), uint32(i), 7, 0, 1, 2)
					return x
				}
				counts[uint32(alg.fn(n, walk.Lanes, bias, w))]++
			}
			chiSquare(t, alg.name, counts, probs)
		}
	}
	if zprs(4, walk.Lanes, func(int) float64 { return 0 }, func(int) uint32 { return 0 }) != -1 ||
		dprs(4, walk.Lanes, func(int) float64 { return 0 }, func(int) uint32 { return 0 }) != -1 {
		t.Error("reservoir over all-zero biases should select nothing")
	}
}

// TestAliasTablesEncodeWeights checks every vertex's alias table of an R-MAT
// graph reproduces w/sum for every column.
func TestAliasTablesEncodeWeights(t *testing.T) {
	g := testGraph(t)
	prob, alias := walk.BuildAlias(g)
	for v := 0; v < g.NumVertices(); v++ {
		a, b := g.Offsets[v], g.Offsets[v+1]
		d := int(b - a)
		if d == 0 {
			continue
		}
		got := make([]float64, d)
		var sum float64
		for i := 0; i < d; i++ {
			sum += float64(g.Weights[a+uint64(i)])
			got[i] += float64(prob[a+uint64(i)])
			got[alias[a+uint64(i)]] += 1 - float64(prob[a+uint64(i)])
		}
		for i := 0; i < d; i++ {
			want := float64(g.Weights[a+uint64(i)]) / sum * float64(d)
			if math.Abs(got[i]-want) > 1e-5 {
				t.Fatalf("vertex %d column %d: table mass %v, want %v", v, i, got[i], want)
			}
		}
	}
}

// zprsLaneMajor is ZPRS as FlowWalker's Algorithm 4 states it, lane after
// lane; ZPRS interleaves the lanes and must pick the same element.
func zprsLaneMajor(n, k int, bias func(i int) float64, word func(i int) uint32) int {
	if k > n {
		k = max(n, 1)
	}
	sums := make([]float64, k)
	for j := range k {
		for i := j; i < n; i += k {
			sums[j] += bias(i)
		}
	}
	pick := -1
	var before float64
	for j := range k {
		run := before
		for i := j; i < n; i += k {
			w := bias(i)
			if w <= 0 {
				continue
			}
			run += w
			if float64(word(i))*(1.0/(1<<32))*run < w {
				pick = i
			}
		}
		before += sums[j]
	}
	return pick
}

func TestZPRSMatchesLaneMajorOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 3000 {
		n := rng.IntN(200)
		k := []int{1, 3, walk.Lanes, 40}[trial%4]
		b, w := make([]float64, n), make([]uint32, n)
		for i := range b {
			if rng.IntN(5) > 0 { // some zero biases
				b[i] = rng.Float64() * 10
			}
			w[i] = rng.Uint32()
		}
		bias, word := func(i int) float64 { return b[i] }, func(i int) uint32 { return w[i] }
		if got, want := zprs(n, k, bias, word), zprsLaneMajor(n, k, bias, word); got != want {
			t.Fatalf("n %d k %d: ZPRS picked %d, lane-major order %d", n, k, got, want)
		}
	}
}
