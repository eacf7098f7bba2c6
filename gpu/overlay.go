package gpu

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
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

// deltaLayout is a snapshot's delta flattened for the device: the index's
// bitmap and ranks as they are, a head per vertex with a delta, and every
// such vertex's appended edges and tombstones one after the other, in rank
// order. Its slices are reused from one snapshot to the next.
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

// layoutShare is the fewest vertices with a delta a goroutine copies: the
// copy reads each vertex's edges where the live graph put them (scattered
// over the heap), so on a large snapshot all cores share it.
const layoutShare = 1 << 14

// layoutDelta flattens x into l. The positions are 32-bit (8 bytes an
// appended edge, 32 GiB of them), which a delta reaches long after it
// should have been compacted.
func layoutDelta(x *walk.DeltaIndex, l *deltaLayout) error {
	bits, rank := x.Words()
	l.bits, l.rank = bits, rank
	n := x.Len()
	l.heads = grow(l.heads, n)
	var ne, nd uint64
	for k := range n {
		h := x.Head(k)
		l.heads[k] = deltaHead{baseWeight: h.BaseWeight, edges: uint32(ne), n: h.N, dead: uint32(nd), nd: h.NDead, maxWeight: h.MaxWeight}
		if h.Live {
			l.heads[k].live = 1
		}
		ne += uint64(h.N)
		nd += uint64(h.NDead)
		if ne > math.MaxUint32 || nd > math.MaxUint32 {
			return fmt.Errorf("gpu: the live graph's delta holds more than %d appended edges or tombstones; compact it (WALKSTAGE_EDGE_COMPACT_RATIO)", uint64(math.MaxUint32))
		}
	}
	l.edges = grow(l.edges, int(ne))
	l.dead = grow(l.dead, int(nd))
	shares := min(runtime.GOMAXPROCS(0), (n+layoutShare-1)/layoutShare)
	copyShare := func(lo, hi int) {
		for k := lo; k < hi; k++ {
			h, d := x.Head(k), &l.heads[k]
			if h.N > 0 {
				copy(l.edges[d.edges:d.edges+h.N], unsafe.Slice(h.First, h.N))
			}
			if h.NDead > 0 {
				copy(l.dead[d.dead:d.dead+h.NDead], unsafe.Slice(h.Dead, h.NDead))
			}
		}
	}
	if shares <= 1 {
		copyShare(0, n)
		return nil
	}
	var wg sync.WaitGroup
	for i := range shares {
		wg.Go(func() { copyShare(i*n/shares, (i+1)*n/shares) })
	}
	wg.Wait()
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
