package visits

// The chi-square bound and the test graph walk's tests use too
// (internal/stattest): visits are counted on the same graph and checked
// against the same bound as the walks.

import (
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
)

func chiSquareCritical(df int) float64 { return stattest.Critical(df) }

func testGraph(t testing.TB) *graph.Graph { return stattest.Graph(t) }
