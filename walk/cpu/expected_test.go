package cpu

import (
	"context"
	"math"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// EstimateSteps (the GPU stream engine's cost model reads it) against the
// steps this engine's walks take, one walk from every vertex of a labelled
// R-MAT graph: the mean within 10%, the longest within 40% (one sample of
// a maximum). MetaPath's estimate is a pilot of uniform choices; the
// engine's unweighted walks are uniform too.
func TestEstimateStepsMatchesWalks(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 3, Undirected: true, Labels: 5})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	starts := make([]uint32, g.NumVertices())
	for v := range starts {
		starts[v] = uint32(v)
	}
	cases := []struct {
		name        string
		a           walk.Algorithm
		checkLonger bool
	}{
		{"deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 40}, true},
		{"ppr 0.2", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, true},
		{"ppr 0.05", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.05}, true},
		{"metapath 0,1,2,3", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{0, 1, 2, 3}}, false},
		{"metapath 4", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{4}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := collect(t, e, []walk.Job{{Tag: 0, Algorithm: c.a, Seed: 11, Starts: starts}})[0]
			var total, longest int
			for _, w := range ws {
				total += len(w) - 1
				longest = max(longest, len(w)-1)
			}
			mean := float64(total) / float64(len(ws))
			est := walk.EstimateSteps(g, c.a, int64(len(ws)))
			if math.Abs(est.Mean-mean) > 0.1*mean {
				t.Errorf("estimated mean %.2f steps, the walks took %.2f", est.Mean, mean)
			}
			if c.checkLonger && math.Abs(est.Longest-float64(longest)) > 0.4*float64(longest) {
				t.Errorf("estimated longest %.0f steps, the longest walk took %d", est.Longest, longest)
			}
			if est.Longest < est.Mean {
				t.Errorf("longest %.1f below the mean %.1f", est.Longest, est.Mean)
			}
		})
	}
}
