package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

var _ walk.OverlayWalker = (*Engine)(nil)

// CheckOverlay implements OverlayWalker.
func (e *Engine) CheckOverlay(a walk.Algorithm) error { return walk.OverlaySupported(a) }

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
	if s.alg.Kind == walk.PPR {
		x0, _, _, _ := s.draw(id, step, 0)
		if uint64(x0) < s.stopT {
			return 0, false
		}
		first = 1
	}
	return s.overlayAttempts(id, step, cur, dv, first, 0)
}

// overlayAttempts draws the step of a vertex with a delta from attempt att
// on (attempt a takes draw first+a), and scans after maxRejections.
func (s *stepper) overlayAttempts(id uint64, step, cur uint32, dv *walk.DeltaVertex, first, from uint32) (uint32, bool) {
	var a, b uint64
	if int(cur) < len(s.off)-1 {
		a, b = s.off[cur], s.off[cur+1]
	}
	// The delta side's weight is its draw's envelope: a uniform edge
	// accepted with probability Weight / MaxWeight takes edge i with
	// probability proportional to its weight only if the side is chosen
	// in proportion to len(Edges) * MaxWeight.
	wb, wd := dv.BaseWeight, float64(len(dv.Edges()))*float64(dv.MaxWeight)
	if !s.weighted {
		wb, wd = float64(b-a), float64(len(dv.Edges()))
	}
	total := wb + wd
	for att := from; att < walk.MaxRejections; att++ {
		// The side on x2; a base edge on x0 and x1 as the base's step
		// draws it (so a walker can draw it before it knows whether the
		// vertex has a delta); an appended edge on x3, kept on x1.
		x0, x1, x2, x3 := s.draw(id, step, first+att)
		if float64(x2)*(1.0/(1<<32))*total < wb {
			if a == b {
				continue
			}
			t := s.overlayStatic(a, b, x0, x1)
			if !dv.BaseDead(t) {
				return t, true
			}
			continue
		}
		n := uint32(len(dv.Edges()))
		if n == 0 {
			continue
		}
		i := walk.Bounded(x3, n)
		de := dv.Edges()[i]
		if s.weighted && walk.Unit24(x1)*dv.MaxWeight >= de.Weight {
			continue
		}
		if !dv.DeltaDead(int(i)) {
			return de.Target, true
		}
	}
	return s.overlayScan(id, step, first+walk.FallbackDraw, dv, a, b)
}

// overlayStatic is static for a step on an overlay, which may draw a
// weighted walk's base edges from the fused table (walkRingOverlay): built
// from the same alias tables as the packed one, it gives the same target.
func (s *stepper) overlayStatic(a, b uint64, x, y uint32) uint32 {
	if s.alias == nil && s.fused != nil && needsAlias(s.alg) {
		e := &s.fused[a+uint64(walk.Bounded(x, uint32(b-a)))]
		return e.to[e.pick(y)&1].v
	}
	return s.static(a, b, x, y)
}

// overlayScan is overlayStep's exact fallback: one draw, and a scan of the
// live edges' cumulative weights.
func (s *stepper) overlayScan(id uint64, step, d uint32, dv *walk.DeltaVertex, a, b uint64) (uint32, bool) {
	return s.overlayScanBiased(id, step, d, dv, a, b, nil)
}

