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
// launch each, one warp per (instance, frontier slot) task; the device
// turns each hop's picks into the next frontier and lays the sample out in
// columns by instance (kernels/sample_columns.cuh), which come back through
// pinned staging (stagedcopy_cuda.go). The samples equal graphsample.Sample's
// (unweighted exactly; weighted up to the last ulp of a logarithm, which
// only the reservoir-key fallback takes).

// Layer sampling (sample_layer_cuda.go) and the frontier walk
// (sample_frontier_cuda.go) run in one launch each, forest fire and
// snowball (sample_fire_cuda.go) in one launch a round.
// SampleColumnsOnDevice (graphsample.ColumnSampler) and SampleRangeOnDevice
// (graphsample.DeviceSampler) pick among them.

// SampleStats describe one device sampling call.
type SampleStats struct {
	graphsample.SampleStats
	Kernel time.Duration // the hops' selection kernels, synchronised (C-SAW's SEPS: Edges / Kernel)
	// Resolve is neighbour sampling's bookkeeping on the device (the
	// counts' prefix sums, the picks resolved into edges and the next
	// frontier, the layout by instance: kernels/sample_columns.cuh), work
	// the host did before; counted in Wall, not in Kernel.
	Resolve time.Duration
	// Copy is the copy of the sampled columns back to the host
	// (SampleNeighborColumns).
	Copy time.Duration
	// Setup is the time before the first kernel (the first hop's tasks
	// built and uploaded, device arrays allocated); counted in Wall.
	Setup  time.Duration
	Wall   time.Duration
	Rounds int // forest fire and snowball: launches (sample_fire_cuda.go)
}

var _ graphsample.DeviceSampler = (*Engine)(nil)

// SamplesOnDevice implements graphsample.DeviceSampler: the parameters the
// kernels sample, with the whole graph in this device's own memory (no
// placement plan, not partitioned).
func (e *Engine) SamplesOnDevice(p graphsample.SampleParams) bool {
	return DeviceSamples(p) && e.placed == nil && e.streamed == nil
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

// checkSample validates a device sampling call of kind (the seeds of its
// instances only: RangeSeeds) and returns its count (count -1: the
// instances from first on).
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
	if err := p.CheckSegments(first, count); err != nil {
		return 0, fmt.Errorf("gpu: %w", err)
	}
	// The call's own seeds only: a request sampled in waves is not
	// scanned whole again each wave.
	nv := uint32(e.g.NumVertices())
	for _, s := range p.RangeSeeds(starts, first, count) {
		if s >= nv {
			return 0, fmt.Errorf("gpu: seed %d beyond the graph's %d vertices", s, nv)
		}
	}
	return count, nil
}

// segmentTable uploads p's segments (graphsample.Segment) as
// kernels/sample.cuh's SampleSeg table for a call's kernels (device
// thread, under name; the caller frees it): its address and length, both
// 0 without segments, a request's own call.
func (e *Engine) segmentTable(name string, p graphsample.SampleParams) (cu.DevicePtr, uint64, error) {
	if len(p.Segments) == 0 {
		return 0, 0, nil
	}
	host := make([]uint64, 2*len(p.Segments))
	for j, sg := range p.Segments {
		host[2*j], host[2*j+1] = sg.Seed, uint64(uint32(sg.First))|uint64(sg.Base)<<32
	}
	ptr, err := upload(e, name, host)
	if err != nil {
		return 0, 0, err
	}
	return ptr, uint64(len(p.Segments)), nil
}

