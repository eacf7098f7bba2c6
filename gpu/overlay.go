package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// A job on a live graph's snapshot (walk.Job.Overlay) walks the engine's
// resident base CSR plus the snapshot's delta, which the engine keeps on
// the device in the layout below (overlay_cuda.go copies it). The kernels
// (kernels/overlay.cuh) take the CPU engine's steps on it, draw for draw.
//
// The device's delta has two levels, as walk.DeltaIndex has, but of its
// own: a resident level, every vertex's delta as of the last whole copy
// (heads and items), and a patch, the vertices whose delta changed since
// (their heads; their items appended to the resident level's). A new
// snapshot then costs its marks (32 bytes per 64 vertices), the patch's
// heads and the items of the vertices written since the snapshot copied
// last, found by their arrays' addresses and counts (deltaKey): the arrays
// are append-only below the counts and never reused while the layout keeps
// the key (its pointers keep them alive), so a key equal to the one copied
// is the same delta. Copying each snapshot's delta
// whole (137 MiB at scale 22, and its layout through every vertex's
// scattered edges on the host) held every read-your-writes batch back on
// the GPU engine: update -> walkable p50 3.2 s (docs/benchmarks/live-graph.md).
//
// A whole copy is made for the first snapshot, when the patch would hold
// more than half the resident level's vertices (its heads then cost about
// what a whole copy's do, and every snapshot copies them), when the items
// appended since the last whole copy outgrow the room it left, and when a
// vertex lost its delta (not within one base: a fold or compaction of the
// live graph gives the engine a new base, and a new engine).
//
// Double buffered: a snapshot's marks and patch heads are written to the
// set the snapshot copied last does not use, its items after the ones that
// snapshot reads, and a whole copy to the resident level it does not use.
// So a walk of the last snapshot never reads a half-written next one, and
// a copy that fails leaves the last snapshot resident and walkable.

// deltaHead mirrors ws::DeltaHead (kernels/overlay.cuh): one vertex's
// delta in 32 bytes (a sector): its appended edges are items[pos, pos+n)
// and its tombstones the next ndLive&^liveBit items.
type deltaHead struct {
	baseWeight float64
	// deadBits has bit deadBit(t) set for each tombstone's target t.
	deadBits  uint64
	pos, n    uint32
	ndLive    uint32 // tombstones, and liveBit when the vertex has a live edge
	maxWeight float32
}

// deltaWord mirrors ws::DeltaWord: 64 vertices' marks in the resident
// level and in the patch (a vertex marked in both is the patch's), and
// how many each level marks in the words before.
type deltaWord struct {
	base, patch         uint64
	baseRank, patchRank uint32
	_                   uint64
}

// deltaItem is an appended edge (walk.DeltaEdge: target, weight bits) or a
// tombstone (walk.Tombstone: target, upto), 8 bytes either way.
type deltaItem struct{ a, b uint32 }

const (
	deltaHeadSize = 32
	deltaWordSize = 32
	liveBit       = 1 << 31
)

var (
	_ [deltaHeadSize - unsafe.Sizeof(deltaHead{})]byte
	_ [unsafe.Sizeof(deltaHead{}) - deltaHeadSize]byte
	_ [deltaWordSize - unsafe.Sizeof(deltaWord{})]byte
	_ [unsafe.Sizeof(deltaWord{}) - deltaWordSize]byte
	_ [unsafe.Sizeof(walk.DeltaEdge{}) - unsafe.Sizeof(deltaItem{})]byte
	_ [unsafe.Sizeof(walk.Tombstone{}) - unsafe.Sizeof(deltaItem{})]byte
)

// deadBit is the filter bit of tombstones of target t (ws::dead_bit, the
// CPU walkers' walk.DeadBit): its top six bits after a multiplicative
// hash, so that the low ids R-MAT edges crowd to spread.
func deadBit(t uint32) uint64 { return 1 << (uint64(t) * 0x9e3779b97f4a7c15 >> 58) }

// deltaResident is a resident level on the host as on the device: the
// heads by rank among its marks, the deltas they were laid out from (what
// a patch compares against), and the items: the level's, then those
// patches appended since; len(items) are used, cap(items) is the device
// array's room.
type deltaResident struct {
	heads []deltaHead
	dvs   []deltaKey
	items []deltaItem
	// labels are the items' labels on a labelled graph (an appended
	// edge's, 0 for a tombstone), as long as items and with its room:
	// MetaPath's overlay step reads them.
	labels []uint8
}

