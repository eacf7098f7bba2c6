package gpu

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/walk"
)

// Temporal walks on a live graph's snapshot (issues 37 and 38) draw, at a
// vertex with a delta, over its live edges in (time, target) order
// (walk.AppendTimed), as the CPU engine does (walk/cpu/overlaytemporal.go).
// The CPU engine gathers a vertex's list at the first step there and keeps
// it for the job; the GPU engine gathers every delta vertex's list on the
// host when a temporal job first walks the snapshot, in parallel, lays them
// out as the base's time order is laid out (times, targets, weights, and
// each position's place in its list where the base has ByTime), and keeps
// them on the device while the snapshot stays current
// (overlaytemporal_cuda.go): the lists' prefix sums and exponential cell
// sums are then built by the base's kernels, and the walk kernel
// (kernels/overlaytemporal.cuh) draws on them with the base's searches.
// The cost is a copy of every delta vertex's base edges: with deltas spread
// over most vertices, close to the base's time order in bytes
// (docs/benchmarks/live-graph.md measures it).

// timedLists is a snapshot's delta vertices' timed lists, host side.
type timedLists struct {
	// index[v] is 1 + v's list number, 0 when v has no delta: one entry
	// per vertex of the snapshot.
	index []uint32
	// List j is positions [off[j], off[j+1]) of the arrays below.
	off     []uint64
	times   []int64
	targets []uint32
	weights []float32 // weighted lists only
	// byTime is each position's place in its list: what the base's
	// table kernels read as a time-order position's local edge index.
	byTime []uint32
}

// edges is the lists' total length.
func (l *timedLists) edges() int64 { return int64(len(l.times)) }

// bytes is what the lists take on the device besides the per-walk tables
// the kernels build from them (a float64 an edge for each kind).
func (l *timedLists) bytes() int64 {
	return int64(len(l.index))*4 + int64(len(l.off))*8 + l.edges()*(8+4+4) + int64(len(l.weights))*4 +
		(l.edges()+coarseSpacing-1)/coarseSpacing*8
}

// buildTimedLists gathers the timed list of every vertex of idx (ov's
// delta index) over base, with weights when weighted, on every core.
// Each list's length is its vertex's live count (walk.DeltaVertex.Live);
// a list that gathers another length is an error (a delta whose count
// does not match its edges).
func buildTimedLists(ov walk.TimedOverlay, idx *walk.DeltaIndex, base walk.TimedBase, weighted bool) (*timedLists, error) {
	nv := ov.NumVertices()
	l := &timedLists{index: make([]uint32, nv)}
	verts := make([]uint32, 0, idx.Len())
	for w := 0; w < (nv+63)/64; w++ {
		for m := idx.Marks(w); m != 0; m &= m - 1 {
			v := uint32(w*64 + bits.TrailingZeros64(m))
			if int(v) < nv {
				verts = append(verts, v)
			}
		}
	}
	l.off = make([]uint64, len(verts)+1)
	dvs := make([]*walk.DeltaVertex, len(verts))
	for j, v := range verts {
		dvs[j] = idx.Vertex(v)
		l.index[v] = uint32(j + 1)
		l.off[j+1] = l.off[j] + uint64(dvs[j].Live)
	}
	E := l.off[len(verts)]
	l.times, l.targets, l.byTime = make([]int64, E), make([]uint32, E), make([]uint32, E)
	if weighted {
		l.weights = make([]float32, E)
	}
	const chunk = 256
	var next atomic.Int64
	var bad atomic.Int64
	bad.Store(-1)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []walk.TimedEdge
			for {
				j0 := int(next.Add(chunk)) - chunk
				if j0 >= len(verts) || bad.Load() >= 0 {
					return
				}
				for j := j0; j < min(j0+chunk, len(verts)); j++ {
					v := verts[j]
					buf = walk.AppendTimed(buf[:0], base, v, dvs[j], ov.DeltaTimes(v), weighted)
					a := l.off[j]
					if uint64(len(buf)) != l.off[j+1]-a {
						bad.CompareAndSwap(-1, int64(j))
						return
					}
					for i, e := range buf {
						k := a + uint64(i)
						l.times[k], l.targets[k], l.byTime[k] = e.T, e.X, uint32(i)
						if weighted {
							l.weights[k] = e.W
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if j := bad.Load(); j >= 0 {
		v := verts[j]
		return nil, fmt.Errorf("gpu: live graph delta: vertex %d has %d live edges by its count but %d gathered", v, dvs[j].Live,
			len(walk.AppendTimed(nil, base, v, dvs[j], ov.DeltaTimes(v), weighted)))
	}
	return l, nil
}