// sampleUsable says why the engine cannot sample now (e.mu held).
func (e *Engine) sampleUsable(p graphsample.SampleParams) error {
	if e.closed {
		return errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return e.broken
	}
	if e.streamed != nil {
		return fmt.Errorf("gpu: %s sampling needs the whole graph in this device's own memory; it is streamed in partitions (%.0f%% resident)", p.Kind, 100*e.streamed.plan.DeviceShare())
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
// first+count-1 only (count -1: to the last), as graphsample.SampleRange:
// SampleNeighborColumns, laid out per instance (with edge indices).
func (e *Engine) SampleNeighborsRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	c := graphsample.Columns{WithEdges: true}
	st, err := e.SampleNeighborColumns(ctx, p, starts, first, count, &c)
	if err != nil {
		return nil, SampleStats{}, err
	}
	return c.Edges(), st, nil
}

// SampleColumnsOnDevice implements graphsample.ColumnSampler: neighbour
// and layer sampling build their columns on the device
// (SampleNeighborColumns, SampleLayerColumns), forest fire and snowball
// fill them from their rounds' pools on every core (SampleFireColumns);
// the frontier walk's per-instance edges are laid out into columns.
func (e *Engine) SampleColumnsOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int, into *graphsample.Columns) (graphsample.SampleStats, error) {
	switch p.Kind {
	case graphsample.NeighborSampling:
		st, err := e.SampleNeighborColumns(ctx, p, starts, first, count, into)
		return st.SampleStats, err
	case graphsample.LayerSampling:
		st, err := e.SampleLayerColumns(ctx, p, starts, first, count, into)
		return st.SampleStats, err
	case graphsample.ForestFire, graphsample.Snowball:
		st, err := e.SampleFireColumns(ctx, p, starts, first, count, into)
		return st.SampleStats, err
	}
	out, st, err := e.SampleRangeOnDevice(ctx, p, starts, first, count)
	if err != nil {
		return graphsample.SampleStats{}, err
	}
	into.SetEdges(out, 0)
	return st, nil
}

// devArrays are the device arrays of one sampling call (device thread).
// They are taken from, and given back to, the engine's arrays kept from
// the last call (Engine.sampleBufs, by name): a request sampled in waves
// of about 8 M edges ran 33 waves for 1 M seeds of a [25, 10] fan-out, and
// allocating and freeing two dozen arrays a wave took three times the
// sampling itself (H200: 219 ms for the waves against 66 ms in one call).
type devArrays struct {
	e *Engine
}

// sampleBuf is a device array kept between sampling calls.
type sampleBuf struct {
	p cu.DevicePtr
	n int64
}

// sampleBufsKept bounds the bytes of device arrays kept between sampling
// calls; a call that needed more (one call over a whole large request)
// frees them at its end, as every call did before.
const sampleBufsKept = 1 << 30

// get returns an array of at least n bytes (8 at least) under a name
// unique to the call: the one kept under that name when it is large
// enough, else a new one with room to spare (keptBytes).
func (d *devArrays) get(name string, n int64) (cu.DevicePtr, error) {
	e := d.e
	n = max(n, 8)
	if e.sampleBufs == nil {
		e.sampleBufs = map[string]*sampleBuf{}
	}
	b := e.sampleBufs[name]
	if b == nil || b.n < n {
		if b != nil {
			e.free(keptName(name), &b.p)
			delete(e.sampleBufs, name)
		}
		size := keptBytes(n)
		p, err := e.alloc(keptName(name), size)
		if err != nil {
			return 0, err
		}
		b = &sampleBuf{p: p, n: size}
		e.sampleBufs[name] = b
	}
	return b.p, nil
}

// zeroed is get, the first n bytes cleared.
func (d *devArrays) zeroed(name string, n int64) (cu.DevicePtr, error) {
	p, err := d.get(name, n)
	if err != nil {
		return 0, err
	}
	if err := cu.MemsetD8(p, 0, max(n, 8)); err != nil {
		return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
	}
	return p, nil
}

// release marks the array at p free for reuse within the call (kept).
func (d *devArrays) release(cu.DevicePtr) {}

// freeAll ends the call: its arrays stay for the next call unless the
// kept arrays pass sampleBufsKept, then all are freed.
func (d *devArrays) freeAll() {
	e := d.e
	var kept int64
	for _, b := range e.sampleBufs {
		kept += b.n
	}
	if kept > sampleBufsKept {
		e.releaseSampleBufs()
	}
}

// releaseSampleBufs frees the arrays kept between sampling calls (device
// thread; Close).
func (e *Engine) releaseSampleBufs() {
	for name, b := range e.sampleBufs {
		e.free(keptName(name), &b.p)
	}
	e.sampleBufs = nil
}

