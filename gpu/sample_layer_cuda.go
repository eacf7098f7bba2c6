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

// Layer sampling on the device (kernels/sample_layer.cuh): one launch runs
// every hop of every instance, a warp an instance, with each warp's
// frontiers, picks and keys in its own slice of one scratch allocation; only
// the sampled edges come back. The samples equal graphsample.Sample's (unweighted
// exactly; weighted up to the last ulp of a logarithm, which only the
// reservoir keys take).

// layerScratchBudget bounds the warps' scratch of one launch; the launch
// runs fewer warps when a warp's share (about 48 bytes a unit of the
// largest layer size) would exceed it.
const layerScratchBudget = 1 << 30

// SampleLayer runs graphsample.LayerSampling (constant or edge-weight bias) for
// starts as graphsample.Sample does.
func (e *Engine) SampleLayer(ctx context.Context, p graphsample.SampleParams, starts []uint32) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.SampleLayerRange(ctx, p, starts, 0, -1)
}

// SampleLayerRange is SampleLayer for instances first .. first+count-1
// only (count -1: to the last), as graphsample.SampleRange.
func (e *Engine) SampleLayerRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.sampleLocked(graphsample.LayerSampling, p, starts, first, count, func(count int) ([][]graphsample.SampledEdge, SampleStats, error) {
		t0 := time.Now()
		n := count
		out := make([][]graphsample.SampledEdge, n)
		var st SampleStats
		st.Instances = int64(n)
		if n == 0 {
			return out, st, nil
		}
		hops := len(p.LayerSizes)
		sizes := make([]uint32, hops)
		kmax, stride := 0, 0
		for h, k := range p.LayerSizes {
			sizes[h] = uint32(k)
			kmax, stride = max(kmax, k), stride+k
		}
		fmax, keycap := kmax, 4*kmax+4
		perWarp := (int64(fmax)*(8+8+4+4) + int64(kmax)*8 + int64(keycap)*8 + 127) &^ 127
		const warpsPerBlock = sampleThreads / 32
		edges := int64(n) * int64(stride)
		oEdge := make([]uint64, edges)
		oSrc := make([]uint32, edges)
		oDst := make([]uint32, edges)
		hopEnd := make([]uint32, n*hops)
		err := e.dev.do(func() (err error) {
			fn, err := e.mod.Function("sample_layer")
			if err != nil {
				return fmt.Errorf("gpu: kernel sample_layer: %w", err)
			}
			// As many warps as the multiprocessors hold at once (each loops
			// over instances), fewer when their scratch would pass the budget.
			occ, err := fn.MaxActiveBlocksPerMultiProcessor(sampleThreads, 0)
			if err != nil {
				return fmt.Errorf("gpu: occupancy of sample_layer: %w", err)
			}
			warps := min(n, e.numSM*max(occ, 1)*warpsPerBlock, int(max(1, layerScratchBudget/perWarp)))
			grid := (warps + warpsPerBlock - 1) / warpsPerBlock
			var dCum, dSizes, dStarts, dScratch, dEdge, dSrc, dDst, dHopEnd cu.DevicePtr
			defer func() {
				for name, q := range map[string]*cu.DevicePtr{"sample.sizes": &dSizes, "sample.starts": &dStarts,
					"sample.scratch": &dScratch, "sample.edge": &dEdge, "sample.src": &dSrc, "sample.dst": &dDst, "sample.hop_end": &dHopEnd} {
					e.free(name, q)
				}
			}()
			var dWeights uint64
			if p.Weighted() {
				if dCum, err = e.sampleCDF(); err != nil {
					return err
				}
				dWeights = uint64(e.dWeights)
			}
			if dSizes, err = upload(e, "sample.sizes", sizes); err != nil {
				return err
			}
			if dStarts, err = upload(e, "sample.starts", starts); err != nil {
				return err
			}
			for _, a := range []struct {
				name string
				q    *cu.DevicePtr
				n    int64
			}{{"sample.scratch", &dScratch, int64(grid*warpsPerBlock) * perWarp}, {"sample.edge", &dEdge, edges * 8},
				{"sample.src", &dSrc, edges * 4}, {"sample.dst", &dDst, edges * 4}, {"sample.hop_end", &dHopEnd, int64(n*hops) * 4}} {
				if *a.q, err = e.alloc(a.name, a.n); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			tk := time.Now()
			if err := launch(fn, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets), dWeights,
				uint64(dCum), p.Seed, uint64(dSizes), uint64(hops), uint64(dStarts), uint64(p.InstancesPerSeed), uint64(first),
				uint64(n), uint64(fmax), uint64(kmax), uint64(keycap), uint64(dScratch), uint64(perWarp), uint64(stride),
				uint64(dEdge), uint64(dSrc), uint64(dDst), uint64(dHopEnd)}); err != nil {
				return fmt.Errorf("gpu: launch sample_layer: %w", err)
			}
			if err := cu.Synchronize(); err != nil {
				return fmt.Errorf("gpu: sample_layer: %w", err)
			}
			st.Kernel = time.Since(tk)
			for _, c := range []struct {
				dst unsafe.Pointer
				src cu.DevicePtr
				n   int64
			}{{unsafe.Pointer(&oEdge[0]), dEdge, edges * 8}, {unsafe.Pointer(&oSrc[0]), dSrc, edges * 4},
				{unsafe.Pointer(&oDst[0]), dDst, edges * 4}, {unsafe.Pointer(&hopEnd[0]), dHopEnd, int64(n*hops) * 4}} {
				if err := cu.MemcpyDtoH(c.dst, c.src, c.n); err != nil {
					return fmt.Errorf("gpu: copy layer samples: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, SampleStats{}, err
		}
		st.Edges = layerEdges(out, hops, stride, oEdge, oSrc, oDst, hopEnd)
		st.Wall = time.Since(t0)
		return out, st, nil
	})
}

// layerEdges turns the kernel's per-instance rows into out (an instance
// without edges keeps a nil slice, as graphsample.Sample's), on every core, and
// returns the edges.
func layerEdges(out [][]graphsample.SampledEdge, hops, stride int, oEdge []uint64, oSrc, oDst, hopEnd []uint32) int64 {
	return sumRanges(len(out), func(lo, hi int) int64 {
		var n int64
		for t := lo; t < hi; t++ {
			ends := hopEnd[t*hops : (t+1)*hops]
			cnt := int(ends[hops-1])
			if cnt == 0 {
				continue
			}
			es := make([]graphsample.SampledEdge, cnt)
			h := 0
			for j := range es {
				for int(ends[h]) <= j {
					h++
				}
				at := t*stride + j
				es[j] = graphsample.SampledEdge{Hop: int32(h), Src: oSrc[at], Dst: oDst[at], Edge: oEdge[at]}
			}
			out[t] = es
			n += int64(cnt)
		}
		return n
	})
}
