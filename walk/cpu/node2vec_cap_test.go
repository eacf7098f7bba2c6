package cpu

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// capGraph is shaped so that Node2Vec's rejection sampler runs out of
// attempts on about half the steps while the exact distribution has no
// tiny cells: 0 - 1, and 1 joined to 2..201, none of which is joined to 0.
// From 1 after 0, the return (factor 1/p) is one candidate of 201 and the
// 200 others are outward (factor 1/q).
func capGraph(t testing.TB) *graph.Graph {
	t.Helper()
	edges := []graph.Edge{{Src: 0, Dst: 1, Weight: 3}, {Src: 1, Dst: 0, Weight: 3}}
	for i := int64(2); i <= 201; i++ {
		w := float32(1 + i%7)
		edges = append(edges, graph.Edge{Src: 1, Dst: i, Weight: w}, graph.Edge{Src: i, Dst: 1, Weight: w})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "cap", Weighted: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestNode2VecCapKeepsDistributionExact: where the rejection attempts run
// out (maxRejections, then the exact scan), the CPU engine's walks (the
// lockstep walker, on the fused table when weighted) still follow the
// exact second-order transition probabilities (chi-square, fixed seeds).
// At p = 1/200 (or q = 200) an attempt accepts with probability 2/201, so
// (199/201)^64, about 53%, of the second steps take the scan: the regime of
// issue 32's p = 1e-6, where nearly every step does.
func TestNode2VecCapKeepsDistributionExact(t *testing.T) {
	g := capGraph(t)
	e, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []walk.Algorithm{
		{Kind: walk.Node2Vec, Length: 2, P: 0.005, Q: 1},
		{Kind: walk.Node2Vec, Length: 2, P: 0.005, Q: 1, Weighted: true},
		{Kind: walk.Node2Vec, Length: 2, P: 1, Q: 200},
		{Kind: walk.Node2Vec, Length: 2, P: 0.5, Q: 100, Weighted: true},
	} {
		t.Run(fmt.Sprintf("p=%g q=%g weighted=%v", a.P, a.Q, a.Weighted), func(t *testing.T) {
			const n = 200000
			const seed = 11
			// The table is unmapped once its owner is unreachable: the
			// owner must outlive every read of tab below.
			owner := new(Engine)
			defer runtime.KeepAlive(owner)
			var tab []aliasEntry
			if needsAlias(a) {
				tab = buildPacked(g, owner)
			}
			// How many second steps reach the scan, from the same draws.
			s := newStepper(g, a, seed, tab)
			lo, hi := g.Offsets[1], g.Offsets[2]
			scans := 0
			for id := uint64(0); id < n; id++ {
				accepted := false
				for att := uint32(0); att < walk.MaxRejections && !accepted; att++ {
					x0, x1, x2, _ := s.draw(id, 1, att)
					x := s.static(lo, hi, x0, x1)
					accepted = uint64(x2) < s.acceptT[s.n2vClass(0, x)]
				}
				if !accepted {
					scans++
				}
			}
			if scans < n/4 {
				t.Fatalf("only %d of %d second steps reach the exact scan: the test misses the cap", scans, n)
			}
			counts := map[uint32]int{}
			for _, w := range collect(t, e, []walk.Job{{Algorithm: a, Seed: seed, Starts: repeat(0, n)}})[0] {
				if len(w) != 3 || w[1] != 1 {
					t.Fatalf("walk %v should go 0, 1, then take a second step", w)
				}
				counts[w[2]]++
			}
			chiSquare(t, a.String(), counts, exactStep(g, a, 1, 0, 1))
			t.Logf("%d of %d second steps took the exact scan", scans, n)
		})
	}
}
