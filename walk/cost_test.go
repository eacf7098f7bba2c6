package walk

import (
	"math"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// starGraph is an undirected star: vertex 0 joined to eight leaves, so
// Σ d = 16, Σ d² = 8² + 8 = 72 and the walk degree is 4.5.
func starGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := int64(1); i <= 8; i++ {
		edges = append(edges, graph.Edge{Src: 0, Dst: i, Weight: 1, Label: uint8(i % 3)}, graph.Edge{Src: i, Dst: 0, Weight: 1, Label: uint8(i % 3)})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "star", Weighted: true, Labelled: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCostModelEstimates(t *testing.T) {
	g := starGraph(t)
	m := NewCostModel(g)
	if m.WalkDegree() != 4.5 {
		t.Fatalf("walk degree %v, want 4.5", m.WalkDegree())
	}
	// Node2Vec's bound at R = max(f)/min(f): attempts R (1 - (1-1/R)^64),
	// then a scan of the walk degree with probability (1-1/R)^64.
	n2v := func(r float64) float64 {
		fb := math.Pow(1-1/r, 64)
		return r*(1-fb) + fb*4.5
	}
	for _, tc := range []struct {
		name string
		a    Algorithm
		step float64 // StepCost
	}{
		{"deepwalk uniform", Algorithm{Kind: DeepWalk, Length: 80}, 1},
		{"deepwalk alias", Algorithm{Kind: DeepWalk, Length: 80, Weighted: true}, 1},
		{"ppr counts its longest walk", Algorithm{Kind: PPR, Length: 80, StopProb: 0.5}, 1},
		{"deepwalk zprs scans the walk degree", Algorithm{Kind: DeepWalk, Length: 80, Weighted: true, Stepper: StepperZPRS}, 4.5},
		{"deepwalk dprs", Algorithm{Kind: DeepWalk, Length: 80, Stepper: StepperDPRS}, 4.5},
		{"metapath on label tables", Algorithm{Kind: MetaPath, Length: 80, Schema: []uint8{0, 1}}, 1},
		{"metapath through zprs", Algorithm{Kind: MetaPath, Length: 80, Schema: []uint8{0, 1}, Stepper: StepperZPRS}, 4.5},
		{"node2vec p=q=1 accepts at once", Algorithm{Kind: Node2Vec, Length: 80, P: 1, Q: 1}, 1},
		{"node2vec p=2 q=0.5", Algorithm{Kind: Node2Vec, Length: 80, P: 2, Q: 0.5}, n2v(4)},
		{"node2vec p=0.25 (R=4)", Algorithm{Kind: Node2Vec, Length: 80, P: 0.25, Q: 1}, n2v(4)},
		{"node2vec q=4 is R=4 too", Algorithm{Kind: Node2Vec, Length: 80, P: 1, Q: 4}, n2v(4)},
		{"node2vec p=1e-6: the cap and a scan", Algorithm{Kind: Node2Vec, Length: 80, P: 1e-6, Q: 1}, n2v(1e6)},
		{"node2vec p=1e6 q=1e-6 (R=1e12)", Algorithm{Kind: Node2Vec, Length: 80, P: 1e6, Q: 1e-6}, n2v(1e12)},
		{"node2vec zprs tests every edge", Algorithm{Kind: Node2Vec, Length: 80, P: 1e-6, Q: 1, Stepper: StepperZPRS}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.StepCost(tc.a); math.Abs(got-tc.step) > 1e-9*tc.step {
				t.Errorf("StepCost = %v, want %v", got, tc.step)
			}
			want := int64(math.Ceil(10 * 80 * tc.step))
			if got := m.WalkCost(tc.a, 10); got != want {
				t.Errorf("WalkCost(10 walks) = %d, want %d", got, want)
			}
			if got := m.StepsCost(tc.a, 800); got != want {
				t.Errorf("StepsCost(800 steps) = %d, want %d", got, want)
			}
		})
	}
	// The bound's extremes: the cap holds the attempts at 64, and a huge
	// request saturates instead of overflowing.
	if att, fb := Node2VecRounds(1e-6, 1e6); att > MaxRejections || fb < 0.99 {
		t.Errorf("Node2VecRounds(1e-6, 1e6) = %v attempts, fallback %v: want at most %d attempts and a scan nearly always", att, fb, MaxRejections)
	}
	if got := m.WalkCost(Algorithm{Kind: Node2Vec, Length: MaxLength, P: 1e-6, Q: 1}, math.MaxInt64/2); got != math.MaxInt64 {
		t.Errorf("WalkCost of a huge request = %d, want saturation at MaxInt64", got)
	}
	// The issue's request (100 seeds x 10 walks x 1,000 steps, p = 1e-6)
	// against the O(1) steps it was once counted as.
	issue := Algorithm{Kind: Node2Vec, Length: 1000, P: 1e-6, Q: 1}
	if got := m.WalkCost(issue, 1000); got < 1000*1000*64 {
		t.Errorf("WalkCost(issue's request) = %d, want at least the 64 attempts of each of 10^6 steps", got)
	}
}

func TestCostModelWalkDegreeIsAtLeastOne(t *testing.T) {
	g, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{Name: "one", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if wd := NewCostModel(g).WalkDegree(); wd != 1 {
		t.Errorf("walk degree of a single edge %v, want 1", wd)
	}
}
