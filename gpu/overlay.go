package gpu

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// A job on a live graph's snapshot (walk.Job.Overlay) walks the engine's
// resident base CSR plus the snapshot's delta, which the engine copies to
// the device in the layout below when a run names a snapshot other than
// the one it holds (overlay_cuda.go). The kernels (kernels/overlay.cuh)
// take the CPU engine's steps on it, draw for draw.

// deltaHead mirrors ws::DeltaHead (kernels/overlay.cuh): one vertex's
// delta in 32 bytes, its edges and tombstones by position in the
// snapshot's flat arrays.
type deltaHead struct {
	baseWeight float64
	edges, n   uint32
	dead, nd   uint32
	maxWeight  float32
	live       uint32
}

// deltaParams mirrors ws::DeltaParams: the device pointers of a snapshot's
// delta and its sizes.
type deltaParams struct {
	bits, rank, heads, edges, dead uint64
	baseVertices, words            uint64
}

const (
	deltaHeadSize   = 32
	deltaParamsSize = 56
)

var (
	_ [deltaHeadSize - unsafe.Sizeof(deltaHead{})]byte
	_ [unsafe.Sizeof(deltaHead{}) - deltaHeadSize]byte
	_ [deltaParamsSize - unsafe.Sizeof(deltaParams{})]byte
	_ [unsafe.Sizeof(deltaParams{}) - deltaParamsSize]byte
	_ [8 - unsafe.Sizeof(walk.DeltaEdge{})]byte
	_ [8 - unsafe.Sizeof(walk.Tombstone{})]byte
)

// deltaLayout is a snapshot's delta flattened for the device: a bitmap of
// the vertices with a delta and, per 64 vertices, how many are marked
// before them; a head per vertex with a delta, in vertex order; and every
// such vertex's appended edges and tombstones one after the other, in the
// same order. Its slices are reused from one snapshot to the next.
type deltaLayout struct {
	bits  []uint64
	rank  []uint32
	heads []deltaHead
	edges []walk.DeltaEdge
	dead  []walk.Tombstone
}

// bytes is what the layout copies to the device.
func (l *deltaLayout) bytes() int64 {
	return int64(len(l.bits))*8 + int64(len(l.rank))*4 + int64(len(l.heads))*deltaHeadSize +
		int64(len(l.edges))*8 + int64(len(l.dead))*8
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
// vertices, edges and tombstones per span; their prefix sums; the heads,
// ranks and copies. The positions are 32-bit (8 bytes an appended edge,
// 32 GiB of them), which a delta reaches long after it should have been
// compacted.
func layoutDelta(x *walk.DeltaIndex, nv int, l *deltaLayout) error {
	words := (nv + 63) / 64
	spans := (words + layoutWords - 1) / layoutWords
	l.bits, l.rank = grow(l.bits, words), grow(l.rank, words)
	type count struct{ vertices, edges, dead uint64 }
	counts := make([]count, spans+1)
	spanWords := func(i int) (lo, hi int) { return i * layoutWords, min(words, (i+1)*layoutWords) }
	parallelDo(spans, func(i int) {
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
				c.edges += uint64(h.N)
				c.dead += uint64(h.NDead)
			}
			l.bits[w] = m
		}
		counts[i+1] = c
	})
	for i := range spans {
		counts[i+1].vertices += counts[i].vertices
		counts[i+1].edges += counts[i].edges
		counts[i+1].dead += counts[i].dead
	}
	total := counts[spans]
	if total.edges > math.MaxUint32 || total.dead > math.MaxUint32 {
		return fmt.Errorf("gpu: the live graph's delta holds %d appended edges and %d tombstones, more than the %d the device layout addresses; compact it (WALKSTAGE_EDGE_COMPACT_RATIO)",
			total.edges, total.dead, uint64(math.MaxUint32))
	}
	if int(total.vertices) != x.Len() {
		return fmt.Errorf("gpu: the live graph's delta index lists %d vertices with a delta below vertex %d, and holds %d", total.vertices, nv, x.Len())
	}
	l.heads = grow(l.heads, int(total.vertices))
	l.edges = grow(l.edges, int(total.edges))
	l.dead = grow(l.dead, int(total.dead))
	parallelDo(spans, func(i int) {
		lo, hi := spanWords(i)
		c := counts[i]
		for w := lo; w < hi; w++ {
			l.rank[w] = uint32(c.vertices)
			for m := l.bits[w]; m != 0; m &= m - 1 {
				v := uint32(w*64 + bits.TrailingZeros64(m))
				h := x.Head(x.Rank(v))
				d := deltaHead{baseWeight: h.BaseWeight, edges: uint32(c.edges), n: h.N, dead: uint32(c.dead), nd: h.NDead, maxWeight: h.MaxWeight}
				if h.Live {
					d.live = 1
				}
				l.heads[c.vertices] = d
				if h.N > 0 {
					copy(l.edges[c.edges:c.edges+uint64(h.N)], unsafe.Slice(h.First, h.N))
				}
				if h.NDead > 0 {
					copy(l.dead[c.dead:c.dead+uint64(h.NDead)], unsafe.Slice(h.Dead, h.NDead))
				}
				c.vertices++
				c.edges += uint64(h.N)
				c.dead += uint64(h.NDead)
			}
		}
	})
	return nil
}

// parallelDo runs f(0..n-1) on up to GOMAXPROCS goroutines.
func parallelDo(n int, f func(i int)) {
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
