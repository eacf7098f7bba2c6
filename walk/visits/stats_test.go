package visits

// The chi-square bound and the test graph of walk's tests
// (walk/stats_test.go), copied so that visits are counted on the same graph
// and checked against the same bound as the walks.

import (
	"math"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// chiSquareCritical returns the chi-square value that a correct sampler
// exceeds with probability 1e-4 (Wilson–Hilferty approximation), so a fixed
// seed that passes once passes always, while a 1% bias in any cell with
// enough samples does not.
func chiSquareCritical(df int) float64 {
	const z = 3.719 // upper 1e-4 quantile of the standard normal
	k := float64(df)
	t := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * t * t * t
}

// testGraph is a small labelled, weighted graph where every transition can
// be enumerated: vertex 0 has ten neighbours of distinct weights and labels,
// and the neighbours are wired among themselves so Node2Vec's three cases
// (return, neighbour of previous, outward) all occur.
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := int64(1); i <= 10; i++ {
		edges = append(edges, graph.Edge{Src: 0, Dst: i, Weight: float32(i), Label: uint8(i % 3)})
		edges = append(edges, graph.Edge{Src: i, Dst: 0, Weight: float32(11 - i), Label: uint8(i % 3)})
	}
	for i := int64(1); i <= 10; i++ {
		for _, j := range []int64{i%10 + 1, (i+2)%10 + 1, 11 + i%4} {
			edges = append(edges, graph.Edge{Src: i, Dst: j, Weight: float32(1 + (i*j)%7), Label: uint8((i + j) % 3)})
		}
	}
	for i := int64(11); i <= 14; i++ {
		edges = append(edges, graph.Edge{Src: i, Dst: i - 10, Weight: 2, Label: 1})
		edges = append(edges, graph.Edge{Src: i, Dst: 15, Weight: 0.5, Label: 2})
	}
	// vertex 15 is a dead end.
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "stats", Weighted: true, Labelled: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