// keptName is the allocation name of the kept array name, apart from the
// arrays other calls allocate and free under plain names.
func keptName(name string) string { return "kept." + name }

// columnKernels are the kernels of neighbour sampling into columns
// (kernels/sample.cuh, sample_columns.cuh).
type columnKernels struct {
	hop, resolve, layout, addCounts, scanTiles, scanSums, scanApply cu.Function
	rowCounts, rowsToColumns                                        cu.Function
}

func (e *Engine) columnKernels() (columnKernels, error) {
	var k columnKernels
	for _, f := range []struct {
		name string
		fn   *cu.Function
	}{{"sample_neighbor_hop", &k.hop}, {"sample_neighbor_resolve", &k.resolve}, {"sample_neighbor_layout", &k.layout},
		{"sample_add_counts", &k.addCounts}, {"scan_u32_tiles", &k.scanTiles}, {"scan_u64_sums", &k.scanSums},
		{"scan_u32_apply", &k.scanApply}, {"sample_row_counts", &k.rowCounts}, {"sample_rows_to_columns", &k.rowsToColumns}} {
		fn, err := e.mod.Function(f.name)
		if err != nil {
			return k, fmt.Errorf("gpu: kernel %s: %w", f.name, err)
		}
		*f.fn = fn
	}
	return k, nil
}

// scanTile is kernels/sample_columns.cuh's kScanTile: values a scan block
// sums.
const scanTile = scanThreads * scanPerThread

// scanCounts writes the exclusive prefix sums of the n uint32 at in to out
// (n+1 uint64, out[n] the total) and returns the total (device thread;
// three launches and an 8-byte copy).
func (e *Engine) scanCounts(k columnKernels, d *devArrays, name string, in cu.DevicePtr, n int, out cu.DevicePtr) (uint64, error) {
	total, err := e.scanCountsAsync(k, d, name, in, n, out)
	if err != nil || total == 0 {
		return 0, err
	}
	var t uint64
	if err := cu.MemcpyDtoH(unsafe.Pointer(&t), total, 8); err != nil {
		return 0, fmt.Errorf("gpu: scan %s: %w", name, err)
	}
	return t, nil
}

// scanCountsAsync is scanCounts without waiting for the total: the
// launches only, and the total's device address (0 when n is 0). The
// layout's per-hop scans need no total, and an 8-byte copy is a wait for
// the whole stream, a few of them a wave.
func (e *Engine) scanCountsAsync(k columnKernels, d *devArrays, name string, in cu.DevicePtr, n int, out cu.DevicePtr) (cu.DevicePtr, error) {
	if n == 0 {
		if err := cu.MemsetD8(out, 0, 8); err != nil {
			return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
		}
		return 0, nil
	}
	tiles := (n + scanTile - 1) / scanTile
	sums, err := d.get(name+".tiles", int64(tiles+1)*8)
	if err != nil {
		return 0, err
	}
	defer d.release(sums)
	total := sums + cu.DevicePtr(tiles*8)
	if err := launch(k.scanTiles, tiles, scanThreads, cu.Stream{}, []uint64{uint64(in), uint64(n), uint64(sums)}); err != nil {
		return 0, fmt.Errorf("gpu: launch scan_u32_tiles (%s): %w", name, err)
	}
	if err := launch(k.scanSums, 1, scanThreads, cu.Stream{}, []uint64{uint64(sums), uint64(tiles), uint64(total)}); err != nil {
		return 0, fmt.Errorf("gpu: launch scan_u64_sums (%s): %w", name, err)
	}
	if err := launch(k.scanApply, tiles, scanThreads, cu.Stream{}, []uint64{uint64(in), uint64(n), uint64(sums), uint64(out)}); err != nil {
		return 0, fmt.Errorf("gpu: launch scan_u32_apply (%s): %w", name, err)
	}
	return total, nil
}

