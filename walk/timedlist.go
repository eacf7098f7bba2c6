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
	if m := len(dst) - nd; m > 0 {
		// The base's part is in (time, target) order already: sort the
		// appended part alone (stably, so equal edges keep their order of
		// arrival) and merge the two from the back through a copy of it
		// beyond the list's end, base edges first among equal ones (a
		// stable sort of the whole would give the same list, and cost a
		// hub's whole adjacency for a few appended edges).
		cmpEdge := func(p, q TimedEdge) int { return cmp.Or(cmp.Compare(p.T, q.T), cmp.Compare(p.X, q.X)) }
		slices.SortStableFunc(dst[nd:], cmpEdge)
		dst = append(dst, dst[nd:]...)
		app := dst[nd+m:]
		i, j := nd-1, m-1
		for w := nd + m - 1; j >= 0; w-- {
			if i >= nb && cmpEdge(app[j], dst[i]) < 0 {
				dst[w] = dst[i]
				i--
			} else {
				dst[w] = app[j]
				j--
			}
		}
		dst = dst[:nd+m]
	}
	return dst
}

// CoarseSpacing is the spacing of the coarse time index both engines'
// temporal searches probe first: entry j is times[j*CoarseSpacing], by
// global position (kernels/temporal.cuh's kCoarse). At an eighth of the
// times' bytes it stays in the caches (the device's L2) where the times
// cannot, and a search probes it and then one run of CoarseSpacing times,
// where a binary search over a hub's times would miss at every probe.
const CoarseSpacing = 32

// CoarseTimes builds the coarse time index of times (Graph.Times, or the
// GPU's timed lists).
func CoarseTimes(times []int64) []int64 {
	c := make([]int64, (len(times)+CoarseSpacing-1)/CoarseSpacing)
	for j := range c {
		c[j] = times[j*CoarseSpacing]
	}
	return c
}
