package walk

import (
	"fmt"
	"iter"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

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

// DeltaIndexer is implemented by overlays that keep a DeltaIndex of
// themselves, built once per snapshot, so that each job walking a snapshot
// does not rebuild it (IndexOf).
type DeltaIndexer interface {
	DeltaIndex() *DeltaIndex
}

// DeltaIndex is a snapshot's deltas in flat arrays, for walkers that check
// at every step whether the vertex has a delta: a bit per vertex (an eighth
// of a byte, where a lookup in the snapshot's own structure may be a walk
// down a tree) and, for the vertices marked, their DeltaVertex by rank.
type DeltaIndex struct {
	bits  []uint64
	rank  []uint32 // vertices marked in the words before word i
	dvs   []*DeltaVertex
	heads []DeltaHead
}

// DeltaHead is what the first draw of a step from a vertex with a delta
// reads of its DeltaVertex, in 48 bytes (a DeltaVertex is 96, behind a
// pointer): a walker keeps these for all vertices with a delta in one flat
// array, in cache where the DeltaVertex structs are scattered.
type DeltaHead struct {
	// First is the first appended edge (nil when there are none), N
	// their count: the DeltaVertex's Edges.
	First      *DeltaEdge
	N          uint32
	MaxWeight  float32
	BaseWeight float64
	// Dead is the first tombstone (nil when there are none), NDead their
	// count: the DeltaVertex's Dead.
	Dead  *Tombstone
	NDead uint32
	// DeadBits has bit DeadBit(t) set for every tombstone's target t (0
	// when there are none): a step checks it before it searches the
	// tombstones, which sit in an array of their own, a cache miss away.
	// With a tombstone or two a vertex, a base edge's check reads the
	// array once in 32 to 64 steps instead of at every one.
	DeadBits uint64
	// Live: the vertex has a live edge.
	Live bool
}

// DeadBit is the bit of DeltaHead.DeadBits that tombstones of target t
// set: t's top six bits after a multiplicative hash, so that targets near
// each other (the low ids an R-MAT graph's edges crowd to) spread.
func DeadBit(t uint32) uint64 { return 1 << (uint64(t) * 0x9e3779b97f4a7c15 >> 58) }

// MayBeDead reports whether a tombstone of target t may exist: false means
// there is none (BaseDead and DeltaDead are false), without reading the
// tombstones.
func (h *DeltaHead) MayBeDead(t uint32) bool { return h.DeadBits&DeadBit(t) != 0 }

// BaseDead is DeltaVertex.BaseDead.
func (h *DeltaHead) BaseDead(t uint32) bool {
	if !h.MayBeDead(t) {
		return false
	}
	_, ok := findTombstone(unsafe.Slice(h.Dead, h.NDead), t)
	return ok
}

// DeltaDead is DeltaVertex.DeltaDead for appended edge i, whose target is t.
func (h *DeltaHead) DeltaDead(i, t uint32) bool {
	if !h.MayBeDead(t) {
		return false
	}
	ts, ok := findTombstone(unsafe.Slice(h.Dead, h.NDead), t)
	return ok && i < ts.Upto
}

// findTombstone is a binary search of tombstones sorted by target.
func findTombstone(dead []Tombstone, t uint32) (Tombstone, bool) {
	lo, hi := 0, len(dead)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if dead[m].Target < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(dead) && dead[lo].Target == t {
		return dead[lo], true
	}
	return Tombstone{}, false
}

// NewDeltaIndex builds the index of n vertices (dense ids 0..n-1) from
// their deltas, listed in increasing vertex order.
func NewDeltaIndex(n int, deltas iter.Seq2[uint32, *DeltaVertex]) *DeltaIndex {
	words := (n + 63) / 64
	x := &DeltaIndex{bits: make([]uint64, words), rank: make([]uint32, words)}
	for v, dv := range deltas {
		if dv == nil || int(v) >= n {
			continue
		}
		x.bits[v>>6] |= 1 << (v & 63)
		x.dvs = append(x.dvs, dv)
		x.heads = append(x.heads, NewDeltaHead(dv))
	}
	var r uint32
	for i, w := range x.bits {
		x.rank[i] = r
		r += uint32(bits.OnesCount64(w))
	}
	return x
}

// NewDeltaIndexSpans builds the index of n vertices from spans of span
// vertices each (span a multiple of 64; span i covers vertices [i*span,
// (i+1)*span)), several spans at once: count(i) says how many deltas span
// i holds, deltas(i, yield) lists them in increasing vertex order. Two
// passes over the deltas, both spread over the cores: a live graph's
// snapshot holds millions of vertices with a delta behind pointers, and a
// single pass on one core (NewDeltaIndex) took most of a stage's CPU at
// scale 22 (docs/benchmarks/live-graph.md). The arrays are allocated at
// their exact sizes, so a build leaves no garbage but the old snapshot's.
func NewDeltaIndexSpans(n, span int, count func(i int) int, deltas func(i int, yield func(uint32, *DeltaVertex) bool)) *DeltaIndex {
	if span <= 0 || span%64 != 0 {
		panic(fmt.Sprintf("walk: delta index span %d is not a positive multiple of 64", span))
	}
	words := (n + 63) / 64
	spans := (n + span - 1) / span
	x := &DeltaIndex{bits: make([]uint64, words), rank: make([]uint32, words)}
	counts := make([]int, spans+1)
	parallelSpans(spans, func(i int) { counts[i+1] = count(i) })
	for i := range spans {
		counts[i+1] += counts[i]
	}
	x.dvs = make([]*DeltaVertex, counts[spans])
	x.heads = make([]DeltaHead, counts[spans])
	parallelSpans(spans, func(i int) {
		k, end := counts[i], counts[i+1]
		lo, hi := uint32(i*span), uint32(min(n, (i+1)*span))
		for v, dv := range func(yield func(uint32, *DeltaVertex) bool) { deltas(i, yield) } {
			if dv == nil || v < lo || v >= hi {
				continue
			}
			if k == end {
				panic(fmt.Sprintf("walk: delta index span %d lists more than the %d deltas it counted", i, end-counts[i]))
			}
			x.bits[v>>6] |= 1 << (v & 63)
			x.dvs[k], x.heads[k] = dv, NewDeltaHead(dv)
			k++
		}
		if k != end {
			panic(fmt.Sprintf("walk: delta index span %d lists %d deltas, it counted %d", i, k-counts[i], end-counts[i]))
		}
		r := uint32(counts[i])
		for w := int(lo) / 64; w < (int(hi)+63)/64; w++ {
			x.rank[w] = r
			r += uint32(bits.OnesCount64(x.bits[w]))
		}
	})
	return x
}

// parallelSpans runs f(0..n-1) on up to GOMAXPROCS goroutines.
func parallelSpans(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// NewDeltaHead returns dv's DeltaHead: what a builder of a DeltaIndex
// stores for a vertex with a delta, derived from dv alone (so an index kept
// up to date as updates are applied recomputes the heads of the vertices
// an update changed, and no other). O(len(dv.Dead)).
func NewDeltaHead(dv *DeltaVertex) DeltaHead {
	h := DeltaHead{N: uint32(len(dv.Edges)), MaxWeight: dv.MaxWeight, BaseWeight: dv.BaseWeight, NDead: uint32(len(dv.Dead)), Live: dv.Live > 0}
	if len(dv.Edges) > 0 {
		h.First = &dv.Edges[0]
	}
	if len(dv.Dead) > 0 {
		h.Dead = &dv.Dead[0]
	}
	for _, ts := range dv.Dead {
		h.DeadBits |= DeadBit(ts.Target)
	}
	return h
}

// IndexOf returns o's DeltaIndex: the one it keeps, or one built by asking
// Vertex of every vertex.
func IndexOf(o Overlay) *DeltaIndex {
	if di, ok := o.(DeltaIndexer); ok {
		return di.DeltaIndex()
	}
	return NewDeltaIndex(o.NumVertices(), func(yield func(uint32, *DeltaVertex) bool) {
		for v := range uint32(o.NumVertices()) {
			if dv := o.Vertex(v); dv != nil && !yield(v, dv) {
				return
			}
		}
	})
}

// Has reports whether v has a delta.
func (x *DeltaIndex) Has(v uint32) bool {
	w := int(v >> 6)
	return w < len(x.bits) && x.bits[w]>>(v&63)&1 != 0
}

// Vertex returns v's delta, nil when it has none: Overlay.Vertex, read from
// the flat arrays.
func (x *DeltaIndex) Vertex(v uint32) *DeltaVertex {
	if !x.Has(v) {
		return nil
	}
	w := v >> 6
	return x.dvs[x.rank[w]+uint32(bits.OnesCount64(x.bits[w]&(1<<(v&63)-1)))]
}

// Rank returns the position of v's delta in the index (At, Head), -1 when
// v has none.
func (x *DeltaIndex) Rank(v uint32) int {
	w := int(v >> 6)
	if w >= len(x.bits) || x.bits[w]>>(v&63)&1 == 0 {
		return -1
	}
	return int(x.rank[w]) + bits.OnesCount64(x.bits[w]&(1<<(v&63)-1))
}

// Lookup is Rank without a branch on whether v has a delta: has is 1 when
// it does, 0 when not, and k is v's position in the index when it does
// (otherwise the position the next vertex with a delta has, or Len).
// v must be below the index's vertex count.
func (x *DeltaIndex) Lookup(v uint32) (has uint64, k int) {
	w := v >> 6
	word := x.bits[w]
	return word >> (v & 63) & 1, int(x.rank[w]) + bits.OnesCount64(word&(1<<(v&63)-1))
}

// At is the delta at position k (Rank).
func (x *DeltaIndex) At(k int) *DeltaVertex { return x.dvs[k] }

// Head is the head of the delta at position k (Rank).
func (x *DeltaIndex) Head(k int) *DeltaHead { return &x.heads[k] }

// Bytes is the index's memory: the bitmap and ranks, and per vertex with a
// delta its DeltaVertex pointer and DeltaHead.
func (x *DeltaIndex) Bytes() int64 {
	return int64(len(x.bits))*8 + int64(len(x.rank))*4 +
		int64(len(x.dvs))*int64(unsafe.Sizeof((*DeltaVertex)(nil))) + int64(len(x.heads))*int64(unsafe.Sizeof(DeltaHead{}))
}

// Len counts the vertices with a delta.
func (x *DeltaIndex) Len() int { return len(x.dvs) }

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
		switch a.ResolvedStepper() {
		case StepperUniform, StepperAlias:
			return nil
		}
		return invalid("the %s sampler does not read a live graph's delta yet (uniform and alias do)", a.ResolvedStepper())
	case Node2Vec:
		if a.ResolvedStepper() == StepperRejection {
			return nil
		}
		return invalid("the %s sampler does not read a live graph's delta yet (node2vec's rejection sampler does)", a.ResolvedStepper())
	}
	return invalid("%s walks do not read a live graph's delta yet (deepwalk, ppr and node2vec do); walk the compacted graph", a.Kind)
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
