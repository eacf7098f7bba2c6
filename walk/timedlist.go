package walk

import (
	"cmp"
	"slices"

	"github.com/walkstage/walkstage/graph"
)

// TimedEdge is one live edge of a vertex in a snapshot of a timed graph:
// its time, target and weight (1 on an unweighted walk).
type TimedEdge struct {
	T int64
	X uint32
	W float32
}

// TimedBase is what AppendTimed reads of a timed base graph.
type TimedBase struct {
	Off    []uint64
	Tgt    []uint32
	W      []float32 // nil on an unweighted graph
	Times  []int64   // graph.Times: per vertex, in time order
	ByTime []uint32  // graph.ByTime: time-order position -> local edge index
}

// TimedBaseOf is g's TimedBase.
func TimedBaseOf(g *graph.Graph) TimedBase {
	return TimedBase{Off: g.Offsets, Tgt: g.Targets, W: g.Weights, Times: g.Times, ByTime: g.ByTime}
}

// AppendTimed appends to dst v's live edges in a snapshot in (time,
// target) order, the order a compaction gives the rebuilt graph's time
// order: v's base edges in time order less those dv's tombstones delete,
// then merged with dv's appended edges (times dt, DeltaTimes) less the
// dead ones. dv is nil when v has no delta. Weights are 1 unless weighted.
// Temporal walks on a delta draw over this list, on both engines (the CPU
// engine's walk/cpu/overlaytemporal.go, the GPU's timed lists), so both
// gather it here.
func AppendTimed(dst []TimedEdge, base TimedBase, v uint32, dv *DeltaVertex, dt []int64, weighted bool) []TimedEdge {
	nb := len(dst)
	if int(v) < len(base.Off)-1 {
		a, b := base.Off[v], base.Off[v+1]
		for k := a; k < b; k++ {
			e := a + uint64(base.ByTime[k])
			x := base.Tgt[e]
			if dv != nil && dv.BaseDead(x) {
				continue
			}
			var w float32 = 1
			if weighted {
				w = base.W[e]
			}
			dst = append(dst, TimedEdge{T: base.Times[k], X: x, W: w})
		}
	}
	if dv == nil {
		return dst
	}
	nd := len(dst)
	for i, de := range dv.Edges() {
		if i >= len(dt) || dv.DeltaDead(i) {
			continue
		}
		w := de.Weight
		if !weighted {
			w = 1
		}
		dst = append(dst, TimedEdge{T: dt[i], X: de.Target, W: w})
	}
	if len(dst) > nd {
		// The base's part is in (time, target) order already: a stable
		// sort of the whole keeps the merge simple (and ties base first).
		slices.SortStableFunc(dst[nb:], func(p, q TimedEdge) int {
			return cmp.Or(cmp.Compare(p.T, q.T), cmp.Compare(p.X, q.X))
		})
	}
	return dst
}
