package graphsample

import (
	"context"
	"runtime"
	"sync"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Columns are the sampled edges of consecutive instances, column by column
// in instance order (each instance's edges as SampleRange returns them):
// the form a wave travels from an engine to the writer in. A slice of
// slices of SampledEdge (24 bytes an edge, one allocation an instance) cost
// a device sampler more host time than its kernels: the GPU builds these
// columns itself and the host copies them in a few large copies.
//
// A Columns is reused from wave to wave (Reset keeps its memory), so a
// caller that samples in waves touches fresh memory once.
type Columns struct {
	// Offsets has one entry per instance and one more: instance k's edges
	// are rows Offsets[k] .. Offsets[k+1]-1.
	Offsets  []int64
	Hop      []int32
	Src, Dst []uint32
	// Edge indexes g.Targets (the edge's weight, label). Filled only when
	// WithEdges is set (by the caller, before sampling): writing edge
	// weights needs it, the rows themselves do not.
	Edge      []uint64
	WithEdges bool
}

// Instances is the number of instances held.
func (c *Columns) Instances() int { return max(len(c.Offsets)-1, 0) }

// Len is the number of edges held.
func (c *Columns) Len() int64 {
	if len(c.Offsets) == 0 {
		return 0
	}
	return c.Offsets[len(c.Offsets)-1]
}

// Reset sizes c for instances instances and edges edges, reusing its
// memory where it can (the contents are not cleared). Edge is sized only
// when WithEdges.
func (c *Columns) Reset(instances int, edges int64) {
	c.Offsets = grow(c.Offsets, instances+1)
	c.Hop = grow(c.Hop, int(edges))
	c.Src = grow(c.Src, int(edges))
	c.Dst = grow(c.Dst, int(edges))
	if c.WithEdges {
		c.Edge = grow(c.Edge, int(edges))
	} else {
		c.Edge = c.Edge[:0]
	}
}

// grow returns s with length n, reusing its memory when it can; new memory
// has a quarter to spare, so waves a little larger than the last fit:
// `walkstage walk`'s second wave is a fifth larger than its first
// (message.SampleWave grows a wave to the mean it measured), and with an
// eighth to spare the set that took the first wave grew at its second,
// into fresh memory that the GPU engine page-locks again (gpu/hostreg.go).
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// Instance returns instance k's edges as SampledEdge (nil when it has none,
// as SampleRange; Edge zero unless WithEdges): for tests and small callers.
func (c *Columns) Instance(k int) []SampledEdge {
	lo, hi := c.Offsets[k], c.Offsets[k+1]
	if lo == hi {
		return nil
	}
	out := make([]SampledEdge, hi-lo)
	for r := lo; r < hi; r++ {
		e := SampledEdge{Hop: c.Hop[r], Src: c.Src[r], Dst: c.Dst[r]}
		if c.WithEdges {
			e.Edge = c.Edge[r]
		}
		out[r-lo] = e
	}
	return out
}

// Edges returns every instance's edges (Instance, for each).
func (c *Columns) Edges() [][]SampledEdge {
	out := make([][]SampledEdge, c.Instances())
	for k := range out {
		out[k] = c.Instance(k)
	}
	return out
}

// SetEdges fills c from per-instance edges (SampleRange's result), on up
// to workers goroutines (0: GOMAXPROCS).
func (c *Columns) SetEdges(edges [][]SampledEdge, workers int) {
	n := len(edges)
	off := grow(c.Offsets, n+1)
	off[0] = 0
	for k, es := range edges {
		off[k+1] = off[k] + int64(len(es))
	}
	c.Offsets = off
	c.Reset(n, off[n])
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := max(1, min(workers, int(off[n]>>16)))
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			for k := lo; k < hi; k++ {
				r := off[k]
				for _, e := range edges[k] {
					c.Hop[r], c.Src[r], c.Dst[r] = e.Hop, e.Src, e.Dst
					if c.WithEdges {
						c.Edge[r] = e.Edge
					}
					r++
				}
			}
		}(n*p/parts, n*(p+1)/parts)
	}
	wg.Wait()
}

// ColumnSampler is a DeviceSampler that hands its samples over as Columns
// (the GPU engine builds them on its device); SampleColumnsOn prefers it.
type ColumnSampler interface {
	DeviceSampler
	// SampleColumnsOnDevice is SampleRangeOnDevice into into (Reset by
	// the call; into.WithEdges says whether to fill Edge).
	SampleColumnsOnDevice(ctx context.Context, p SampleParams, starts []uint32, first, count int, into *Columns) (SampleStats, error)
}

// SampleColumnsOn is SampleRangeOn with the edges in into (Reset by the
// call, its memory reused): on e's device when e takes p, as columns the
// device built when e is a ColumnSampler; else on the CPU with workers
// goroutines (0: GOMAXPROCS). The edges are SampleRange's, edge for edge.
func SampleColumnsOn(ctx context.Context, e walk.Engine, g *graph.Graph, p SampleParams, starts []uint32, first, count, workers int, into *Columns) (SampleStats, error) {
	count, err := checkSampleRange(g, p, starts, first, count)
	if err != nil {
		return SampleStats{}, err
	}
	var edges [][]SampledEdge
	var st SampleStats
	if ds, ok := deviceSampler(e, p); ok {
		if cs, ok := ds.(ColumnSampler); ok {
			return cs.SampleColumnsOnDevice(ctx, p, starts, first, count, into)
		}
		edges, st, err = ds.SampleRangeOnDevice(ctx, p, starts, first, count)
	} else {
		edges, st, err = sampleRange(ctx, g, p, starts, first, count, workers)
	}
	if err != nil {
		return SampleStats{}, err
	}
	into.SetEdges(edges, workers)
	return st, nil
}
