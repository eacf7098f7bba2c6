package cpu

import (
	"slices"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// MetaPath on a live graph's snapshot. Step i wants label L =
// Schema[i % len(Schema)]; its candidates are cur's live edges labelled L,
// base (not killed by a tombstone) and appended (not dead), taken in
// proportion to their weights (weighted) or uniformly. A vertex without a
// delta steps as on the base. One with a delta draws as DeepWalk's overlay
// step does, with the base side narrowed to L's label-table segment and
// the appended edges kept only when labelled L: attempt a takes draw a,
// the side on x2 (base when x2 < 2^32 x wb / (wb + wd)), a base edge inside
// the segment on x0 and x1 (uniform, or the segment's alias entry), taken
// unless deleted; else appended edge index(x3, n), kept if labelled L, if
// Unit24(x1) x MaxWeight < its weight (weighted) and if not deleted. The
// base side weighs wb, the segment's length (unweighted) or weight sum,
// dead edges included; the delta side wd, len(Edges) (unweighted) or
// len(Edges) x MaxWeight, the envelope of its draw, other labels included.
// So each accepted edge is live, labelled L and taken with probability
// weight / (wb + wd), and the step is the rebuilt graph's. After
// walk.MaxRejections attempts the exact scan (draw FallbackDraw) decides.
//
// A weighted step reads the segment's weight sum from the engine's table of
// them (labelWeightSums, built for the first such job); a graph beyond
// walk.MaxTableLabels has no label tables, and a vertex with a delta there
// takes the exact scan at once.

// overlayMetaPathStep takes walk id's step from cur on the snapshot, dv
// cur's delta (nil: none).
func (s *stepper) overlayMetaPathStep(id uint64, step, cur uint32, dv *walk.DeltaVertex) (uint32, bool) {
	if dv == nil {
		// Only base vertices lack a delta (every added one has one).
		return s.step(id, step, graph.NoVertex, cur)
	}
	if dv.Live == 0 {
		return 0, false
	}
	want := s.alg.Schema[int(step)%len(s.alg.Schema)]
	var a, b uint64
	if int(cur) < len(s.off)-1 {
		a, b = s.off[cur], s.off[cur+1]
	}
	lab, dlab := s.lab, dv.Labels()
	bias := func(base bool, i uint64, _ uint32) float64 {
		if base && lab[i] == want || !base && dlab[i] == want {
			return 1
		}
		return 0
	}
	lt := s.segs
	if lt == nil {
		return s.overlayScanBiased(id, step, walk.FallbackDraw, dv, a, b, bias)
	}
	var sa, sb uint64
	n := uint32(len(dv.Edges()))
	wb, wd := 0.0, float64(n)
	if int(cur) < len(s.off)-1 {
		i := uint64(cur)*uint64(lt.numLabels) + uint64(want)
		sa, sb = lt.off[i], lt.off[i+1]
		wb = float64(sb - sa)
		if s.weighted {
			wb = s.segSums[i]
		}
	}
	if s.weighted {
		wd *= float64(dv.MaxWeight)
	}
	if sa == sb && !slices.Contains(dlab, want) {
		return 0, false // no edge labelled want, live or dead
	}
	total := wb + wd
	tab := s.segAlias()
	for att := uint32(0); att < walk.MaxRejections; att++ {
		x0, x1, x2, x3 := s.draw(id, step, att)
		if float64(x2)*(1.0/(1<<32))*total < wb {
			if t := pickStatic(lt.tgt, tab, sa, sb, x0, x1); !dv.BaseDead(t) {
				return t, true
			}
			continue
		}
		if n == 0 {
			continue
		}
		i := walk.Bounded(x3, n)
		de := dv.Edges()[i]
		if dlab[i] != want || s.weighted && walk.Unit24(x1)*dv.MaxWeight >= de.Weight || dv.DeltaDead(int(i)) {
			continue
		}
		return de.Target, true
	}
	return s.overlayScanBiased(id, step, walk.FallbackDraw, dv, a, b, bias)
}