// deltaPatch is one snapshot's marks (both levels) and its patch's heads
// and deltas, by rank among the patch marks.
type deltaPatch struct {
	words []deltaWord
	heads []deltaHead
	dvs   []deltaKey
}

// deltaKey is what tells a vertex's delta from another: its appended
// edges' and tombstones' addresses and counts, its live count and largest
// weight (the base weight follows from the base, the filter from the
// tombstones). 32 bytes, two thirds of the walk.DeltaVertex it stands for;
// its pointers keep the arrays alive, so an address it holds is not reused
// for another delta.
type deltaKey struct {
	first          *walk.DeltaEdge
	dead           *walk.Tombstone
	n, nDead, live uint32
	maxWeight      float32
}

func keyOf(dv *walk.DeltaVertex) deltaKey {
	return deltaKey{first: dv.First, dead: unsafe.SliceData(dv.Dead()), n: dv.N, nDead: dv.NDead(), live: dv.Live, maxWeight: dv.MaxWeight}
}

// deltaLayout is the host image of the device's delta, double buffered:
// res[r] and pat[p] hold the snapshot copied last (valid), the others are
// what the next snapshot is laid out into. Its slices are reused from one
// snapshot to the next.
type deltaLayout struct {
	res   [2]deltaResident
	pat   [2]deltaPatch
	r, p  int
	valid bool
	// labelled: the graph has edge labels, and the layout carries the
	// items' (deltaResident.labels).
	labelled bool
}

// deltaPlan is a snapshot laid out by prepare and not yet committed: the
// resident level and patch it uses and the items to copy, res[r].items
// [from, to) (the whole level's when whole).
type deltaPlan struct {
	whole    bool
	r, p     int
	from, to int
}

// bytes is what the plan copies to the device.
func (l *deltaLayout) bytes(pl deltaPlan) int64 {
	n := int64(len(l.pat[pl.p].words))*deltaWordSize + int64(len(l.pat[pl.p].heads))*deltaHeadSize + int64(pl.to-pl.from)*8
	if l.labelled {
		n += int64(pl.to - pl.from)
	}
	if pl.whole {
		n += int64(len(l.res[pl.r].heads)) * deltaHeadSize
	}
	return n
}

// commit makes pl's snapshot the one copied last, after its copy.
func (l *deltaLayout) commit(pl deltaPlan) {
	if pl.whole && l.valid && pl.r != l.r {
		// The resident level replaced is not compared against again:
		// its deltas need not stay alive (a whole copy into it sets
		// them anew).
		old := &l.res[l.r]
		clear(old.dvs[:cap(old.dvs)])
		old.dvs = old.dvs[:0]
	}
	l.r, l.p, l.valid = pl.r, pl.p, true
	res := &l.res[pl.r]
	res.items = res.items[:pl.to]
	if l.labelled {
		res.labels = res.labels[:pl.to]
	}
}

// words, heads, pheads and items are the snapshot copied last's arrays.
func (l *deltaLayout) words() []deltaWord  { return l.pat[l.p].words }
func (l *deltaLayout) heads() []deltaHead  { return l.res[l.r].heads }
func (l *deltaLayout) pheads() []deltaHead { return l.pat[l.p].heads }
func (l *deltaLayout) items() []deltaItem  { return l.res[l.r].items }

// lookup is ws::delta_head on the host: v's head in the snapshot copied
// last, false when v has no delta.
func (l *deltaLayout) lookup(v uint32) (deltaHead, bool) {
	words := l.words()
	w := int(v >> 6)
	if w >= len(words) {
		return deltaHead{}, false
	}
	wd, b := words[w], v&63
	below := uint64(1)<<b - 1
	switch {
	case wd.patch>>b&1 != 0:
		return l.pheads()[int(wd.patchRank)+bits.OnesCount64(wd.patch&below)], true
	case wd.base>>b&1 != 0:
		return l.heads()[int(wd.baseRank)+bits.OnesCount64(wd.base&below)], true
	}
	return deltaHead{}, false
}

