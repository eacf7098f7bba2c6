package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/prefetch"
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
// snapshot, a group of overlayGroup walks at a time, step by step: each
// walk's steps are its own (the same draws and vertices as one walk after
// another), but the loads of one step are spread over three passes over
// the group, each prefetching what the next reads, so that the walks'
// misses overlap where one walk's waited on each in turn: the vertex's
// index word (and offsets and label segment) at the end of the step
// before, its DeltaVertex pointer after the rank, the DeltaVertex itself
// before the step, and for MetaPath the first attempt's base edge in its
// label segment after that. (One walk at a time, with the delta looked up in the
// snapshot's tree, MetaPath on a 10% delta ran at 7% of the compacted
// graph's rate: docs/benchmarks/live-graph.md.)
func (s *stepper) walkOverlayOneByOne(starts []uint32, firstID uint64, buf, lens []uint32) {
	stride := s.alg.Length + 1
	metaPath := s.alg.Kind == walk.MetaPath
	x := s.ovIdx
	var prev, cur [overlayGroup]uint32
	var n [overlayGroup]int
	var rk [overlayGroup]int
	var dvs [overlayGroup]*walk.DeltaVertex
	for g0 := 0; g0 < len(starts); g0 += overlayGroup {
		m := min(overlayGroup, len(starts)-g0)
		for k := range m {
			buf[(g0+k)*stride] = starts[g0+k]
			prev[k], cur[k], n[k] = graph.NoVertex, starts[g0+k], 1
			s.prefetchOverlayVertex(cur[k], 0)
		}
		live := m
		for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
			if x != nil {
				for k := range m {
					if n[k] == int(step)+1 {
						if rk[k] = x.Rank(cur[k]); rk[k] >= 0 {
							prefetch.Lines4(uintptr(x.HeadAddr(rk[k])), 0, 0, 0)
						}
					}
				}
				for k := range m {
					dvs[k] = nil
					if n[k] == int(step)+1 && rk[k] >= 0 {
						dvs[k] = x.At(rk[k])
						p := uintptr(unsafe.Pointer(dvs[k]))
						prefetch.Lines4(p, p+64, 0, 0)
					}
				}
			}
			if metaPath && s.segs != nil {
				// The first attempt's base edge (the step's, at a
				// vertex without a delta): its segment's offsets came
				// in with the vertex's, its draw is known.
				for k := range m {
					if n[k] == int(step)+1 {
						s.prefetchMetaPathEdge(firstID+uint64(g0+k), step, cur[k], dvs[k])
					}
				}
			}
			for k := range m {
				if n[k] != int(step)+1 {
					continue // ended
				}
				id := firstID + uint64(g0+k)
				dv := dvs[k]
				if x == nil {
					dv = s.ov.Vertex(cur[k])
				}
				var next uint32
				var ok bool
				if metaPath {
					next, ok = s.overlayMetaPathStep(id, step, cur[k], dv)
				} else {
					next, ok = s.overlayNode2VecStep(id, step, prev[k], cur[k], dv)
				}
				if !ok {
					live--
					continue
				}
				buf[(g0+k)*stride+n[k]] = next
				n[k]++
				prev[k], cur[k] = cur[k], next
				s.prefetchOverlayVertex(next, step+1)
			}
		}
		for k := range m {
			lens[g0+k] = uint32(n[k])
		}
	}
}

// prefetchMetaPathEdge prefetches the edges that the first attempt of walk
// id's step from v (delta dv, nil: none) may draw: the base edge in its
// label segment (the target, and the alias entry of a weighted walk:
// pickStatic's entry for draw 0's x0) and the appended edge on x3 and its
// label.
func (s *stepper) prefetchMetaPathEdge(id uint64, step, v uint32, dv *walk.DeltaVertex) {
	lt := s.segs
	x0, _, _, x3 := s.draw(id, step, 0)
	var tgt, al, de, lab uintptr
	if int(v) < len(s.off)-1 {
		want := s.alg.Schema[int(step)%len(s.alg.Schema)]
		i := uint64(v)*uint64(lt.numLabels) + uint64(want)
		if a, b := lt.off[i], lt.off[i+1]; a < b {
			e := a + uint64(walk.Bounded(x0, uint32(b-a)))
			tgt = uintptr(unsafe.Pointer(&lt.tgt[e]))
			if tab := s.segAlias(); tab != nil {
				al = uintptr(unsafe.Pointer(&tab[e]))
			}
		}
	}
	if dv != nil && len(dv.Edges()) > 0 {
		j := walk.Bounded(x3, uint32(len(dv.Edges())))
		de = uintptr(unsafe.Pointer(&dv.Edges()[j]))
		if dl := dv.Labels(); int(j) < len(dl) {
			lab = uintptr(unsafe.Pointer(&dl[j]))
		}
	}
	prefetch.Lines4(tgt, al, de, lab)
}

