package gpu

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// A job on a live graph's snapshot (walk.Job.Overlay) walks the engine's
// resident base CSR plus the snapshot's delta, which the engine copies to
// the device in the layout below when a run names a snapshot other than
// the one it holds (overlay_cuda.go). The kernels (kernels/overlay.cuh)
// take the CPU engine's steps on it, draw for draw.

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

// deltaWord mirrors ws::DeltaWord: 64 vertices' marks and the vertices
// marked in the words before them.
type deltaWord struct {
	bits uint64
	rank uint32
	_    uint32
}

// deltaItem is an appended edge (walk.DeltaEdge: target, weight bits) or a
// tombstone (walk.Tombstone: target, upto), 8 bytes either way.
type deltaItem struct{ a, b uint32 }

const (
	deltaHeadSize = 32
	liveBit       = 1 << 31
)

var (
	_ [deltaHeadSize - unsafe.Sizeof(deltaHead{})]byte
	_ [unsafe.Sizeof(deltaHead{}) - deltaHeadSize]byte
	_ [16 - unsafe.Sizeof(deltaWord{})]byte
	_ [unsafe.Sizeof(deltaWord{}) - 16]byte
	_ [unsafe.Sizeof(walk.DeltaEdge{}) - unsafe.Sizeof(deltaItem{})]byte
	_ [unsafe.Sizeof(walk.Tombstone{}) - unsafe.Sizeof(deltaItem{})]byte
)

// deadBit is the filter bit of tombstones of target t (ws::dead_bit, the
// CPU walkers' walk.DeadBit): its top six bits after a multiplicative
// hash, so that the low ids R-MAT edges crowd to spread.
func deadBit(t uint32) uint64 { return 1 << (uint64(t) * 0x9e3779b97f4a7c15 >> 58) }

// deltaLayout is a snapshot's delta flattened for the device: per 64
// vertices the marks of those with a delta and how many are marked before;
// a head per vertex with a delta, in vertex order; and per such vertex its
// appended edges then its tombstones, one vertex after the other, in the
// same order. Its slices are reused from one snapshot to the next.
type deltaLayout struct {
	words []deltaWord
	heads []deltaHead
	items []deltaItem
}

// bytes is what the layout copies to the device.
func (l *deltaLayout) bytes() int64 {
	return int64(len(l.words))*16 + int64(len(l.heads))*deltaHeadSize + int64(len(l.items))*8
}

// layoutWords is how many bitmap words (64 vertices each) a goroutine of
// layoutDelta takes at a time: the copy reads each vertex's edges where
// the live graph put them (scattered over the heap), so on a large
// snapshot all cores share it.
const layoutWords = 1 << 10

// layoutDelta flattens the delta index x of a snapshot of nv vertices into
// l, through the index's lookups only (Has, Rank, Head), so it does not
// depend on how the index keeps them. Three passes over spans of
// layoutWords words, each on all cores: the marks and the counts of
// vertices and items per span; their prefix sums; the heads, ranks and
// copies. The positions are 32-bit (8 bytes an item, 32 GiB of them),
// which a delta reaches long after it should have been compacted.
func layoutDelta(x *walk.DeltaIndex, nv int, l *deltaLayout) error {
	words := (nv + 63) / 64
	spans := (words + layoutWords - 1) / layoutWords
	l.words = grow(l.words, words)
	type count struct{ vertices, items uint64 }
	counts := make([]count, spans+1)
	spanWords := func(i int) (lo, hi int) { return i * layoutWords, min(words, (i+1)*layoutWords) }
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i)
		var c count
		for w := lo; w < hi; w++ {
			var m uint64
			for b := range min(64, nv-w*64) {
				v := uint32(w*64 + b)
				if !x.Has(v) {
					continue
				}
				m |= 1 << b
				h := x.Head(x.Rank(v))
				c.vertices++
				c.items += uint64(h.N) + uint64(h.NDead)
			}
			l.words[w] = deltaWord{bits: m}
		}
		counts[i+1] = c
	})
	for i := range spans {
		counts[i+1].vertices += counts[i].vertices
		counts[i+1].items += counts[i].items
	}
	total := counts[spans]
	if total.items > math.MaxUint32 {
		return fmt.Errorf("gpu: the live graph's delta holds %d appended edges and tombstones, more than the %d the device layout addresses; compact it (WALKSTAGE_EDGE_COMPACT_RATIO)",
			total.items, uint64(math.MaxUint32))
	}
	if int(total.vertices) != x.Len() {
		return fmt.Errorf("gpu: the live graph's delta index lists %d vertices with a delta below vertex %d, and holds %d", total.vertices, nv, x.Len())
	}
	l.heads = grow(l.heads, int(total.vertices))
	l.items = grow(l.items, int(total.items))
	walk.ParallelSpans(spans, func(i int) {
		lo, hi := spanWords(i)
		c := counts[i]
		for w := lo; w < hi; w++ {
			l.words[w].rank = uint32(c.vertices)
			for m := l.words[w].bits; m != 0; m &= m - 1 {
				v := uint32(w*64 + bits.TrailingZeros64(m))
				h := x.Head(x.Rank(v))
				d := deltaHead{baseWeight: h.BaseWeight, pos: uint32(c.items), n: h.N, ndLive: h.NDead, maxWeight: h.MaxWeight}
				if h.Live {
					d.ndLive |= liveBit
				}
				if h.N > 0 {
					copy(l.items[c.items:c.items+uint64(h.N)], unsafe.Slice((*deltaItem)(unsafe.Pointer(h.First)), h.N))
					c.items += uint64(h.N)
				}
				if h.NDead > 0 {
					dead := unsafe.Slice(h.Dead, h.NDead)
					copy(l.items[c.items:c.items+uint64(h.NDead)], unsafe.Slice((*deltaItem)(unsafe.Pointer(h.Dead)), h.NDead))
					c.items += uint64(h.NDead)
					for _, ts := range dead {
						d.deadBits |= deadBit(ts.Target)
					}
				}
				l.heads[c.vertices] = d
				c.vertices++
			}
		}
	})
	return nil
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
