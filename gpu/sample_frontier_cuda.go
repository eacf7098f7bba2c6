//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graphsample"
)

// The frontier walk on the device (kernels/sample_frontier.cuh): one launch,
// a warp an instance, its frontier's slots in the warp's slice of scratch
// and their degree sums by range in the lanes' registers; only the sampled
// edges come back. The samples equal graphsample.Sample's: every decision is integer
// arithmetic or, weighted, the binary search over graphsample.WeightCDF that
// neighbour sampling shares.

// frontierScratchBudget bounds the warps' slots (8 bytes a slot) of one
// launch; the launch runs fewer warps when frontiers are large.
const frontierScratchBudget = 1 << 30

// SampleFrontier runs graphsample.FrontierWalk (constant or edge-weight bias) for
// starts as graphsample.Sample does.
func (e *Engine) SampleFrontier(ctx context.Context, p graphsample.SampleParams, starts []uint32) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.SampleFrontierRange(ctx, p, starts, 0, -1)
}

// SampleFrontierRange is SampleFrontier for instances first ..
// first+count-1 only (count -1: to the last), as graphsample.SampleRange.
func (e *Engine) SampleFrontierRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.sampleLocked(graphsample.FrontierWalk, p, starts, first, count, func(count int) ([][]graphsample.SampledEdge, SampleStats, error) {
		t0 := time.Now()
		n := count
		out := make([][]graphsample.SampledEdge, n)
		st := SampleStats{SampleStats: graphsample.SampleStats{Instances: int64(n)}}
		if n == 0 {
			return out, st, nil
		}
		fsize, steps := p.FrontierSize, p.Samples
		edges := int64(n) * int64(steps)
		oEdge := make([]uint64, edges)
		oSrc := make([]uint32, edges)
		oDst := make([]uint32, edges)
		counts := make([]uint32, n)
		err := e.dev.do(func() (err error) {
			fn, err := e.mod.Function("sample_frontier")
			if err != nil {
				return fmt.Errorf("gpu: kernel sample_frontier: %w", err)
			}
			// As many warps as the multiprocessors hold at once (each loops
			// over instances), fewer when their slots would pass the budget.
			occ, err := fn.MaxActiveBlocksPerMultiProcessor(sampleThreads, 0)
			if err != nil {
				return fmt.Errorf("gpu: occupancy of sample_frontier: %w", err)
			}
			const warpsPerBlock = sampleThreads / 32
			warps := min(n, e.numSM*max(occ, 1)*warpsPerBlock, int(max(1, frontierScratchBudget/(int64(fsize)*8))))
			grid := (warps + warpsPerBlock - 1) / warpsPerBlock
			var dCum, dStarts, dSlots, dEdge, dSrc, dDst, dCount cu.DevicePtr
			defer func() {
				for name, q := range map[string]*cu.DevicePtr{"sample.starts": &dStarts, "sample.slots": &dSlots,
					"sample.edge": &dEdge, "sample.src": &dSrc, "sample.dst": &dDst, "sample.count": &dCount} {
					e.free(name, q)
				}
			}()
			if p.Weighted() {
				if dCum, err = e.sampleCDF(); err != nil {
					return err
				}
			}
			dSegs, nSegs, err := e.segmentTable("sample.segs", p)
			defer e.free("sample.segs", &dSegs)
			if err != nil {
				return err
			}
			if dStarts, err = upload(e, "sample.starts", starts); err != nil {
				return err
			}
			for _, a := range []struct {
				name string
				q    *cu.DevicePtr
				n    int64
			}{{"sample.slots", &dSlots, int64(grid*warpsPerBlock) * int64(fsize) * 8}, {"sample.edge", &dEdge, edges * 8}, {"sample.src", &dSrc, edges * 4}, {"sample.dst", &dDst, edges * 4},
				{"sample.count", &dCount, int64(n) * 4}} {
				if *a.q, err = e.alloc(a.name, a.n); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			tk := time.Now()
			if err := launch(fn, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets), uint64(dCum),
				p.Seed, uint64(dStarts), uint64(fsize), uint64(p.InstancesPerSeed), uint64(first), uint64(n), uint64(steps),
				uint64(dSlots), uint64(dEdge), uint64(dSrc), uint64(dDst), uint64(dCount), uint64(dSegs), nSegs}); err != nil {
				return fmt.Errorf("gpu: launch sample_frontier: %w", err)
			}
			if err := cu.Synchronize(); err != nil {
				return fmt.Errorf("gpu: sample_frontier: %w", err)
			}
			st.Kernel = time.Since(tk)
			for _, c := range []struct {
				dst unsafe.Pointer
				src cu.DevicePtr
				n   int64
			}{{unsafe.Pointer(&oEdge[0]), dEdge, edges * 8}, {unsafe.Pointer(&oSrc[0]), dSrc, edges * 4},
				{unsafe.Pointer(&oDst[0]), dDst, edges * 4}, {unsafe.Pointer(&counts[0]), dCount, int64(n) * 4}} {
				if err := cu.MemcpyDtoH(c.dst, c.src, c.n); err != nil {
					return fmt.Errorf("gpu: copy frontier samples: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, SampleStats{}, err
		}
		st.Edges = frontierEdges(out, steps, oEdge, oSrc, oDst, counts)
		st.Wall = time.Since(t0)
		return out, st, nil
	})
}

// frontierEdges turns the kernel's rows into out, on every core, and
// returns the edges. Every instance gets a slice, empty when its seeds have
// no edges, as graphsample.Sample's frontier walk (unlike the other samplers,
// whose empty instances are nil).
func frontierEdges(out [][]graphsample.SampledEdge, steps int, oEdge []uint64, oSrc, oDst, counts []uint32) int64 {
	return sumRanges(len(out), func(lo, hi int) int64 {
		var n int64
		for t := lo; t < hi; t++ {
			es := make([]graphsample.SampledEdge, counts[t])
			for j := range es {
				at := t*steps + j
				es[j] = graphsample.SampledEdge{Hop: int32(j), Src: oSrc[at], Dst: oDst[at], Edge: oEdge[at]}
			}
			out[t] = es
			n += int64(len(es))
		}
		return n
	})
}