// Vertex records (ws::VertexRecord, kernels/overlay.cuh): one uint64 a
// vertex, built on the device after each copy of a delta for the weighting
// of the walks that read it (overlay_records). A step reads its vertex's
// record and the next one in place of the base's offsets, and takes its
// first attempt from them alone when the record's side threshold puts the
// side word on the base side and the picked target is clear in its
// tombstone filter, as most are; only the other attempts read the head.
// vertexRecords is the kernel's host twin (the tests compare them, and the
// kernel's step with the CPU engine's through twinStep).
const (
	recSideShift   = 36 // bits 0-35: the first base edge's offset
	recDeltaShift  = 45 // bits 36-44: the side threshold s in [0, recSideAll]
	recFilterShift = 46 // bit 45: the vertex has a delta; bits 46-63: the filter
	recFilterBits  = 18
	recSideAll     = 256
	recOffsetMask  = 1<<recSideShift - 1
	recFilterAll   = 1<<recFilterBits - 1
	// recMaxEdges bounds the base edges a record addresses (2^36: a
	// device holds fewer, their targets alone would take 256 GiB).
	recMaxEdges = 1 << recSideShift
)

// recFilterBit is ws::rec_filter_bit: the filter bit of target t.
func recFilterBit(t uint32) uint32 {
	return uint32((uint64(t) * 0x9e3779b97f4a7c15 >> 32) * recFilterBits >> 32)
}

// baseSide is ws::base_side: an attempt's choice of the base side on its
// side word z (z*2^-32 is exact: one rounding, as the device's).
func baseSide(z uint32, total, wb float64) bool { return float64(z)*0x1p-32*total < wb }

