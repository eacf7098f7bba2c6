package cpu

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Node2Vec on a live graph's snapshot. A step proposes an edge of cur from
// base+delta as DeepWalk's overlay step does (side by weight sums, a dead
// edge or an unkept appended edge drawn again) and accepts it with
// probability f(class)/fmax, the class taken against the previous vertex
// in the snapshot (an edge prev->x is live if the base has it and no
// tombstone of prev kills it, or prev's delta holds a live copy). Every
// rejection, of the proposal or of the bias, starts the next attempt with
// the next draw, so a step is exact rejection sampling of weight x bias
// over the live edges; after walk.MaxRejections attempts an exact scan
// decides. A vertex without a delta draws its proposal with the base's
// words (x0, x1) and accepts with x2, as the base's Node2Vec step does;
// one with a delta takes the side from x0, the edge from x1 (and x2 for
// an alias entry or an appended edge's weight) and accepts with x3.

// walkOverlayOneByOne walks one unit's Node2Vec or MetaPath walks on the
// snapshot, one walk at a time (no ring or lockstep path reads a delta for
// them).
func (s *stepper) walkOverlayOneByOne(starts []uint32, firstID uint64, buf, lens []uint32) {
	stride := s.alg.Length + 1
	metaPath := s.alg.Kind == walk.MetaPath
	for k, start := range starts {
		out := buf[k*stride : (k+1)*stride]
		id := firstID + uint64(k)
		out[0] = start
		prev, cur := uint32(graph.NoVertex), start
		n := 1
		for step := uint32(0); step < uint32(s.alg.Length); step++ {
			var next uint32
			var ok bool
			if metaPath {
				next, ok = s.overlayMetaPathStep(id, step, cur)
			} else {
				next, ok = s.overlayNode2VecStep(id, step, prev, cur)
			}
			if !ok {
				break
			}
			out[n] = next
			n++
			prev, cur = cur, next
		}
		lens[k] = uint32(n)
	}
}

// overlayNode2VecStep takes walk id's step from cur, prev the vertex before
// it (graph.NoVertex on the first step, which is DeepWalk's overlay step).
func (s *stepper) overlayNode2VecStep(id uint64, step, prev, cur uint32) (uint32, bool) {
	dv := s.ov.Vertex(cur)
	var a, b uint64
	if int(cur) < len(s.off)-1 {
		a, b = s.off[cur], s.off[cur+1]
	}
	switch {
	case dv == nil && a == b, dv != nil && dv.Live == 0:
		return 0, false
	case prev == graph.NoVertex && dv == nil:
		x0, x1, _, _ := s.draw(id, step, 0)
		return s.overlayStatic(a, b, x0, x1), true
	case prev == graph.NoVertex:
		return s.overlayAttempts(id, step, cur, dv, 0, 0)
	}
	var wb, total float64
	if dv != nil {
		wb = dv.BaseWeight
		total = wb + float64(len(dv.Edges))*float64(dv.MaxWeight)
		if !s.weighted {
			wb = float64(b - a)
			total = wb + float64(len(dv.Edges))
		}
	}
	for att := uint32(0); att < walk.MaxRejections; att++ {
		x0, x1, x2, x3 := s.draw(id, step, att)
		if dv == nil {
			x := s.overlayStatic(a, b, x0, x1)
			if uint64(x2) < s.acceptT[s.overlayN2VClass(prev, x)] {
				return x, true
			}
			continue
		}
		var x uint32
		if float64(x0)*(1.0/(1<<32))*total < wb {
			if a == b {
				continue
			}
			if x = s.overlayStatic(a, b, x1, x2); dv.BaseDead(x) {
				continue
			}
		} else {
			n := uint32(len(dv.Edges))
			if n == 0 {
				continue
			}
			i := walk.Bounded(x1, n)
			de := dv.Edges[i]
			if s.weighted && walk.Unit24(x2)*dv.MaxWeight >= de.Weight || dv.DeltaDead(int(i)) {
				continue
			}
			x = de.Target
		}
		if uint64(x3) < s.acceptT[s.overlayN2VClass(prev, x)] {
			return x, true
		}
	}
	return s.overlayScanBiased(id, step, walk.FallbackDraw, dv, a, b, func(_ bool, _ uint64, x uint32) float64 {
		return s.biasN2V[s.overlayN2VClass(prev, x)]
	})
}

// overlayN2VClass is n2vClass on the snapshot: 0 when x is t, 1 when the
// snapshot has a live edge t->x, else 2.
func (s *stepper) overlayN2VClass(t, x uint32) int {
	if x == t {
		return 0
	}
	if s.overlayHasEdge(t, x) {
		return 1
	}
	return 2
}

// overlayHasEdge reports whether the snapshot holds a live edge u->v. The
// appended edges are scanned: a vertex's delta is short next to its base
// adjacency, which is searched.
func (s *stepper) overlayHasEdge(u, v uint32) bool {
	du := s.ov.Vertex(u)
	if int(u) < len(s.off)-1 && hasEdge(s.off, s.tgt, u, v) && (du == nil || !du.BaseDead(v)) {
		return true
	}
	if du == nil {
		return false
	}
	for i := range du.Edges {
		if du.Edges[i].Target == v && !du.DeltaDead(i) {
			return true
		}
	}
	return false
}
