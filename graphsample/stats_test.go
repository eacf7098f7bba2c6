package graphsample

// The chi-square check and the test graph walk's tests use too
// (internal/stattest): the samplers are tested against the same graph and
// the same bound as the walks.

import (
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
)

func chiSquareCritical(df int) float64 { return stattest.Critical(df) }

func chiSquare(t *testing.T, name string, counts map[uint32]int, probs map[uint32]float64) {
	t.Helper()
	stattest.ChiSquare(t, name, counts, probs)
}

func testGraph(t testing.TB) *graph.Graph { return stattest.Graph(t) }
