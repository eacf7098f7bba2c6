package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// lockstepNode2Vec reports whether Node2Vec can use the lockstep walker: the
// rejection sampler (the reservoir samplers scan whole adjacencies and gain
// nothing from it).
func (s *stepper) lockstepNode2Vec() bool {
	return s.alg.Kind == walk.Node2Vec && s.sampler == walk.StepperRejection
}

// walkNode2VecLockstep is stepper.walk for Node2Vec's rejection sampler,
// advancing every walk of the unit together. A walk alone spends most of a
// step waiting: on its offsets, on the proposal's alias entry, then on each
// probe of the binary search in the previous vertex's adjacency, every load
// depending on the one before. Here each of those loads is one pass over
// all the walks that need it, so the processor has many misses in flight.
// The draws are keyed exactly as in stepper.step, so the walks are the
// same, vertex for vertex (a test holds the two together).
func (s *stepper) walkNode2VecLockstep(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	newN2VLockstep(s, starts, firstID, buf, lens).run()
}

// n2vLockstep is the state of one unit's Node2Vec lockstep walk. A step
// takes up to maxRejections attempts, each a sequence of passes over the
// walks still pending: propose (draw and resolve a candidate), classify
// (decide what needs no neighbour test), searchFences (find the cache line
// of prev's adjacency that could hold the candidate) and scanLines (test it
// and accept or retry). Per-walk slices are indexed by the walk's position k
// in the unit; the []int32 lists hold positions.
type n2vLockstep struct {
	s       *stepper
	firstID uint64
	stride  int
	buf     []uint32 // the walks, stride apart
	lens    []uint32 // vertices written so far, per walk

	cur, prev []uint32
	// [pLo, pHi): the previous vertex's adjacency, kept from the step that
	// left it, so the neighbour test needs no second offsets load.
	pLo, pHi []uint64
	cLo, cHi []uint64 // the current vertex's adjacency
	// On the fused table a candidate's entry also gives its adjacency
	// [nLo, nHi), which becomes cur's at the next step: only the start
	// vertices and the exact scan's picks (reload) read the offsets.
	nLo, nHi []uint64
	reload   []bool

	col    []uint64 // the proposal's edge (its alias or fused entry)
	cand   []uint32 // the proposed vertex (before resolve: the alias coin)
	accept []uint32 // the draw compared with the class threshold
	// base and width: the range of fences the neighbour test searches,
	// then the line of targets it scans; base2 and width2: the range of
	// second-level fences.
	base, width   []uint64
	base2, width2 []uint64

	active []int32  // walks that take this step
	live   []int32  // walks that took it, in acceptance order
	pend   []int32  // walks whose current attempt is undecided
	retry  []int32  // walks rejected in this attempt
	search []int32  // walks that need the neighbour test
	wide   []int32  // search walks whose fences span more than one line
	todo   []int32  // fenceSearch's scratch
	rows   []uint64 // addresses to prefetch

	// tLow and tHigh are the lower and higher of the neighbour and outward
	// thresholds.
	tLow, tHigh uint64
	words       [4][8]uint32
}

func newN2VLockstep(s *stepper, starts []uint32, firstID uint64, buf []uint32, lens []uint32) *n2vLockstep {
	n := len(starts)
	w := &n2vLockstep{
		s: s, firstID: firstID, stride: s.alg.Length + 1, buf: buf, lens: lens,
		cur: make([]uint32, n), prev: make([]uint32, n),
		pLo: make([]uint64, n), pHi: make([]uint64, n),
		cLo: make([]uint64, n), cHi: make([]uint64, n),
		active: make([]int32, 0, n), live: make([]int32, 0, n),
		pend: make([]int32, 0, n), retry: make([]int32, 0, n),
		search: make([]int32, 0, n), todo: make([]int32, 0, n),
		rows: make([]uint64, 0, n),
		cand: make([]uint32, n), accept: make([]uint32, n),
		col:  make([]uint64, n),
		base: make([]uint64, n), width: make([]uint64, n),
		base2: make([]uint64, n), width2: make([]uint64, n),
		wide: make([]int32, 0, n),
		nLo:  make([]uint64, n), nHi: make([]uint64, n),
		reload: make([]bool, n),
		tLow:   min(s.acceptT[1], s.acceptT[2]), tHigh: max(s.acceptT[1], s.acceptT[2]),
	}
	for k, v := range starts {
		buf[k*w.stride] = v
		lens[k] = 1
		w.cur[k] = v
		w.prev[k] = graph.NoVertex
		w.active = append(w.active, int32(k))
		w.reload[k] = true
	}
	return w
}