// recordSide is ws::record_side: the largest s in [0, 256] with baseSide
// true for every z below s*2^24.
func recordSide(total, wb float64) uint64 {
	lo, hi := uint64(0), uint64(recSideAll)
	for lo < hi {
		m := (lo + hi + 1) >> 1
		if baseSide(uint32(m<<24-1), total, wb) {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// recordCount is the vertices the records of a layout with words marks
// words cover on a base of nv vertices; the records array has one more
// entry (the end).
func recordCount(words, nv int) int { return max(64*words, nv) }

// vertexRecords is overlay_records on the host: the records of the
// snapshot copied last to l, over the base's offsets, for a walk weighted
// or not.
func vertexRecords(offsets []uint64, l *deltaLayout, weighted bool) []uint64 {
	nv := len(offsets) - 1
	n := recordCount(len(l.words()), nv)
	recs := make([]uint64, n+1)
	items := l.items()
	for v := range n + 1 {
		a := offsets[min(v, nv)]
		rec := a
		h, has := deltaHead{}, false
		if v < n {
			h, has = l.lookup(uint32(v))
		}
		switch {
		case v == n:
		case !has:
			rec |= recSideAll << recSideShift
		default:
			s, filter := uint64(0), uint64(recFilterAll)
			if h.ndLive&liveBit != 0 {
				var wb, wd float64
				if weighted {
					wb, wd = h.baseWeight, float64(float64(h.n)*float64(h.maxWeight))
				} else {
					if v < nv {
						wb = float64(offsets[v+1] - a)
					}
					wd = float64(h.n)
				}
				s, filter = recordSide(wb+wd, wb), 0
				nd := h.ndLive &^ liveBit
				for _, it := range items[h.pos+h.n : h.pos+h.n+nd] {
					if filter == recFilterAll {
						break
					}
					filter |= 1 << recFilterBit(it.a)
				}
			}
			rec |= s<<recSideShift | 1<<recDeltaShift | filter<<recFilterShift
		}
		recs[v] = rec
	}
	return recs
}

// deadEdges is overlay_dead_edges on the host: bit e set for each dead
// base edge e (an edge of a vertex with a delta whose target has a
// tombstone), over the base's offsets and targets.
func deadEdges(offsets []uint64, targets []uint32, l *deltaLayout) []uint32 {
	bits := make([]uint32, (len(targets)+31)/32)
	items := l.items()
	for v := range len(offsets) - 1 {
		h, ok := l.lookup(uint32(v))
		nd := h.ndLive &^ liveBit
		if !ok || nd == 0 {
			continue
		}
		dead := items[h.pos+h.n : h.pos+h.n+nd]
		for e := offsets[v]; e < offsets[v+1]; e++ {
			t := targets[e]
			if _, ok := slices.BinarySearchFunc(dead, t, func(it deltaItem, t uint32) int { return cmp.Compare(it.a, t) }); ok && h.deadBits&deadBit(t) != 0 {
				bits[e>>5] |= 1 << (e & 31)
			}
		}
	}
	return bits
}

// deadItems is overlay_dead_edges' item bitmap on the host: bit pos+i
// set for each dead appended edge i of the head at pos (a tombstone on its
// target with upto above i).
func deadItems(l *deltaLayout) []uint32 {
	items := l.items()
	bits := make([]uint32, (len(items)+31)/32)
	mark := func(h deltaHead) {
		nd := h.ndLive &^ liveBit
		if nd == 0 {
			return
		}
		dead := items[h.pos+h.n : h.pos+h.n+nd]
		for i, it := range items[h.pos : h.pos+h.n] {
			k, ok := slices.BinarySearchFunc(dead, it.a, func(it deltaItem, t uint32) int { return cmp.Compare(it.a, t) })
			if ok && h.deadBits&deadBit(it.a) != 0 && uint32(i) < dead[k].b {
				p := h.pos + uint32(i)
				bits[p>>5] |= 1 << (p & 31)
			}
		}
	}
	for v := range uint32(64 * len(l.words())) {
		if h, ok := l.lookup(v); ok {
			mark(h)
		}
	}
	return bits
}

// layoutWords is how many bitmap words (64 vertices each) a goroutine of
// the layout takes at a time: a whole layout reads each vertex's edges
// where the live graph put them (scattered over the heap), so on a large
// snapshot all cores share it.
const layoutWords = 1 << 10

// layoutCount is what a span of words adds: vertices (heads) and items.
type layoutCount struct{ vertices, items uint64 }

// prepare lays out the delta index x of a snapshot of nv vertices into the
// buffers the snapshot copied last does not use: a patch over the resident
// level when it can (see the top of this file), else whole. It reads x
// through its lookups only (Marks, Rank, At, Head), so it does not depend
// on how the index keeps its levels. Nothing the last snapshot reads is
// written; commit makes the plan current once it is copied.
func (l *deltaLayout) prepare(x *walk.DeltaIndex, nv int) (deltaPlan, error) {
	if l.valid {
		if pl, ok, err := l.preparePatch(x, nv); ok || err != nil {
			return pl, err
		}
	}
	return l.prepareWhole(x, nv)
}

// spanWords is the words [lo, hi) of span i of words.
func spanWords(i, words int) (lo, hi int) { return i * layoutWords, min(words, (i+1)*layoutWords) }

// prefix turns counts[1:] into running totals from counts[0] and returns
// the total.
func prefix(counts []layoutCount) layoutCount {
	for i := 1; i < len(counts); i++ {
		counts[i].vertices += counts[i-1].vertices
		counts[i].items += counts[i-1].items
	}
	return counts[len(counts)-1]
}

// preparePatch lays x out as a patch over the resident level; ok is false
// when a whole copy is due instead.
func (l *deltaLayout) preparePatch(x *walk.DeltaIndex, nv int) (pl deltaPlan, ok bool, err error) {
	words := (nv + 63) / 64
	cur, res := &l.pat[l.p], &l.res[l.r]
	if words < len(cur.words) {
		return pl, false, nil
	}
	np := &l.pat[1-l.p]
	np.words = grow(np.words, words)
	spans := (words + layoutWords - 1) / layoutWords
	counts := make([]layoutCount, spans+1)
	lost := make([]bool, spans)
	// at is word w of the snapshot copied last, extended past its
	// vertices with no marks and the ranks of its end.
	at := func(w int) deltaWord {
		if w < len(cur.words) {
			return cur.words[w]
		}
		return deltaWord{baseRank: uint32(len(res.heads)), patchRank: uint32(len(cur.heads))}
	}
	// Pass 1: the patch marks (vertices whose delta is not the resident
	// one) and the items of those not in the last patch with the same
	// delta.
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i, words)
		var c layoutCount
		for w := lo; w < hi; w++ {
			old, xm := at(w), x.Marks(w)
			if old.base&^xm != 0 {
				lost[i] = true
				return
			}
			var pm uint64
			for m := xm; m != 0; m &= m - 1 {
				b := uint(bits.TrailingZeros64(m))
				below := uint64(1)<<b - 1
				k := x.Rank(uint32(w*64) + uint32(b))
				dv := x.At(k)
				if old.base>>b&1 != 0 && res.dvs[int(old.baseRank)+bits.OnesCount64(old.base&below)] == keyOf(dv) {
					continue
				}
				pm |= 1 << b
				c.vertices++
				if old.patch>>b&1 != 0 && cur.dvs[int(old.patchRank)+bits.OnesCount64(old.patch&below)] == keyOf(dv) {
					continue
				}
				c.items += uint64(dv.N) + uint64(dv.NDead())
			}
			np.words[w] = deltaWord{base: old.base, patch: pm, baseRank: old.baseRank}
		}
		counts[i+1] = c
	})
	for _, b := range lost {
		if b {
			return pl, false, nil
		}
	}
	total := prefix(counts)
	used := uint64(len(res.items))
	if 2*total.vertices > uint64(len(res.heads))+256 || used+total.items > uint64(cap(res.items)) {
		return pl, false, nil
	}
	np.heads = grow(np.heads, int(total.vertices))
	np.dvs = grow(np.dvs, int(total.vertices))
	items, labs := res.items[:used+total.items], res.labelsFor(l.labelled, used+total.items)
	// Pass 2: ranks, heads, and the new items after the used ones.
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i, words)
		c := counts[i]
		for w := lo; w < hi; w++ {
			old := at(w)
			np.words[w].patchRank = uint32(c.vertices)
			for m := np.words[w].patch; m != 0; m &= m - 1 {
				b := uint(bits.TrailingZeros64(m))
				k := x.Rank(uint32(w*64) + uint32(b))
				dv := x.At(k)
				// In the last patch with this delta: its items are
				// where that patch put them.
				j := int(old.patchRank) + bits.OnesCount64(old.patch&(uint64(1)<<b-1))
				var d deltaHead
				if old.patch>>b&1 != 0 && cur.dvs[j] == keyOf(dv) {
					d = cur.heads[j]
				} else {
					d = layoutVertex(items, labs, used+c.items, x.Head(k))
					c.items += uint64(d.n) + uint64(d.ndLive&^liveBit)
				}
				np.heads[c.vertices], np.dvs[c.vertices] = d, keyOf(dv)
				c.vertices++
			}
		}
	})
	if int(total.vertices)+countMarks(np.words, false) != x.Len() {
		return pl, false, fmt.Errorf("gpu: the live graph's delta index lists %d vertices with a delta below vertex %d, and holds %d", int(total.vertices)+countMarks(np.words, false), nv, x.Len())
	}
	return deltaPlan{r: l.r, p: 1 - l.p, from: int(used), to: int(used + total.items)}, true, nil
}

