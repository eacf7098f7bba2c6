//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graphsample"
)

// Neighbour sampling on the device (kernels/sample.cuh): the hops run one
// launch each, one warp per (instance, frontier slot) task; the host turns
// each hop's picks into the next frontier. The samples equal graphsample.Sample's
// (unweighted exactly; weighted up to the last ulp of a logarithm, which
// only the reservoir-key fallback takes).

// Layer sampling (sample_layer_cuda.go) and the frontier walk
// (sample_frontier_cuda.go) run in one launch each, forest fire and
// snowball (sample_fire_cuda.go) in one launch a round. SampleRangeOnDevice
// (graphsample.DeviceSampler) picks among them.

// SampleStats describe one device sampling call.
type SampleStats struct {
	graphsample.SampleStats
	Kernel time.Duration // the hops' selection kernels, synchronised (C-SAW's SEPS: Edges / Kernel)
	// Resolve is neighbour sampling's resolution of the picks into edge
	// indices and targets on the device (sample_neighbor_targets), output
	// work the host did before; counted in Wall, not in Kernel.
	Resolve time.Duration
	Wall    time.Duration
	Rounds  int // forest fire and snowball: launches (sample_fire_cuda.go)
}

var _ graphsample.DeviceSampler = (*Engine)(nil)

// SamplesOnDevice implements graphsample.DeviceSampler: the parameters the
// kernels sample, with the whole graph in this device's own memory (no
// placement plan, not partitioned).
func (e *Engine) SamplesOnDevice(p graphsample.SampleParams) bool {
	return DeviceSamples(p) && e.placed == nil
}

// SampleRangeOnDevice implements graphsample.DeviceSampler.
func (e *Engine) SampleRangeOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, graphsample.SampleStats, error) {
	sample := e.SampleNeighborsRange
	switch p.Kind {
	case graphsample.LayerSampling:
		sample = e.SampleLayerRange
	case graphsample.FrontierWalk:
		sample = e.SampleFrontierRange
	case graphsample.ForestFire, graphsample.Snowball:
		sample = e.SampleFireRange
	}
	out, st, err := sample(ctx, p, starts, first, count)
	return out, st.SampleStats, err
}

// SampleNeighbors runs graphsample.NeighborSampling without replacement (constant
// or edge-weight bias) for starts as graphsample.Sample does, and returns every
// instance's edges in instance order.
func (e *Engine) SampleNeighbors(ctx context.Context, p graphsample.SampleParams, starts []uint32) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.SampleNeighborsRange(ctx, p, starts, 0, -1)
}

// checkSample validates a device sampling call of kind and returns its
// count (count -1: the instances from first on).
func (e *Engine) checkSample(kind graphsample.SampleKind, p graphsample.SampleParams, starts []uint32, first, count int) (int, error) {
	if err := p.Validate(e.g); err != nil {
		return 0, err
	}
	if p.Kind != kind || !DeviceSamples(p) {
		return 0, fmt.Errorf("gpu: only neighbour sampling without replacement, layer sampling, forest fire, snowball and the frontier walk, unweighted or by edge weight, run on the device (not %s)", p)
	}
	if per := p.SeedsPerInstance(); len(starts)%per != 0 {
		return 0, fmt.Errorf("gpu: %d seeds are not sets of frontier_size %d", len(starts), per)
	}
	total := p.NumInstances(len(starts))
	if count < 0 {
		count = total - first
	}
	if first < 0 || count < 0 || first+count > total || int64(total) > math.MaxUint32 {
		return 0, fmt.Errorf("gpu: instances %d..%d of %d", first, first+count-1, total)
	}
	for _, s := range starts {
		if int(s) >= e.g.NumVertices() {
			return 0, fmt.Errorf("gpu: seed %d beyond the graph's %d vertices", s, e.g.NumVertices())
		}
	}
	return count, nil
}

