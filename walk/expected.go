package walk

import (
	"math"

	"github.com/walkstage/walkstage/graph"
)

// StepsEstimate is what a batch of walks is expected to take: the steps of
// an average walk and of the batch's longest one. A cost that is paid per
// step (reading edges in place) follows Mean; one paid per round of the
// whole batch (a partition sweep, which goes on while any walk is still
// walking) follows Longest. CostModel's admission bounds use Length
// instead: they must never underestimate, where this must not
// overestimate by a factor of six (MetaPath's walks on five labels take
// 14 of 80 steps).
type StepsEstimate struct {
	Mean    float64
	Longest float64
}

// pilotWalks is how many walks EstimateSteps takes to measure a walk
// length: enough for a mean within a few percent (the lengths' spread is
// at most Length), few enough to cost a millisecond or so.
const pilotWalks = 2048

// EstimateSteps estimates the steps of walks walks of a on g, each from a
// start spread over g's vertices, by a pilot: pilotWalks walks from evenly
// spaced vertices, each step a uniform choice among the current vertex's
// edges (MetaPath: those of the schema's label), so that the vertices
// without edges (a quarter of a small R-MAT graph's), the dead ends of a
// directed graph and the places where a label runs out count as the
// engines meet them. A weighted or second-order walk chooses differently;
// the lengths, which depend on where walks stop, barely move. Temporal
// walks are estimated at Length.
//
// Longest is the pilot's longest walk when it covers every walk of the
// batch, else Length (a tail the pilot cannot see keeps the sweeps going),
// except for PPR, whose longest of n walks stops near ln n / -ln(1-s),
// the typical maximum of n geometric lengths.
func EstimateSteps(g *graph.Graph, a Algorithm, walks int64) StepsEstimate {
	return PilotSteps(g, a).For(a, walks)
}

// StepsPilot is what EstimateSteps' pilot measured of an algorithm on a
// graph, kept by a caller that estimates many batches of it (the pilot
// reads a few hundred thousand random edges).
type StepsPilot struct {
	Mean    float64
	Longest int
	Walks   int // the pilot's walks; 0: none were walked (Length is the estimate)
}

// PilotSteps walks EstimateSteps' pilot of a on g.
func PilotSteps(g *graph.Graph, a Algorithm) StepsPilot {
	if a.Kind == Temporal || g.NumVertices() == 0 || (a.Kind == MetaPath && (len(a.Schema) == 0 || g.Labels == nil)) {
		return StepsPilot{Mean: float64(a.Length), Longest: a.Length}
	}
	n := int(min(int64(pilotWalks), int64(g.NumVertices())))
	mean, longest := pilot(g, a, n)
	return StepsPilot{Mean: mean, Longest: longest, Walks: n}
}

// For is the estimate for a batch of walks walks of a, the pilot's algorithm.
func (p StepsPilot) For(a Algorithm, walks int64) StepsEstimate {
	L := float64(a.Length)
	est := StepsEstimate{Mean: p.Mean, Longest: float64(p.Longest)}
	switch {
	case p.Walks > 0 && walks <= int64(p.Walks):
	case a.Kind == PPR && a.StopProb > 0 && a.StopProb < 1 && walks > 1:
		est.Longest = min(L, math.Ceil(math.Log(float64(walks))/-math.Log(1-a.StopProb))+1)
	default:
		est.Longest = L
	}
	est.Longest = max(est.Longest, est.Mean)
	return est
}

// pilot walks n walks of a from vertices spread evenly over g and returns
// their mean and longest step counts. The choices come from a fixed
// splitmix64 stream, so the estimate is the same on every call. A PPR walk
// stops before each step with its probability. A MetaPath step finds an
// edge of its label by up to 16 uniform probes of the vertex's edges (a
// uniform edge among those of the label, when one hits), else by scanning
// up to 4,096 edges from a random place; a hub whose scanned share has
// none of the label ends the walk, where the engines' label tables might
// find one further on.
func pilot(g *graph.Graph, a Algorithm, n int) (mean float64, longest int) {
	const probes, scanCap = 16, 4096
	rng := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 {
		rng += 0x9e3779b97f4a7c15
		z := rng
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	stop := uint64(0)
	if a.Kind == PPR {
		stop = uint64(a.StopProb * (1 << 63) * 2)
	}
	meta := a.Kind == MetaPath
	nv := uint64(g.NumVertices())
	var total int
	for k := range n {
		v := uint32(uint64(k) * nv / uint64(n))
		steps := 0
		for ; steps < a.Length; steps++ {
			lo, hi := g.Offsets[v], g.Offsets[v+1]
			d := hi - lo
			if d == 0 || (stop != 0 && next() < stop) {
				break
			}
			if !meta {
				v = g.Targets[lo+next()%d]
				continue
			}
			want := a.Schema[steps%len(a.Schema)]
			found := false
			for range probes {
				e := lo + next()%d
				if g.Labels[e] == want {
					v, found = g.Targets[e], true
					break
				}
			}
			if !found {
				// Reservoir over the scanned edges of the label.
				from, seen := next()%d, uint64(0)
				for i := range min(d, scanCap) {
					e := lo + (from+i)%d
					if g.Labels[e] != want {
						continue
					}
					if seen++; next()%seen == 0 {
						v, found = g.Targets[e], true
					}
				}
			}
			if !found {
				break
			}
		}
		total += steps
		longest = max(longest, steps)
	}
	return float64(total) / float64(n), longest
}