// countMarks counts the resident marks not hidden by the patch's (or,
// with patch, the patch's marks).
func countMarks(words []deltaWord, patch bool) int {
	n := 0
	for _, wd := range words {
		if patch {
			n += bits.OnesCount64(wd.patch)
		} else {
			n += bits.OnesCount64(wd.base &^ wd.patch)
		}
	}
	return n
}

// layoutVertex writes h's appended edges then its tombstones to items at
// pos, and with labels (a labelled layout) their labels, and returns its
// device head.
func layoutVertex(items []deltaItem, labels []uint8, pos uint64, h *walk.DeltaHead) deltaHead {
	d := deltaHead{baseWeight: h.BaseWeight, deadBits: h.DeadBits, pos: uint32(pos), n: h.N, ndLive: h.NDead(), maxWeight: h.MaxWeight}
	if h.Live > 0 {
		d.ndLive |= liveBit
	}
	end := pos + uint64(h.N) + uint64(h.NDead())
	if labels != nil {
		clear(labels[pos:end])
		copy(labels[pos:pos+uint64(h.N)], h.Labels())
	}
	if h.N > 0 {
		copy(items[pos:pos+uint64(h.N)], unsafe.Slice((*deltaItem)(unsafe.Pointer(h.First)), h.N))
		pos += uint64(h.N)
	}
	if dead := h.Dead(); len(dead) > 0 {
		copy(items[pos:pos+uint64(len(dead))], unsafe.Slice((*deltaItem)(unsafe.Pointer(unsafe.SliceData(dead))), len(dead)))
	}
	return d
}

// labelsFor is r's labels resliced to n (as its items), with the items'
// room, on a labelled layout; nil otherwise.
func (r *deltaResident) labelsFor(labelled bool, n uint64) []uint8 {
	if !labelled {
		return nil
	}
	if cap(r.labels) != cap(r.items) {
		old := r.labels
		r.labels = make([]uint8, len(old), cap(r.items))
		copy(r.labels, old)
	}
	r.labels = r.labels[:n]
	return r.labels
}