// overlayScanBiased is overlayScan with each live edge's weight times its
// bias (nil: 1), given the edge (a base edge's index in the CSR, or an
// appended edge's in dv.Edges()) and its target. dv may be nil: cur's base
// edges, all live.
func (s *stepper) overlayScanBiased(id uint64, step, d uint32, dv *walk.DeltaVertex, a, b uint64, bias func(base bool, i uint64, t uint32) float64) (uint32, bool) {
	weight := func(base bool, i uint64, t uint32) float64 {
		w := 1.0
		switch {
		case !s.weighted:
		case base:
			w = float64(s.w[i])
		default:
			w = float64(dv.Edges()[i].Weight)
		}
		if bias != nil {
			// float64(): never an FMA with the sum it is added to, so
			// the GPU's scan (overlay_scan_n2v) rounds the same.
			w = float64(w * bias(base, i, t))
		}
		return w
	}
	var edges []walk.DeltaEdge
	var dead []walk.Tombstone
	if dv != nil {
		edges, dead = dv.Edges(), dv.Dead()
	}
	// A vertex's base targets are sorted, as its tombstones are: each
	// pass over the base edges merges them, O(degree) instead of a
	// search per edge (a hub with most of its edges deleted takes this
	// scan on most of its steps).
	var di int
	baseLive := func(t uint32) bool {
		for di < len(dead) && dead[di].Target < t {
			di++
		}
		return di == len(dead) || dead[di].Target != t
	}
	var sum float64
	for e := a; e < b; e++ {
		if t := s.tgt[e]; baseLive(t) {
			sum += weight(true, e, t)
		}
	}
	for i, de := range edges {
		if !dv.DeltaDead(i) {
			sum += weight(false, uint64(i), de.Target)
		}
	}
	x0, x1, _, _ := s.draw(id, step, d)
	u := (float64(x0) + float64(x1)*(1.0/(1<<32))) * (1.0 / (1 << 32)) * sum
	last, found := uint32(0), false
	di = 0
	for e := a; e < b; e++ {
		if t := s.tgt[e]; baseLive(t) {
			w := weight(true, e, t)
			if u -= w; u < 0 {
				return t, true
			}
			if w > 0 {
				last, found = t, true
			}
		}
	}
	for i, de := range edges {
		if !dv.DeltaDead(i) {
			w := weight(false, uint64(i), de.Target)
			if u -= w; u < 0 {
				return de.Target, true
			}
			if w > 0 {
				last, found = de.Target, true
			}
		}
	}
	// Rounding may leave u a hair above the sum: the last live edge of
	// positive weight. None (MetaPath's bias 0 on every live edge: no
	// edge of the step's label) ends the walk.
	return last, found
}

// What the first attempt of a walk's step on an overlay drew
// (walkOverlayUnit).
const (
	ovEnd   = iota // the walk ends here (dead end, PPR stop)
	ovBase         // a vertex without a delta: the base edge drawn is the step
	ovBaseD        // a base edge of a vertex with a delta: taken unless dead
	ovDelta        // an appended edge: taken if kept and not dead
	ovRetry        // the attempt drew nothing: go on from attempt 1
)

// overlayBlock is how many walks a pass of walkOverlayUnit handles at a
// time: the lines a pass prefetches for a block are read two blocks later,
// while they are still in L1 (a pass over all of a unit's 1,024 walks
// prefetched more than L1 holds before reading any).
const overlayBlock = 64

