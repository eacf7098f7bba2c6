package walk

import (
	"math"

	"github.com/walkstage/walkstage/graph"
)

// CostModel estimates what a walk request costs an engine, in steps: the
// unit is one step of an O(1) sampler (uniform, alias, label tables), and a
// step that does more work counts as the O(1) steps it is worth. Admission
// control (the stage's per-request and per-micro-batch budgets) compares
// these estimates, so they are upper bounds wherever the work depends on
// the walks' luck: a request is never admitted as cheap and then found
// expensive.
//
// Measured on the CPU engine (BenchmarkStepCost: rmat scale 10, edge
// factor 8, 2 cores), in O(1) steps of weighted DeepWalk (109 ns), against
// the estimate: Node2Vec p = q = 1 1.0 (1); p = 1/16 6.7 (16.8); p = 10^-6
// 78 (131); DeepWalk through ZPRS 48 (67, the walk degree); Node2Vec
// through ZPRS 107 (134).
type CostModel struct {
	g *graph.Graph
	// walkDegree is the degree of the vertex a walk stands on, on average
	// over its stationary distribution: Σ d² / Σ d. The samplers that scan
	// an adjacency (ZPRS, DPRS, Node2Vec's exact fallback) read about this
	// many edges a step; on a skewed graph it is far above E / V (66.8
	// against 11.8 on rmat scale 10), because walks find the hubs.
	walkDegree float64
}

// NewCostModel measures what the estimates need from g (one pass over its
// offsets: the caller keeps the model for the graph's lifetime).
func NewCostModel(g *graph.Graph) CostModel {
	var s1, s2 float64
	for v := range g.NumVertices() {
		d := float64(g.Offsets[v+1] - g.Offsets[v])
		s1 += d
		s2 += d * d
	}
	wd := 1.0
	if s1 > 0 {
		wd = max(1, s2/s1)
	}
	return CostModel{g: g, walkDegree: wd}
}

// WalkDegree is Σ d² / Σ d over g's vertices (at least 1).
func (m CostModel) WalkDegree() float64 { return m.walkDegree }

// Node2VecRounds is the bound on Node2Vec's rejection sampler that the
// estimates use: every attempt accepts with probability at least
// min(f) / max(f), f in {1/p, 1, 1/q}, so the attempts of a step, capped at
// MaxRejections, average at most R (1 - (1 - 1/R)^cap) with R = max(f) /
// min(f), and the exact fallback scan follows with probability at most
// (1 - 1/R)^cap. R is 1 at p = q = 1 and 10^6 at the extremes p or q = 10^-6
// or 10^6, where the bound is cap rounds and a scan on every step.
func Node2VecRounds(p, q float64) (attempts, fallback float64) {
	f := [3]float64{1 / p, 1, 1 / q}
	r := max(f[0], f[1], f[2]) / min(f[0], f[1], f[2])
	miss := 1 - 1/r
	fallback = math.Pow(miss, MaxRejections)
	if r == 1 {
		return 1, 0
	}
	return r * (1 - fallback), fallback
}

// StepCost is the estimated cost of one step of a on the model's graph, in
// O(1) steps: 1 for the O(1) samplers; the walk degree for the samplers that
// scan the adjacency (ZPRS, DPRS: one unit an edge, two for Node2Vec, whose
// bias tests each edge against the previous vertex's neighbours); for Node2Vec's
// rejection sampler its attempts (Node2VecRounds, one unit each: a proposal
// and a neighbour test) plus, when the attempts run out, the exact scan of
// the adjacency.
func (m CostModel) StepCost(a Algorithm) float64 {
	switch a.ResolvedStepper() {
	case StepperZPRS, StepperDPRS:
		if m.g != nil && UsesLabelTables(a, m.g) {
			return 1
		}
		if a.Kind == Node2Vec {
			// Every edge's bias is a neighbour test too.
			return 2 * m.walkDegree
		}
		return m.walkDegree
	case StepperRejection:
		att, fb := Node2VecRounds(a.P, a.Q)
		return att + fb*m.walkDegree
	case StepperWindow:
		// Temporal: the uniform and unweighted linear draws are O(1) after
		// the window's binary search; the exponential's bands cost a
		// galloping search each, about ln(degree) + 2 of them, and a few
		// attempts; weighted linear's rejection has no acceptance bound
		// (the mean of (n-p)/n under the weights), so it is costed as the
		// fallback's scan of the adjacency.
		switch {
		case a.P != 0:
			// Temporal Node2Vec scans the window, testing each edge
			// against the previous vertex's neighbours.
			return 2 * m.walkDegree
		case a.Time.Bias == TimeExponential:
			return 3 + math.Log(m.walkDegree)
		case a.Time.Bias == TimeLinear && a.Weighted:
			return m.walkDegree
		}
	}
	return 1
}

// WalkCost is the estimated cost of walks walks of a: walks x Length x
// StepCost, rounded up, saturating at math.MaxInt64. Length is the most a
// walk can take (a PPR walk or one at a dead end stops sooner).
func (m CostModel) WalkCost(a Algorithm, walks int64) int64 {
	return saturate(float64(walks) * float64(a.Length) * m.StepCost(a))
}

// StepsCost is the estimated cost of steps steps of a (an output "visits"
// request's queries x steps_per_query), saturating like WalkCost.
func (m CostModel) StepsCost(a Algorithm, steps int64) int64 {
	return saturate(float64(steps) * m.StepCost(a))
}

func saturate(x float64) int64 {
	if x >= math.MaxInt64 || math.IsNaN(x) {
		return math.MaxInt64
	}
	return int64(math.Ceil(x))
}