// prepareWhole lays x out whole into the resident level and patch the
// snapshot copied last does not use (the patch empty). Three passes over
// spans of layoutWords words, each on all cores: the marks and the counts
// of vertices and items per span; their prefix sums; the heads, ranks and
// copies. The positions are 32-bit (8 bytes an item, 32 GiB of them),
// which a delta reaches long after it should have been compacted. The
// items get as much room again for the patches that follow: a vertex
// written again is laid out again, whole, and with endpoints drawn by
// degree the hubs are written in every snapshot (BenchmarkDeltaLayout:
// with half as much room, every other snapshot was a whole copy).
func (l *deltaLayout) prepareWhole(x *walk.DeltaIndex, nv int) (deltaPlan, error) {
	words := (nv + 63) / 64
	spans := (words + layoutWords - 1) / layoutWords
	r, p := 1-l.r, 1-l.p
	if !l.valid {
		r, p = 0, 0
	}
	res, np := &l.res[r], &l.pat[p]
	np.words = grow(np.words, words)
	np.heads, np.dvs = np.heads[:0], np.dvs[:0]
	counts := make([]layoutCount, spans+1)
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i, words)
		var c layoutCount
		for w := lo; w < hi; w++ {
			var m uint64
			if w*64 < nv {
				m = x.Marks(w)
				if rest := nv - w*64; rest < 64 {
					m &= uint64(1)<<rest - 1
				}
			}
			for b := m; b != 0; b &= b - 1 {
				h := x.Head(x.Rank(uint32(w*64 + bits.TrailingZeros64(b))))
				c.vertices++
				c.items += uint64(h.N) + uint64(h.NDead())
			}
			np.words[w] = deltaWord{base: m}
		}
		counts[i+1] = c
	})
	total := prefix(counts)
	if total.items > math.MaxUint32 {
		return deltaPlan{}, fmt.Errorf("gpu: the live graph's delta holds %d appended edges and tombstones, more than the %d the device layout addresses; compact it (WALKSTAGE_EDGE_COMPACT_RATIO)",
			total.items, uint64(math.MaxUint32))
	}
	if int(total.vertices) != x.Len() {
		return deltaPlan{}, fmt.Errorf("gpu: the live graph's delta index lists %d vertices with a delta below vertex %d, and holds %d", total.vertices, nv, x.Len())
	}
	res.heads = grow(res.heads, int(total.vertices))
	clear(res.dvs[:cap(res.dvs)]) // no stale delta kept alive
	res.dvs = grow(res.dvs, int(total.vertices))
	// Reused when it leaves a quarter of the items' room and is not
	// twice what is asked for.
	if room := min(2*total.items+1<<12, math.MaxUint32); uint64(cap(res.items)) < min(total.items+total.items/4, room) || uint64(cap(res.items)) > 2*room {
		res.items = make([]deltaItem, 0, room)
	}
	items, labs := res.items[:total.items], res.labelsFor(l.labelled, total.items)
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i, words)
		c := counts[i]
		for w := lo; w < hi; w++ {
			np.words[w].baseRank = uint32(c.vertices)
			for m := np.words[w].base; m != 0; m &= m - 1 {
				k := x.Rank(uint32(w*64 + bits.TrailingZeros64(m)))
				d := layoutVertex(items, labs, c.items, x.Head(k))
				c.items += uint64(d.n) + uint64(d.ndLive&^liveBit)
				res.heads[c.vertices], res.dvs[c.vertices] = d, keyOf(x.At(k))
				c.vertices++
			}
		}
	})
	return deltaPlan{whole: true, r: r, p: p, from: 0, to: int(total.items)}, nil
}

// grow returns s resliced to n, reallocated when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// jobOverlay is the snapshot a job walks on, nil for the base (no overlay,
// or an empty one: the usual kernels then walk it, as the CPU engine does).
func jobOverlay(j *walk.Job) walk.Overlay {
	if j.Overlay == nil || j.Overlay.Empty() {
		return nil
	}
	return j.Overlay
}

// sameOverlay says whether jobs on a and b walk the same snapshot. An
// overlay type that cannot be compared (not a pointer, as livegraph's is)
// makes every job a group of its own rather than a panic.
func sameOverlay(a, b walk.Overlay) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b
}
