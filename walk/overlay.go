package walk

import (
	"fmt"
	"slices"

	"github.com/walkstage/walkstage/graph"
)

// A live graph (package livegraph) is a loaded base graph plus a delta of
// edge updates: edges appended per vertex, tombstones for deleted ones, and
// vertices the base did not have. Walks read it through Overlay, one
// immutable snapshot per job (Job.Overlay), so the walk package needs to
// know nothing of how updates arrive or how snapshots are published.
//
// A step from a vertex with a delta draws from all of its edges, base and
// appended, dead ones included, and draws again when it lands on a dead
// one: the side (base or delta) is chosen by the sides' weight sums (edge
// counts for an unweighted walk), the base edge by the engine's usual
// uniform or alias draw, the delta edge uniformly and, for a weighted walk,
// accepted with probability weight / MaxWeight. Every accepted edge is live
// and taken with probability weight / (live weight), exactly the step of
// the graph rebuilt with the updates. After maxRejections draws an exact
// scan over the live edges decides, so a vertex whose edges are mostly
// deleted costs O(degree) rather than an unbounded loop.

// Overlay is a published, immutable snapshot of a live graph: the base graph
// an engine was built for and the delta over it. Implementations must be
// safe for concurrent readers and never change once handed to a job.
type Overlay interface {
	// Base is the graph the delta applies to; a job's overlay must have
	// the engine's graph as its base.
	Base() *graph.Graph
	// NumVertices counts the base's vertices and those the delta added
	// (dense ids Base().NumVertices() and up).
	NumVertices() int
	// Empty reports that the delta changes nothing: the engine then walks
	// the base on its usual, fastest path.
	Empty() bool
	// Vertex returns v's delta, or nil when v has none (its base edges are
	// all it has, all live). Every added vertex has one.
	Vertex(v uint32) *DeltaVertex
}

// DeltaVertex is one vertex's delta in a snapshot. Its slices are read-only
// and may share memory with later snapshots, which only ever append beyond
// their lengths.
type DeltaVertex struct {
	// Edges are the appended edges, oldest first, dead ones included:
	// target and weight side by side, one cache line for a draw (the
	// weight is 1 on an unweighted graph).
	Edges []DeltaEdge
	// Dead lists the tombstones, sorted by target, one per deleted target:
	// every base edge to Target is dead, and so is every appended edge to
	// it with index below Upto (inserted before the delete).
	Dead []Tombstone
	// BaseWeight is the weight sum of the base edges, dead ones included
	// (the edge count on an unweighted graph); MaxWeight is the largest
	// appended weight. A weighted step picks the delta side with weight
	// len(Edges) * MaxWeight, the envelope of its accept-by-weight draw.
	BaseWeight float64
	MaxWeight  float32
	// Live counts the vertex's live edges, base and appended: 0 is a dead end.
	Live int
}

// DeltaEdge is one appended edge.
type DeltaEdge struct {
	Target uint32
	Weight float32
}

// Tombstone marks the edges to one target deleted; see DeltaVertex.Dead.
type Tombstone struct {
	Target uint32
	Upto   uint32
}

// tombstone returns the tombstone for target t, if any.
func (d *DeltaVertex) tombstone(t uint32) (Tombstone, bool) {
	i, ok := slices.BinarySearchFunc(d.Dead, t, func(x Tombstone, t uint32) int { return int(int64(x.Target) - int64(t)) })
	if !ok {
		return Tombstone{}, false
	}
	return d.Dead[i], true
}

// BaseDead reports whether base edges to t are deleted.
func (d *DeltaVertex) BaseDead(t uint32) bool {
	if len(d.Dead) == 0 {
		return false
	}
	_, ok := d.tombstone(t)
	return ok
}

// DeltaDead reports whether appended edge i is deleted.
func (d *DeltaVertex) DeltaDead(i int) bool {
	if len(d.Dead) == 0 {
		return false
	}
	ts, ok := d.tombstone(d.Edges[i].Target)
	return ok && uint32(i) < ts.Upto
}

// OverlaySupported returns nil when the CPU engine walks a on a live graph's
// delta, else an error wrapping ErrInvalidAlgorithm that names the limit.
func OverlaySupported(a Algorithm) error {
	switch a.Kind {
	case DeepWalk, PPR:
	default:
		return invalid("%s walks do not read a live graph's delta yet (deepwalk and ppr do); walk the compacted graph", a.Kind)
	}
	switch a.ResolvedStepper() {
	case StepperUniform, StepperAlias:
	default:
		return invalid("the %s sampler does not read a live graph's delta yet (uniform and alias do)", a.ResolvedStepper())
	}
	return nil
}

// OverlayWalker is implemented by engines that walk jobs on a live graph's
// snapshot (Job.Overlay): the CPU engine. An engine without it refuses such
// jobs (ValidateJobs), so a caller asks CheckOverlay before it takes them.
type OverlayWalker interface {
	CheckOverlay(a Algorithm) error
}

