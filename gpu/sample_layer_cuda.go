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
// only (count -1: to the last), as graphsample.SampleRange:
// SampleLayerColumns, laid out per instance (with edge indices).
func (e *Engine) SampleLayerRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	c := graphsample.Columns{WithEdges: true}
	st, err := e.SampleLayerColumns(ctx, p, starts, first, count, &c)
	if err != nil {
		return nil, SampleStats{}, err
	}
	return c.Edges(), st, nil
}

// SampleLayerColumns runs layer sampling for instances first ..
// first+count-1 (count -1: to the last) as graphsample.SampleRange into
// into (Reset by the call; Edge filled when into.WithEdges). The kernel
// writes each instance's edges in a row of sum(LayerSizes) slots; the
// device packs the used slots into columns (sample_rows_to_columns), so
// only the sampled edges come back, through the pinned staging buffers.
func (e *Engine) SampleLayerColumns(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int, into *graphsample.Columns) (SampleStats, error) {
	var st SampleStats
	_, _, err := e.sampleLocked(graphsample.LayerSampling, p, starts, first, count, func(count int) ([][]graphsample.SampledEdge, SampleStats, error) {
		t0 := time.Now()
		n := count
		st.Instances = int64(n)
		if n == 0 {
			into.Reset(0, 0)
			into.Offsets[0] = 0
			return nil, st, nil
		}
		withEdges := into.WithEdges
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
		tq := time.Now()
		var queued time.Duration
		e.staging.times = stagedTimes{}
		err := e.dev.do(func() (err error) {
			queued = time.Since(tq)
			fn, err := e.mod.Function("sample_layer")
			if err != nil {
				return fmt.Errorf("gpu: kernel sample_layer: %w", err)
			}
			ks, err := e.columnKernels()
			if err != nil {
				return err
			}
			// As many warps as the multiprocessors hold at once (each loops
			// over instances), fewer when their scratch would pass the budget.
			occ, err := fn.MaxActiveBlocksPerMultiProcessor(sampleThreads, 0)
			if err != nil {
				return fmt.Errorf("gpu: occupancy of sample_layer: %w", err)
			}
			warps := min(n, e.numSM*max(occ, 1)*warpsPerBlock, int(max(1, layerScratchBudget/perWarp)))
			grid := (warps + warpsPerBlock - 1) / warpsPerBlock
			d := &devArrays{e: e}
			defer d.freeAll()
			var dCum cu.DevicePtr
			var dWeights uint64
			if p.Weighted() {
				if dCum, err = e.sampleCDF(); err != nil {
					return err
				}
				dWeights = uint64(e.dWeights)
			}
			dSizes, err := d.get("sample.sizes", int64(hops)*4)
			if err != nil {
				return err
			}
			if err := e.copyHtoD(dSizes, unsafe.Pointer(&sizes[0]), int64(hops)*4); err != nil {
				return fmt.Errorf("gpu: copy sample.sizes: %w", err)
			}
			dSegs, nSegs, err := e.segmentTable("sample.segs", p)
			defer e.free("sample.segs", &dSegs)
			if err != nil {
				return err
			}
			dStarts, err := d.get("sample.starts", int64(len(starts))*4)
			if err != nil {
				return err
			}
			if err := e.copyHtoD(dStarts, unsafe.Pointer(&starts[0]), int64(len(starts))*4); err != nil {
				return fmt.Errorf("gpu: copy sample.starts: %w", err)
			}
			var dScratch, dEdge, dSrc, dDst, dHopEnd cu.DevicePtr
			for _, a := range []struct {
				name string
				q    *cu.DevicePtr
				n    int64
			}{{"sample.scratch", &dScratch, int64(grid*warpsPerBlock) * perWarp}, {"sample.edge", &dEdge, edges * 8},
				{"sample.src", &dSrc, edges * 4}, {"sample.dst", &dDst, edges * 4}, {"sample.hop_end", &dHopEnd, int64(n*hops) * 4}} {
				if *a.q, err = d.get(a.name, a.n); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			tk := time.Now()
			st.Setup = tk.Sub(t0)
			if err := launch(fn, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets), dWeights,
				uint64(dCum), p.Seed, uint64(dSizes), uint64(hops), uint64(dStarts), uint64(p.InstancesPerSeed), uint64(first),
				uint64(n), uint64(fmax), uint64(kmax), uint64(keycap), uint64(dScratch), uint64(perWarp), uint64(stride),
				uint64(dEdge), uint64(dSrc), uint64(dDst), uint64(dHopEnd), uint64(dSegs), nSegs}); err != nil {
				return fmt.Errorf("gpu: launch sample_layer: %w", err)
			}
			if err := cu.Synchronize(); err != nil {
				return fmt.Errorf("gpu: sample_layer: %w", err)
			}
			st.Kernel = time.Since(tk)
			d.release(dScratch)
			// The rows packed into columns on the device.
			tr := time.Now()
			dCount, err := d.get("sample.count", int64(n)*4)
			if err != nil {
				return err
			}
			egrid := min((n+sampleThreads-1)/sampleThreads, e.numSM*64)
			if err := launch(ks.rowCounts, egrid, sampleThreads, cu.Stream{}, []uint64{uint64(dHopEnd), uint64(hops), uint64(n), uint64(dCount)}); err != nil {
				return fmt.Errorf("gpu: launch sample_row_counts: %w", err)
			}
			dOff, err := d.get("sample.offsets", int64(n+1)*8)
			if err != nil {
				return err
			}
			total, err := e.scanCounts(ks, d, "sample.offsets", dCount, n, dOff)
			if err != nil {
				return err
			}
			into.Reset(n, int64(total))
			var fEdge, fSrc, fDst, fHop cu.DevicePtr
			if total > 0 {
				if withEdges {
					if fEdge, err = d.get("sample.col.edge", int64(total)*8); err != nil {
						return err
					}
				}
				for _, c := range []struct {
					name string
					q    *cu.DevicePtr
				}{{"sample.col.src", &fSrc}, {"sample.col.dst", &fDst}, {"sample.col.hop", &fHop}} {
					if *c.q, err = d.get(c.name, int64(total)*4); err != nil {
						return err
					}
				}
				rgrid := int(min((edges+sampleThreads-1)/sampleThreads, int64(e.numSM*64)))
				if err := launch(ks.rowsToColumns, rgrid, sampleThreads, cu.Stream{}, []uint64{uint64(dEdge), uint64(dSrc), uint64(dDst),
					uint64(dHopEnd), uint64(hops), uint64(stride), uint64(n), uint64(dOff), uint64(fEdge), uint64(fSrc), uint64(fDst),
					uint64(fHop)}); err != nil {
					return fmt.Errorf("gpu: launch sample_rows_to_columns: %w", err)
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_rows_to_columns: %w", err)
				}
			}
			st.Resolve = time.Since(tr)
			tc := time.Now()
			if err := e.copyColumns(into, dOff, fEdge, fSrc, fDst, fHop, n, total); err != nil {
				return err
			}
			st.Copy = time.Since(tc)
			st.Edges = int64(total)
			return nil
		})
		st.Wall = time.Since(t0)
		e.logSampleCall("layer", st, queued)
		return nil, st, err
	})
	if err != nil {
		return SampleStats{}, err
	}
	return st, nil
}