// walkOverlayUnit walks a unit's walks on an overlay all together, one step
// of every walk before the next step of any, in three passes over blocks of
// overlayBlock walks, pipelined so that each pass's prefetches are read
// two blocks later instead of waited for: the first looks up each walk's
// delta (the radix tree's leaves) and prefetches it and the vertex's
// offsets row, the second takes the step's first draw and prefetches the
// edge it names (the alias entry or target, or the appended edge), the
// third decides. A first attempt that lands on a dead or unkept edge goes
// on in overlayAttempts from attempt 1, so the walks are those of
// overlayStep.
func (s *stepper) walkOverlayUnit(starts []uint32, firstID uint64, buf, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	dvs := make([]*walk.DeltaVertex, n)
	pick := make([]uint64, n)
	coin := make([]uint32, n)
	kind := make([]uint8, n)
	firsts := make([]uint32, n)
	rows := make([]uint64, 0, overlayBlock)
	addrs := make([]uint64, 0, overlayBlock)
	active := make([]int32, 0, n)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		active = append(active, int32(k))
	}
	off, tgt, tab := s.off, s.tgt, s.alias
	baseV := uint32(len(off) - 1)
	ppr := s.alg.Kind == walk.PPR
	var step uint32
	lookup := func(block []int32) {
		rows, addrs = rows[:0], addrs[:0]
		for _, k := range block {
			c := cur[k]
			dv := s.ov.Vertex(c)
			dvs[k] = dv
			if dv != nil {
				addrs = append(addrs, uint64(uintptr(unsafe.Pointer(dv))))
			}
			if c < baseV {
				rows = append(rows, uint64(c))
			}
		}
		prefetch.Rows(nil, addrs, 1, unsafe.Sizeof(walk.DeltaVertex{}))
		if len(rows) > 0 {
			prefetch.Rows(unsafe.Pointer(&off[0]), rows, 8, 16)
		}
	}
	draw := func(block []int32) {
		rows, addrs = rows[:0], addrs[:0]
		for _, k := range block {
			id, c, dv := firstID+uint64(k), cur[k], dvs[k]
			var a, b uint64
			if c < baseV {
				a, b = off[c], off[c+1]
			}
			if dv == nil {
				if a == b {
					kind[k] = ovEnd
					continue
				}
				x0, x1, x2, _ := s.draw(id, step, 0)
				if ppr {
					if uint64(x0) < s.stopT {
						kind[k] = ovEnd
						continue
					}
					x0, x1 = x1, x2
				}
				kind[k], pick[k], coin[k] = ovBase, a+uint64(walk.Bounded(x0, uint32(b-a))), x1
				rows = append(rows, pick[k])
				continue
			}
			if dv.Live == 0 {
				kind[k] = ovEnd
				continue
			}
			first := uint32(0)
			if ppr {
				x0, _, _, _ := s.draw(id, step, 0)
				if uint64(x0) < s.stopT {
					kind[k] = ovEnd
					continue
				}
				first = 1
			}
			firsts[k] = first
			wb, wd := dv.BaseWeight, float64(len(dv.Edges()))*float64(dv.MaxWeight)
			if !s.weighted {
				wb, wd = float64(b-a), float64(len(dv.Edges()))
			}
			x0, x1, x2, x3 := s.draw(id, step, first)
			switch {
			case float64(x2)*(1.0/(1<<32))*(wb+wd) < wb:
				if a == b {
					kind[k] = ovRetry
					continue
				}
				kind[k], pick[k], coin[k] = ovBaseD, a+uint64(walk.Bounded(x0, uint32(b-a))), x1
				rows = append(rows, pick[k])
			case len(dv.Edges()) == 0:
				kind[k] = ovRetry
			default:
				i := walk.Bounded(x3, uint32(len(dv.Edges())))
				kind[k], pick[k], coin[k] = ovDelta, uint64(i), x1
				addrs = append(addrs, uint64(uintptr(unsafe.Pointer(&dv.Edges()[i]))))
			}
		}
		if len(rows) > 0 {
			if tab != nil {
				prefetch.Rows(unsafe.Pointer(&tab[0]), rows, unsafe.Sizeof(aliasEntry{}), unsafe.Sizeof(aliasEntry{}))
			} else {
				prefetch.Rows(unsafe.Pointer(&tgt[0]), rows, 4, 4)
			}
		}
		prefetch.Rows(nil, addrs, 1, unsafe.Sizeof(walk.DeltaEdge{}))
	}
	var keep []int32
	decide := func(block []int32) {
		for _, k := range block {
			var next uint32
			ok := true
			dv := dvs[k]
			switch kind[k] {
			case ovEnd:
				ok = false
			case ovBase, ovBaseD:
				e := pick[k]
				if tab == nil {
					next = tgt[e]
				} else if en := &tab[e]; walk.Unit24(coin[k]) < en.prob {
					next = en.keep
				} else {
					next = en.alt
				}
				if kind[k] == ovBaseD && dv.BaseDead(next) {
					next, ok = s.overlayAttempts(firstID+uint64(k), step, cur[k], dv, firsts[k], 1)
				}
			case ovDelta:
				de := dv.Edges()[pick[k]]
				if s.weighted && walk.Unit24(coin[k])*dv.MaxWeight >= de.Weight || dv.DeltaDead(int(pick[k])) {
					next, ok = s.overlayAttempts(firstID+uint64(k), step, cur[k], dv, firsts[k], 1)
				} else {
					next = de.Target
				}
			case ovRetry:
				next, ok = s.overlayAttempts(firstID+uint64(k), step, cur[k], dv, firsts[k], 1)
			}
			if !ok {
				continue
			}
			buf[int(k)*stride+int(lens[k])] = next
			lens[k]++
			cur[k] = next
			// keep is a prefix of active that never passes the block
			// being decided, so it overwrites only walks already read.
			keep = append(keep, k)
		}
	}
	blockOf := func(i int) []int32 { return active[i*overlayBlock : min((i+1)*overlayBlock, len(active))] }
	for ; step < uint32(s.alg.Length) && len(active) > 0; step++ {
		keep = active[:0]
		nb := (len(active) + overlayBlock - 1) / overlayBlock
		for i := 0; i < nb+2; i++ {
			if i < nb {
				lookup(blockOf(i))
			}
			if i >= 1 && i-1 < nb {
				draw(blockOf(i - 1))
			}
			if i >= 2 {
				decide(blockOf(i - 2))
			}
		}
		active = keep
	}
}