func (w *n2vLockstep) run() {
	for step := uint32(0); step < uint32(w.s.alg.Length) && len(w.active) > 0; step++ {
		w.loadAdjacencies()
		w.live = w.live[:0]
		for att := uint32(0); att < walk.MaxRejections && len(w.pend) > 0; att++ {
			w.propose(step, att)
			w.classify()
			w.searchFences()
			w.scanLines()
			w.pend, w.retry = w.retry, w.pend[:0]
		}
		w.fallback(step)
		// live is in acceptance order, not walk order: harmless, since every
		// draw is keyed by walk id, not by position.
		w.active, w.live = w.live, w.active[:0]
	}
}

// advance appends x to walk k and makes it the current vertex.
func (w *n2vLockstep) advance(k int32, x uint32) {
	w.buf[int(k)*w.stride+int(w.lens[k])] = x
	w.lens[k]++
	w.prev[k], w.cur[k] = w.cur[k], x
	w.pLo[k], w.pHi[k] = w.cLo[k], w.cHi[k]
	w.cLo[k], w.cHi[k] = w.nLo[k], w.nHi[k]
	w.live = append(w.live, k)
}

// loadAdjacencies reads the current vertex's adjacency of the active walks
// that do not carry it from the fused table, and makes the walks with edges
// pending.
func (w *n2vLockstep) loadAdjacencies() {
	off, fz := w.s.off, w.s.fused
	w.pend = w.pend[:0]
	w.rows = w.rows[:0]
	for _, k := range w.active {
		if fz == nil || w.reload[k] {
			w.rows = append(w.rows, uint64(w.cur[k]))
		}
	}
	prefetch.Rows(unsafe.Pointer(&off[0]), w.rows, 8, 16)
	for _, k := range w.active {
		if fz == nil || w.reload[k] {
			v := w.cur[k]
			w.cLo[k], w.cHi[k] = off[v], off[v+1]
			w.reload[k] = false
		}
		if w.cLo[k] != w.cHi[k] {
			w.pend = append(w.pend, k)
		}
	}
}

// propose draws attempt att's proposal for every pending walk (x0: the
// column, x1: the alias coin, x2: the acceptance word), eight at a time,
// prefetches its entry, and resolves it pipelineLag walks later (the
// pipeline of pipeline.go).
func (w *n2vLockstep) propose(step, att uint32) {
	pend, col, cLo, cHi := w.pend, w.col, w.cLo, w.cHi
	done := 0
	for base := 0; base < len(pend); base += 8 {
		group := pend[base:min(base+8, len(pend))]
		w.s.draw8(group, w.firstID, step, att, &w.words)
		w.rows = w.rows[:0]
		for l, k := range group {
			col[k] = cLo[k] + uint64(walk.Bounded(w.words[0][l], uint32(cHi[k]-cLo[k])))
			w.cand[k], w.accept[k] = w.words[1][l], w.words[2][l]
			w.rows = append(w.rows, col[k])
		}
		w.prefetchProposals(w.rows)
		for ; done < base+len(group)-pipelineLag; done++ {
			w.resolve(pend[done])
		}
	}
	for ; done < len(pend); done++ {
		w.resolve(pend[done])
	}
}

// prefetchProposals prefetches the entries at cols of the table the
// proposals are drawn from.
func (w *n2vLockstep) prefetchProposals(cols []uint64) {
	switch fz, tab := w.s.fused, w.s.alias; {
	case fz != nil:
		prefetch.Rows(unsafe.Pointer(&fz[0]), cols, unsafe.Sizeof(fz[0]), unsafe.Sizeof(fz[0]))
	case tab != nil:
		prefetch.Rows(unsafe.Pointer(&tab[0]), cols, unsafe.Sizeof(tab[0]), unsafe.Sizeof(tab[0]))
	default:
		prefetch.Rows(unsafe.Pointer(&w.s.tgt[0]), cols, 4, 4)
	}
}

// resolve turns walk k's drawn column into its candidate through the fused
// or packed alias table or the targets, and on the fused table notes the
// candidate's adjacency.
func (w *n2vLockstep) resolve(k int32) {
	c := w.col[k]
	if fz := w.s.fused; fz != nil {
		e := &fz[c]
		t := e.pick(w.cand[k])
		w.cand[k], w.nLo[k], w.nHi[k] = e.to[t].v, e.lo64(t), uint64(e.to[t].deg)
		w.nHi[k] += w.nLo[k]
	} else if tab := w.s.alias; tab == nil {
		w.cand[k] = w.s.tgt[c]
	} else if e := &tab[c]; walk.Unit24(w.cand[k]) < e.prob {
		w.cand[k] = e.keep
	} else {
		w.cand[k] = e.alt
	}
}

