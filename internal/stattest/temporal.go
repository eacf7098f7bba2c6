package stattest

import (
	"math"
	"slices"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TemporalStep is the exact distribution of a temporal step of a from v on
// g, bounded by bound (every edge of v when !bounded), by (target, edge
// time), computed from the definition (walk/timeparams.go) on g's edges
// without the steppers' code: the window's edges in (time, target) order
// from the near end, weighed by rank (linear) or by their time distance to
// the nearest (exponential), times the weight when a is weighted and
// Node2Vec's factor against prev when a has one and prev is a vertex.
func TemporalStep(g *graph.Graph, a walk.Algorithm, v uint32, bound int64, bounded bool, prev uint32) map[[2]int64]float64 {
	type edge struct {
		tgt uint32
		t   int64
		w   float64
	}
	tp := a.Time
	var win []edge
	for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
		tt := g.EdgeTime(e)
		ok := !bounded || !tp.Backward && tt >= bound || tp.Backward && tt <= bound
		if ok && bounded && tp.HasMaxGap {
			ok = max(tt-bound, bound-tt) <= tp.MaxGap
		}
		if ok {
			w := 1.0
			if a.Weighted {
				w = float64(g.Weights[e])
			}
			win = append(win, edge{g.Targets[e], tt, w})
		}
	}
	slices.SortFunc(win, func(p, q edge) int {
		if p.t != q.t {
			return int(p.t - q.t)
		}
		return int(p.tgt) - int(q.tgt)
	})
	if tp.Backward {
		slices.Reverse(win)
	}
	probs := map[[2]int64]float64{}
	var sum float64
	for p, x := range win {
		b := 1.0
		switch tp.Bias {
		case walk.TimeLinear:
			b = float64(len(win) - p)
		case walk.TimeExponential:
			b = math.Exp(-math.Abs(float64(x.t-win[0].t)) / tp.Scale)
		}
		b *= x.w
		if a.P != 0 && prev != graph.NoVertex {
			switch {
			case x.tgt == prev:
				b /= a.P
			case !HasEdge(g, prev, x.tgt):
				b /= a.Q
			}
		}
		probs[[2]int64{int64(x.tgt), x.t}] += b
		sum += b
	}
	for k := range probs {
		probs[k] /= sum
	}
	return probs
}

// HasEdge reports whether g has an edge u->v (targets sorted per vertex).
func HasEdge(g *graph.Graph, u, v uint32) bool {
	_, ok := slices.BinarySearch(g.Neighbors(u), v)
	return ok
}