// CheckOverlay returns nil when e walks a on a live graph's delta, else an
// error wrapping ErrInvalidAlgorithm that names the limit.
func CheckOverlay(e Engine, a Algorithm) error {
	if ow, ok := e.(OverlayWalker); ok {
		return ow.CheckOverlay(a)
	}
	return fmt.Errorf("%w: the %s engine does not walk a live graph's delta yet (the cpu engine does)", ErrInvalidAlgorithm, e.Name())
}

var _ OverlayWalker = (*CPU)(nil)

// CheckOverlay implements OverlayWalker.
func (e *CPU) CheckOverlay(a Algorithm) error { return OverlaySupported(a) }

// overlayStep is stepper.step for a job on a non-empty overlay: DeepWalk or
// PPR. PPR's stop takes draw 0's first word, as on the base; the attempts
// take draws from 1 on, so a vertex without a delta steps as on the base.
func (s *stepper) overlayStep(id uint64, step, cur uint32) (uint32, bool) {
	dv := s.ov.Vertex(cur)
	if dv == nil {
		return s.step(id, step, graph.NoVertex, cur)
	}
	if dv.Live == 0 {
		return 0, false
	}
	first := uint32(0)
	if s.alg.Kind == PPR {
		x0, _, _, _ := s.draw(id, step, 0)
		if uint64(x0) < s.stopT {
			return 0, false
		}
		first = 1
	}
	var a, b uint64
	if int(cur) < len(s.off)-1 {
		a, b = s.off[cur], s.off[cur+1]
	}
	// The delta side's weight is its draw's envelope: a uniform edge
	// accepted with probability Weight / MaxWeight takes edge i with
	// probability proportional to its weight only if the side is chosen
	// in proportion to len(Edges) * MaxWeight.
	wb, wd := dv.BaseWeight, float64(len(dv.Edges))*float64(dv.MaxWeight)
	if !s.weighted {
		wb, wd = float64(b-a), float64(len(dv.Edges))
	}
	total := wb + wd
	for att := uint32(0); att < maxRejections; att++ {
		x0, x1, x2, _ := s.draw(id, step, first+att)
		if float64(x0)*(1.0/(1<<32))*total < wb {
			if a == b {
				continue
			}
			t := s.static(a, b, x1, x2)
			if !dv.BaseDead(t) {
				return t, true
			}
			continue
		}
		n := uint32(len(dv.Edges))
		if n == 0 {
			continue
		}
		i := index(x1, n)
		de := dv.Edges[i]
		if s.weighted && unit24(x2)*dv.MaxWeight >= de.Weight {
			continue
		}
		if !dv.DeltaDead(int(i)) {
			return de.Target, true
		}
	}
	return s.overlayScan(id, step, first+fallbackDraw, dv, a, b)
}

// overlayScan is overlayStep's exact fallback: one draw, and a scan of the
// live edges' cumulative weights.
func (s *stepper) overlayScan(id uint64, step, d uint32, dv *DeltaVertex, a, b uint64) (uint32, bool) {
	weight := func(base bool, i uint64) float64 {
		switch {
		case !s.weighted:
			return 1
		case base:
			return float64(s.w[i])
		default:
			return float64(dv.Edges[i].Weight)
		}
	}
	var sum float64
	for e := a; e < b; e++ {
		if !dv.BaseDead(s.tgt[e]) {
			sum += weight(true, e)
		}
	}
	for i := range dv.Edges {
		if !dv.DeltaDead(i) {
			sum += weight(false, uint64(i))
		}
	}
	x0, x1, _, _ := s.draw(id, step, d)
	u := (float64(x0) + float64(x1)*(1.0/(1<<32))) * (1.0 / (1 << 32)) * sum
	last, found := uint32(0), false
	for e := a; e < b; e++ {
		if t := s.tgt[e]; !dv.BaseDead(t) {
			if u -= weight(true, e); u < 0 {
				return t, true
			}
			last, found = t, true
		}
	}
	for i, de := range dv.Edges {
		if !dv.DeltaDead(i) {
			if u -= weight(false, uint64(i)); u < 0 {
				return de.Target, true
			}
			last, found = de.Target, true
		}
	}
	// Rounding may leave u a hair above the sum: the last live edge.
	return last, found
}

// walkOverlayUnit walks a unit's walks on an overlay all together, one step
// of every walk before the next step of any: the steps of different walks
// are independent, so the processor overlaps their cache misses (the
// radix lookup of the vertex's delta, its offsets row, the drawn edge),
// where one walk after the other waits for each in turn.
func (s *stepper) walkOverlayUnit(starts []uint32, firstID uint64, buf, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	active := make([]int32, 0, n)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		active = append(active, int32(k))
	}
	for step := uint32(0); step < uint32(s.alg.Length) && len(active) > 0; step++ {
		keep := active[:0]
		for _, k := range active {
			next, ok := s.overlayStep(firstID+uint64(k), step, cur[k])
			if !ok {
				continue
			}
			buf[int(k)*stride+int(lens[k])] = next
			lens[k]++
			cur[k] = next
			keep = append(keep, k)
		}
		active = keep
	}
}