// classify decides what can be decided without the neighbour test: first
// steps take the proposal, a return compares with its own threshold, and
// for the rest a word below both the neighbour and the outward threshold
// accepts (above both rejects) whichever class the candidate is in. Only
// the walks in between search prev's adjacency (about half for p=2,
// q=0.5). The decision is the one stepper.step makes, just made sooner.
func (w *n2vLockstep) classify() {
	w.search = w.search[:0]
	w.retry = w.retry[:0]
	for _, k := range w.pend {
		x, acc := w.cand[k], uint64(w.accept[k])
		switch {
		case w.prev[k] == graph.NoVertex:
			w.advance(k, x)
		case x == w.prev[k]:
			if acc < w.s.acceptT[0] {
				w.advance(k, x)
			} else {
				w.retry = append(w.retry, k)
			}
		case acc < w.tLow:
			w.advance(k, x)
		case acc >= w.tHigh:
			w.retry = append(w.retry, k)
		default:
			// Fences inside prev's adjacency [a, b): i0 .. i1. With
			// none, the adjacency is under a cache line: scan it.
			a, b := w.pLo[k], w.pHi[k]
			i0, i1 := (a+fenceStride-1)/fenceStride, (b-1)/fenceStride
			if i0 > i1 {
				w.base[k], w.width[k] = a, 0 // no fence: the line is [a, b)
			} else {
				w.base[k], w.width[k] = i0, i1-i0+1
			}
			w.search = append(w.search, k)
		}
	}
}

// searchFences finds, for every walk in search, the last fence <= the
// candidate. Where the fences span more than one line, the second level
// narrows them to the line that holds it (or to the fences before the
// first second-level one, when the candidate precedes it).
func (w *n2vLockstep) searchFences() {
	base, width, cand := w.base, w.width, w.cand
	fence, f2 := w.s.fence.f1, w.s.fence.f2
	w.wide = w.wide[:0]
	for _, k := range w.search {
		if width[k] > fenceStride {
			i0, i1 := base[k], base[k]+width[k]-1
			j0, j1 := (i0+fenceStride-1)/fenceStride, i1/fenceStride
			w.base2[k], w.width2[k] = j0, j1-j0+1
			w.wide = append(w.wide, k)
		}
	}
	fenceSearch(f2, append(w.todo[:0], w.wide...), w.base2, w.width2, cand)
	for _, k := range w.wide {
		j, i0, end := w.base2[k], base[k], base[k]+width[k]
		if f2[j] <= cand[k] {
			base[k], width[k] = j*fenceStride, min(end, j*fenceStride+fenceStride)-j*fenceStride
		} else {
			width[k] = max(1, j*fenceStride-i0)
		}
	}
	w.rows = w.rows[:0]
	for _, k := range w.search {
		if width[k] > 1 {
			w.rows = append(w.rows, base[k])
		}
	}
	if len(w.rows) > 0 {
		prefetch.Rows(unsafe.Pointer(&fence[0]), w.rows, 4, fenceStride*4)
	}
	fenceSearch(fence, append(w.todo[:0], w.search...), base, width, cand)
}

// scanLines tests the walks in search: the candidate can only be in the
// cache line that the found fence starts, or before the first fence. It
// scans that line, then accepts or leaves the walk to the next attempt.
func (w *n2vLockstep) scanLines() {
	base, width, tgt, fence := w.base, w.width, w.s.tgt, w.s.fence.f1
	w.rows = w.rows[:0]
	for _, k := range w.search {
		i, a, b := base[k], w.pLo[k], w.pHi[k]
		if width[k] == 0 {
			width[k] = b - a // base[k] is a
		} else if line := i * fenceStride; fence[i] <= w.cand[k] {
			base[k], width[k] = line, min(b, line+fenceStride)-line
		} else {
			base[k], width[k] = a, min(b, line)-a
		}
		w.rows = append(w.rows, base[k])
	}
	if len(w.rows) > 0 {
		prefetch.Rows(unsafe.Pointer(&tgt[0]), w.rows, 4, 64)
	}
	for _, k := range w.search {
		x, class := w.cand[k], 2
		for _, t := range tgt[base[k] : base[k]+width[k]] {
			if t == x {
				class = 1
			}
		}
		if uint64(w.accept[k]) < w.s.acceptT[class] {
			w.advance(k, x)
		} else {
			w.retry = append(w.retry, k)
		}
	}
}

// fallback decides the walks rejected maxRejections times by the exact
// scan, as in step.
func (w *n2vLockstep) fallback(step uint32) {
	s := w.s
	for _, k := range w.pend {
		id := w.firstID + uint64(k)
		x, ok := s.scan(id, step, walk.FallbackDraw, w.cLo[k], w.cHi[k], s.node2vecBias(w.prev[k]))
		if ok {
			w.reload[k] = true
			w.advance(k, x)
		}
	}
}