// sampleUsable says why the engine cannot sample now (e.mu held).
func (e *Engine) sampleUsable(p graphsample.SampleParams) error {
	if e.closed {
		return errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return e.broken
	}
	if e.placed != nil {
		where := "in host memory under the placement plan"
		if e.striped {
			where = "on other devices' stripes (partitioned mode)"
		}
		return fmt.Errorf("gpu: %s sampling needs the whole graph in this device's own memory; %.0f%% of its edges are %s", p.Kind, 100*(1-e.placed.plan.DeviceShare()), where)
	}
	return nil
}

// sampleLocked checks a sampling call of kind for instances first ..
// first+count-1 (count -1: to the last), takes the engine and runs body on
// the number of instances, unless the engine cannot sample (closed,
// broken, or not holding the whole graph).
func (e *Engine) sampleLocked(kind graphsample.SampleKind, p graphsample.SampleParams, starts []uint32, first, count int,
	body func(count int) ([][]graphsample.SampledEdge, SampleStats, error)) ([][]graphsample.SampledEdge, SampleStats, error) {
	count, err := e.checkSample(kind, p, starts, first, count)
	if err != nil {
		return nil, SampleStats{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.sampleUsable(p); err != nil {
		return nil, SampleStats{}, err
	}
	return body(count)
}

// SampleNeighborsRange is SampleNeighbors for instances first ..
// first+count-1 only (count -1: to the last), as graphsample.SampleRange.
func (e *Engine) SampleNeighborsRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.sampleLocked(graphsample.NeighborSampling, p, starts, first, count, func(count int) ([][]graphsample.SampledEdge, SampleStats, error) {
		t0 := time.Now()
		n := count
		var hops []hopEdges
		// Hop 0's tasks: one per instance, slot 0; an instance's Philox
		// counter is its id in the whole batch.
		inst := make([]uint32, n)
		slot := make([]uint32, n)
		vert := make([]uint32, n)
		for k := range n {
			i := first + k
			inst[k], vert[k] = uint32(i), starts[i/p.InstancesPerSeed]
		}
		var st SampleStats
		err := e.dev.do(func() (err error) {
			fn, err := e.mod.Function("sample_neighbor_hop")
			if err != nil {
				return fmt.Errorf("gpu: kernel sample_neighbor_hop: %w", err)
			}
			fnTargets, err := e.mod.Function("sample_neighbor_targets")
			if err != nil {
				return fmt.Errorf("gpu: kernel sample_neighbor_targets: %w", err)
			}
			var dCum, dInst, dSlot, dVert, dOut, dCount, dPos, dEdge, dDst cu.DevicePtr
			defer func() {
				for name, q := range map[string]*cu.DevicePtr{"sample.inst": &dInst, "sample.slot": &dSlot,
					"sample.vertex": &dVert, "sample.out": &dOut, "sample.count": &dCount, "sample.pos": &dPos, "sample.edge": &dEdge, "sample.dst": &dDst} {
					e.free(name, q)
				}
			}()
			if p.EdgeBias.Kind == graphsample.BiasEdgeWeight {
				if dCum, err = e.sampleCDF(); err != nil {
					return err
				}
			}
			for h, k := range p.Fanouts {
				nt := len(vert)
				if nt == 0 {
					break
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				for _, a := range []struct {
					name string
					q    *cu.DevicePtr
					n    int64
					src  []uint32
				}{{"sample.inst", &dInst, int64(nt) * 4, inst}, {"sample.slot", &dSlot, int64(nt) * 4, slot},
					{"sample.vertex", &dVert, int64(nt) * 4, vert}, {"sample.out", &dOut, int64(nt) * int64(k) * 4, nil},
					{"sample.count", &dCount, int64(nt) * 4, nil}} {
					e.free(a.name, a.q)
					if *a.q, err = e.alloc(a.name, a.n); err != nil {
						return err
					}
					if a.src != nil {
						if err := e.copyHtoD(*a.q, unsafe.Pointer(&a.src[0]), a.n); err != nil {
							return fmt.Errorf("gpu: copy %s: %w", a.name, err)
						}
					}
				}
				var dWeights uint64
				if dCum != 0 {
					dWeights = uint64(e.dWeights)
				}
				warpsPerBlock := sampleThreads / 32
				grid := min((nt+warpsPerBlock-1)/warpsPerBlock, e.numSM*64)
				tk := time.Now()
				if err := launch(fn, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), dWeights, uint64(dCum), p.Seed,
					uint64(h), uint64(k), uint64(dInst), uint64(dSlot), uint64(dVert), uint64(nt), uint64(dOut), uint64(dCount)}); err != nil {
					return fmt.Errorf("gpu: launch sample_neighbor_hop: %w", err)
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_neighbor_hop: %w", err)
				}
				st.Kernel += time.Since(tk)
				// The picks' edges and targets, packed on the device in
				// task order by the prefix sum of the counts.
				counts := make([]uint32, nt)
				if err := cu.MemcpyDtoH(unsafe.Pointer(&counts[0]), dCount, int64(nt)*4); err != nil {
					return fmt.Errorf("gpu: copy counts: %w", err)
				}
				pos := make([]uint64, nt)
				var total uint64
				for t, c := range counts {
					pos[t] = total
					total += uint64(c)
				}
				if total == 0 {
					break
				}
				for _, a := range []struct {
					name string
					q    *cu.DevicePtr
					n    int64
				}{{"sample.pos", &dPos, int64(nt) * 8}, {"sample.edge", &dEdge, int64(total) * 8}, {"sample.dst", &dDst, int64(total) * 4}} {
					e.free(a.name, a.q)
					if *a.q, err = e.alloc(a.name, a.n); err != nil {
						return err
					}
				}
				if err := e.copyHtoD(dPos, unsafe.Pointer(&pos[0]), int64(nt)*8); err != nil {
					return fmt.Errorf("gpu: copy sample.pos: %w", err)
				}
				tk = time.Now()
				targetsGrid := min((nt*k+sampleThreads-1)/sampleThreads, e.numSM*64)
				if err := launch(fnTargets, targetsGrid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets),
					uint64(dVert), uint64(dOut), uint64(dCount), uint64(dPos), uint64(k), uint64(nt), uint64(dEdge), uint64(dDst)}); err != nil {
					return fmt.Errorf("gpu: launch sample_neighbor_targets: %w", err)
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_neighbor_targets: %w", err)
				}
				st.Resolve += time.Since(tk)
				edges := make([]uint64, total)
				dsts := make([]uint32, total)
				if err := cu.MemcpyDtoH(unsafe.Pointer(&edges[0]), dEdge, int64(total)*8); err != nil {
					return fmt.Errorf("gpu: copy picked edges: %w", err)
				}
				if err := cu.MemcpyDtoH(unsafe.Pointer(&dsts[0]), dDst, int64(total)*4); err != nil {
					return fmt.Errorf("gpu: copy picked targets: %w", err)
				}
				var he hopEdges
				he, inst, slot, vert = nextFrontier(n, uint32(first), h, inst, vert, counts, edges, dsts)
				hops = append(hops, he)
			}
			return nil
		})
		if err != nil {
			return nil, SampleStats{}, err
		}
		out := instanceEdges(n, hops)
		st.Instances = int64(n)
		for _, es := range out {
			st.Edges += int64(len(es))
		}
		st.Wall = time.Since(t0)
		return out, st, nil
	})
}

// sampleCDF is the device copy of the graph's weight CDF, uploaded on the
// first call (device thread, e.mu held); Close frees it.
func (e *Engine) sampleCDF() (cu.DevicePtr, error) {
	if e.dSampleCum == 0 {
		p, err := upload(e, "sample.cum", graphsample.WeightCDF(e.g))
		if err != nil {
			return 0, err
		}
		e.dSampleCum = p
	}
	return e.dSampleCum, nil
}