// overlayGroup is how many walks walkOverlayOneByOne takes step by step
// together: enough misses in flight to cover a step's latency, few enough
// that the lines of a step's first pass are still in L1 at its last.
const overlayGroup = 16

// prefetchOverlayVertex prefetches what step `step` of a walk at v reads
// first: v's offsets, its label segment's and the segment's weight sum
// (MetaPath on the label tables, weighted) and its index word.
func (s *stepper) prefetchOverlayVertex(v uint32, step uint32) {
	var off, seg, sum, word uintptr
	if int(v) < len(s.off)-1 {
		off = uintptr(unsafe.Pointer(&s.off[v]))
		if s.segs != nil && s.alg.Kind == walk.MetaPath {
			want := s.alg.Schema[int(step)%len(s.alg.Schema)]
			i := uint64(v)*uint64(s.segs.numLabels) + uint64(want)
			seg = uintptr(unsafe.Pointer(&s.segs.off[i]))
			if s.segSums != nil {
				sum = uintptr(unsafe.Pointer(&s.segSums[i]))
			}
		}
	}
	if s.ovIdx != nil {
		word = s.ovIdx.WordAddr(v)
	}
	prefetch.Lines4(off, seg, sum, word)
}

// overlayNode2VecStep takes walk id's step from cur, prev the vertex before
// it (graph.NoVertex on the first step, which is DeepWalk's overlay step),
// dv cur's delta (nil: none).
func (s *stepper) overlayNode2VecStep(id uint64, step, prev, cur uint32, dv *walk.DeltaVertex) (uint32, bool) {
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
		total = wb + float64(len(dv.Edges()))*float64(dv.MaxWeight)
		if !s.weighted {
			wb = float64(b - a)
			total = wb + float64(len(dv.Edges()))
		}
	}
	for att := uint32(0); att < walk.MaxRejections; att++ {
		x0, x1, x2, x3 := s.draw(id, step, att)
		if dv == nil {
			x := s.overlayStatic(a, b, x0, x1)
			if s.n2vAccepts(prev, x, x2, true) {
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
			n := uint32(len(dv.Edges()))
			if n == 0 {
				continue
			}
			i := walk.Bounded(x1, n)
			de := dv.Edges()[i]
			if s.weighted && walk.Unit24(x2)*dv.MaxWeight >= de.Weight || dv.DeltaDead(int(i)) {
				continue
			}
			x = de.Target
		}
		if s.n2vAccepts(prev, x, x3, true) {
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

// overlayHasEdge reports whether the snapshot holds a live edge u->v: a
// base edge (searched) no tombstone kills, or a live appended copy, which
// the flat index looks up in its sorted copy of a long delta
// (walk.DeltaIndex.HasAppended; a hub's delta is not short) and the tree
// path scans.
func (s *stepper) overlayHasEdge(u, v uint32) bool {
	k := -1
	var du *walk.DeltaVertex
	if s.ovIdx != nil {
		if k = s.ovIdx.Rank(u); k >= 0 {
			du = s.ovIdx.At(k)
		}
	} else {
		du = s.ov.Vertex(u)
	}
	if int(u) < len(s.off)-1 && hasEdge(s.off, s.tgt, u, v) && (du == nil || !du.BaseDead(v)) {
		return true
	}
	if du == nil {
		return false
	}
	if k >= 0 {
		return s.ovIdx.HasAppended(k, v)
	}
	for i := range du.Edges() {
		if du.Edges()[i].Target == v && !du.DeltaDead(i) {
			return true
		}
	}
	return false
}

// ovVertex is v's delta (nil: none), from the snapshot's flat index where
// the job has it (a bit and a rank) rather than its tree.
func (s *stepper) ovVertex(v uint32) *walk.DeltaVertex {
	if s.ovIdx != nil {
		return s.ovIdx.Vertex(v)
	}
	return s.ov.Vertex(v)
}