// SampleNeighborColumns runs neighbour sampling for instances first ..
// first+count-1 (count -1: to the last) as graphsample.SampleRange, with
// every hop's frontier and the instance-ordered layout built on the device
// (kernels/sample_columns.cuh), into into (Reset by the call; its Edge
// filled when into.WithEdges). The host uploads the first hop's tasks and
// copies back the columns and the offsets: a few large copies and one
// 8-byte total a hop.
func (e *Engine) SampleNeighborColumns(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int, into *graphsample.Columns) (SampleStats, error) {
	var st SampleStats
	_, _, err := e.sampleLocked(graphsample.NeighborSampling, p, starts, first, count, func(n int) ([][]graphsample.SampledEdge, SampleStats, error) {
		t0 := time.Now()
		// Hop 0's tasks: one per instance, slot 0; an instance's Philox
		// counter is its id in the whole batch.
		inst := make([]uint32, n)
		vert := make([]uint32, n)
		for k := range n {
			i := first + k
			inst[k], vert[k] = uint32(i), starts[i/p.InstancesPerSeed]
		}
		withEdges := into.WithEdges
		tq := time.Now()
		var queued time.Duration
		e.staging.times = stagedTimes{}
		err := e.dev.do(func() (err error) {
			queued = time.Since(tq)
			ks, err := e.columnKernels()
			if err != nil {
				return err
			}
			d := &devArrays{e: e}
			defer d.freeAll()
			var dCum cu.DevicePtr
			if p.EdgeBias.Kind == graphsample.BiasEdgeWeight {
				if dCum, err = e.sampleCDF(); err != nil {
					return err
				}
			}
			var dWeights uint64
			if dCum != 0 {
				dWeights = uint64(e.dWeights)
			}
			if n == 0 {
				into.Reset(0, 0)
				into.Offsets[0] = 0
				return nil
			}
			dSegs, nSegs, err := e.segmentTable("sample.segs", p)
			defer e.free("sample.segs", &dSegs)
			if err != nil {
				return err
			}
			dInst, err := d.get("sample.inst0", int64(n)*4)
			if err != nil {
				return err
			}
			dVert, err := d.get("sample.vertex0", int64(n)*4)
			if err != nil {
				return err
			}
			dSlot, err := d.zeroed("sample.slot0", int64(n)*4)
			if err != nil {
				return err
			}
			for _, c := range []struct {
				q   cu.DevicePtr
				src []uint32
			}{{dInst, inst}, {dVert, vert}} {
				if err := e.copyHtoD(c.q, unsafe.Pointer(&c.src[0]), int64(n)*4); err != nil {
					return fmt.Errorf("gpu: copy sample tasks: %w", err)
				}
			}
			dTotal, err := d.zeroed("sample.instTotal", int64(n)*4)
			if err != nil {
				return err
			}
			// Each hop's edges in task order (instance, then slot), kept
			// for the layout: hop h+1's tasks are hop h's edges.
			type hopCols struct {
				edge, src, dst, inst, count cu.DevicePtr
				n                           uint64
			}
			var hops []hopCols
			nt := n
			for h, k := range p.Fanouts {
				if err := ctx.Err(); err != nil {
					return err
				}
				dOut, err := d.get(fmt.Sprintf("sample.out%d", h), int64(nt)*int64(k)*4)
				if err != nil {
					return err
				}
				dCount, err := d.get(fmt.Sprintf("sample.count%d", h), int64(nt)*4)
				if err != nil {
					return err
				}
				warpsPerBlock := sampleThreads / 32
				grid := min((nt+warpsPerBlock-1)/warpsPerBlock, e.numSM*64)
				tk := time.Now()
				if h == 0 {
					st.Setup = tk.Sub(t0)
				}
				if err := launch(ks.hop, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), dWeights, uint64(dCum), p.Seed,
					uint64(h), uint64(k), uint64(dInst), uint64(dSlot), uint64(dVert), uint64(nt), uint64(dOut), uint64(dCount),
					uint64(dSegs), nSegs}); err != nil {
					return fmt.Errorf("gpu: launch sample_neighbor_hop: %w", err)
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_neighbor_hop: %w", err)
				}
				st.Kernel += time.Since(tk)
				tk = time.Now()
				dPos, err := d.get(fmt.Sprintf("sample.pos%d", h), int64(nt+1)*8)
				if err != nil {
					return err
				}
				total, err := e.scanCounts(ks, d, fmt.Sprintf("sample.pos%d", h), dCount, nt, dPos)
				if err != nil {
					return err
				}
				if total == 0 {
					st.Resolve += time.Since(tk)
					break
				}
				if total > math.MaxUint32 {
					return fmt.Errorf("gpu: hop %d samples %d edges, more than 2^32 tasks for the next hop; sample fewer instances a call", h, total)
				}
				hc := hopCols{n: total}
				if withEdges {
					if hc.edge, err = d.get(fmt.Sprintf("sample.edge%d", h), int64(total)*8); err != nil {
						return err
					}
				}
				if hc.src, err = d.get(fmt.Sprintf("sample.src%d", h), int64(total)*4); err != nil {
					return err
				}
				if hc.dst, err = d.get(fmt.Sprintf("sample.dst%d", h), int64(total)*4); err != nil {
					return err
				}
				if hc.inst, err = d.get(fmt.Sprintf("sample.hinst%d", h), int64(total)*4); err != nil {
					return err
				}
				nSlot, err := d.get(fmt.Sprintf("sample.slot%d", h+1), int64(total)*4)
				if err != nil {
					return err
				}
				if hc.count, err = d.zeroed(fmt.Sprintf("sample.instCount%d", h), int64(n)*4); err != nil {
					return err
				}
				rgrid := min((nt*k+sampleThreads-1)/sampleThreads, e.numSM*64)
				if err := launch(ks.resolve, rgrid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets),
					uint64(dInst), uint64(dSlot), uint64(dVert), uint64(dOut), uint64(dCount), uint64(dPos), uint64(k), uint64(nt),
					uint64(first), uint64(hc.edge), uint64(hc.src), uint64(hc.dst), uint64(hc.inst), uint64(nSlot), uint64(hc.count),
					uint64(dTotal)}); err != nil {
					return fmt.Errorf("gpu: launch sample_neighbor_resolve: %w", err)
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_neighbor_resolve: %w", err)
				}
				st.Resolve += time.Since(tk)
				d.release(dOut)
				d.release(dCount)
				d.release(dPos)
				d.release(dSlot)
				if h == 0 {
					d.release(dInst)
					d.release(dVert)
				}
				hops = append(hops, hc)
				dInst, dSlot, dVert, nt = hc.inst, nSlot, hc.dst, int(total)
			}
			d.release(dSlot)
			// The layout: instance i's rows start at off[i]; hop by hop,
			// its edges of the hop go after those of the earlier hops.
			tl := time.Now()
			dOff, err := d.get("sample.offsets", int64(n+1)*8)
			if err != nil {
				return err
			}
			edges, err := e.scanCounts(ks, d, "sample.offsets", dTotal, n, dOff)
			if err != nil {
				return err
			}
			into.Reset(n, int64(edges))
			var fEdge, fSrc, fDst, fHop cu.DevicePtr
			if edges > 0 {
				if withEdges {
					if fEdge, err = d.get("sample.col.edge", int64(edges)*8); err != nil {
						return err
					}
				}
				for _, c := range []struct {
					name string
					q    *cu.DevicePtr
				}{{"sample.col.src", &fSrc}, {"sample.col.dst", &fDst}, {"sample.col.hop", &fHop}} {
					if *c.q, err = d.get(c.name, int64(edges)*4); err != nil {
						return err
					}
				}
				cursor, err := d.get("sample.cursor", int64(n+1)*8)
				if err != nil {
					return err
				}
				if err := cu.MemcpyDtoD(cursor, dOff, int64(n+1)*8); err != nil {
					return fmt.Errorf("gpu: copy sample offsets: %w", err)
				}
				hopStart, err := d.get("sample.hopStart", int64(n+1)*8)
				if err != nil {
					return err
				}
				for h, hc := range hops {
					if _, err := e.scanCountsAsync(ks, d, "sample.hopStart", hc.count, n, hopStart); err != nil {
						return err
					}
					grid := min((int(hc.n)+sampleThreads-1)/sampleThreads, e.numSM*64)
					if err := launch(ks.layout, grid, sampleThreads, cu.Stream{}, []uint64{uint64(hc.edge), uint64(hc.src), uint64(hc.dst),
						uint64(hc.inst), hc.n, uint64(first), uint64(h), uint64(hopStart), uint64(cursor), uint64(fEdge), uint64(fSrc),
						uint64(fDst), uint64(fHop)}); err != nil {
						return fmt.Errorf("gpu: launch sample_neighbor_layout: %w", err)
					}
					if h+1 < len(hops) {
						grid := min((n+sampleThreads-1)/sampleThreads, e.numSM*64)
						if err := launch(ks.addCounts, grid, sampleThreads, cu.Stream{}, []uint64{uint64(cursor), uint64(hc.count), uint64(n)}); err != nil {
							return fmt.Errorf("gpu: launch sample_add_counts: %w", err)
						}
					}
				}
				if err := cu.Synchronize(); err != nil {
					return fmt.Errorf("gpu: sample_neighbor_layout: %w", err)
				}
			}
			st.Resolve += time.Since(tl)
			tc := time.Now()
			if err := e.copyColumns(into, dOff, fEdge, fSrc, fDst, fHop, n, edges); err != nil {
				return err
			}
			st.Copy = time.Since(tc)
			st.Edges = int64(edges)
			return nil
		})
		st.Instances = int64(n)
		st.Wall = time.Since(t0)
		e.logSampleCall("neighbour", st, queued)
		return nil, st, err
	})
	if err != nil {
		return SampleStats{}, err
	}
	return st, nil
}

