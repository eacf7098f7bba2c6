// Package stattest holds what the samplers' statistical tests share (the
// walk steppers, C-SAW graph sampling, visit counting): a chi-square check
// against exact probabilities with a fixed, very small false-alarm rate,
// and a small graph whose every transition can be enumerated.
package stattest

import (
	"math"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// Critical returns the chi-square value that a correct sampler
// exceeds with probability 1e-4 (Wilson–Hilferty approximation), so a fixed
// seed that passes once passes always, while a 1% bias in any cell with
// enough samples does not.
func Critical(df int) float64 {
	const z = 3.719 // upper 1e-4 quantile of the standard normal
	k := float64(df)
	t := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * t * t * t
}

// ChiSquare compares counts with expected probabilities (cells of zero
// probability must have zero counts).
func ChiSquare(t testing.TB, name string, counts map[uint32]int, probs map[uint32]float64) {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	var x2 float64
	df := -1
	for v, c := range counts {
		if probs[v] == 0 && c > 0 {
			t.Fatalf("%s: sampled %d (%d times) which has probability 0", name, v, c)
		}
	}
	for v, p := range probs {
		if p == 0 {
			continue
		}
		exp := p * float64(n)
		d := float64(counts[v]) - exp
		x2 += d * d / exp
		df++
	}
	if df < 1 {
		return
	}
	if crit := Critical(df); x2 > crit {
		t.Errorf("%s: chi-square %.1f > %.1f (df %d, n %d): counts %v, want probabilities %v", name, x2, crit, df, n, counts, probs)
	}
}

// Graph is a small labelled, weighted graph where every transition can
// be enumerated: vertex 0 has ten neighbours of distinct weights and labels,
// and the neighbours are wired among themselves so Node2Vec's three cases
// (return, neighbour of previous, outward) all occur.
func Graph(t testing.TB) *graph.Graph {
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