// logSampleCall says at debug level where a sampling call's time went:
// waiting for the device thread (queued), set-up before the first kernel
// (tasks built and uploaded, arrays allocated), the kernels, the
// bookkeeping, and the copy back split into the pinned buffers' first
// allocation, the waits for the device's pieces and the cores' copies out
// (e.mu held).
func (e *Engine) logSampleCall(kind string, st SampleStats, queued time.Duration) {
	ct := e.staging.times
	e.cfg.logger.Debug("gpu sample call", "kind", kind, "instances", st.Instances, "edges", st.Edges, "wall", st.Wall,
		"queued", queued, "setup", st.Setup, "kernel", st.Kernel, "resolve", st.Resolve, "copy", st.Copy,
		"staging_alloc", ct.alloc, "copy_wait", ct.wait, "copy_out", ct.out, "pieces", ct.pieces,
		"lock", ct.lock, "locks", ct.locks, "copy_direct", ct.direct, "direct_bytes", ct.directBytes)
}

// copyColumns copies a call's columns (n instances, edges edges; fEdge 0
// when edge indices were not asked for) from the device into into, sized
// by the caller (device thread).
func (e *Engine) copyColumns(into *graphsample.Columns, dOff, fEdge, fSrc, fDst, fHop cu.DevicePtr, n int, edges uint64) error {
	// The columns' memory comes back wave after wave (graphsample.Columns
	// keeps it): room lets the copies lock it and copy into it straight.
	spans := make([]stagedSpan, 0, 5)
	for _, c := range []stagedSpan{{unsafe.Pointer(&into.Offsets[0]), dOff, int64(n+1) * 8, int64(cap(into.Offsets)) * 8},
		{slicePtr(into.Src), fSrc, int64(edges) * 4, int64(cap(into.Src)) * 4},
		{slicePtr(into.Dst), fDst, int64(edges) * 4, int64(cap(into.Dst)) * 4},
		{slicePtr(into.Hop), fHop, int64(edges) * 4, int64(cap(into.Hop)) * 4},
		{slicePtr(into.Edge), fEdge, int64(edges) * 8, int64(cap(into.Edge)) * 8}} {
		if c.n > 0 && c.src != 0 {
			spans = append(spans, c)
		}
	}
	if err := e.stagedCopies(spans); err != nil {
		return fmt.Errorf("gpu: copy sampled columns: %w", err)
	}
	return nil
}

// slicePtr is the address of s's first element (nil when s is empty).
func slicePtr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
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
