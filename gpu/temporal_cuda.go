//go:build cuda

package gpu

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// Temporal walks (issue 38) run in the walk_temporal_* kernels
// (kernels/temporal.cuh), one per time bias and weighting. They read the
// graph's Times and ByTime, uploaded by the first temporal run, and for
// weighted walks the per-vertex prefix sums of the weights in time order,
// built on the device by temporal_cumw_build in the CPU's order of
// addition (cpu.Engine.windowWeights), so every draw compares against the
// same float64 sums; the exponential bias reads its cell sums
// (walk.ExpSums) for the run's scale and direction, built on the device by
// temporal_exp_build, likewise to the CPU's bits, and kept until a run asks
// for another scale, direction or weighting (one table: 8 bytes an edge).
// Every bias reads, after a walk's first step, the next record of the
// position it took (temporal_next_build, 16 bytes an edge, per direction):
// the target, its window's near end (the bound the step would search for,
// as the CPU's exponential records store it: timeRec.nx) and the target's
// range of the time order, in one load, so the step neither searches nor
// reads the target's offsets, and the walks stay the CPU's, byte for byte.
// For the exponential bias the records also carry a flag per time-cell
// width (temporal_next_cells): the window lies in one cell, so the draw
// reads no time.

// temporalKernels names the kernels by [walk.TimeBias][weighted].
var temporalKernels = [3][2]string{
	{"walk_temporal_uniform", "walk_temporal_uniform_w"},
	{"walk_temporal_linear", "walk_temporal_linear_w"},
	{"walk_temporal_exp", "walk_temporal_exp_w"},
}

// temporalState is the engine's temporal kernels and arrays.
type temporalState struct {
	// [bias][weighted][variant]: variant 0 the compiler's register
	// budget, 1 capped at 64 (the default: the exponential kernels
	// otherwise take 80 and fit three blocks an SM, not four).
	fn  [3][2][2]cu.Function
	occ [3][2][2]int
	// fnN2V: temporal Node2Vec by [bias][weighted] (the compiler's
	// register budget).
	fnN2V                  [3][2]cu.Function
	occN2V                 [3][2]int
	fnCumw, fnExp, fnNext  cu.Function
	fnNextCells            cu.Function
	dTimes, dByTime, dCumw cu.DevicePtr
	dCoarse                cu.DevicePtr // every coarseSpacing-th time (kernels/temporal.cuh: kCoarse)
	uploaded, cumwBuilt    bool
	// dExp holds the exponential bias's cell sums for expKey (when
	// expBuilt).
	dExp     cu.DevicePtr
	expKey   expKey
	expBuilt bool
	// dNext holds each position's next record (kernels/temporal.cuh,
	// kNextOneCell) for the direction nextBack (when nextBuilt), with
	// one-cell flags for the cell width nextCell (0: none set).
	dNext     cu.DevicePtr
	nextBack  bool
	nextBuilt bool
	nextCell  uint64
}

// expKey is what the exponential bias's cell sums depend on.
type expKey struct {
	scale              float64
	backward, weighted bool
}

// setupTemporal loads the temporal kernels (device thread).
func (e *Engine) setupTemporal() error {
	t := &e.tmp
	var err error
	if t.fnCumw, err = e.mod.Function("temporal_cumw_build"); err != nil {
		return fmt.Errorf("gpu: kernel temporal_cumw_build: %w", err)
	}
	if t.fnExp, err = e.mod.Function("temporal_exp_build"); err != nil {
		return fmt.Errorf("gpu: kernel temporal_exp_build: %w", err)
	}
	if t.fnNext, err = e.mod.Function("temporal_next_build"); err != nil {
		return fmt.Errorf("gpu: kernel temporal_next_build: %w", err)
	}
	if t.fnNextCells, err = e.mod.Function("temporal_next_cells"); err != nil {
		return fmt.Errorf("gpu: kernel temporal_next_cells: %w", err)
	}
	for b, names := range temporalKernels {
		for w, name := range names {
			kn := "walk_temporal_n2v" + name[len("walk_temporal"):]
			if t.fnN2V[b][w], err = e.mod.Function(kn); err != nil {
				return fmt.Errorf("gpu: kernel %s: %w", kn, err)
			}
			if t.occN2V[b][w], err = t.fnN2V[b][w].MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
				return fmt.Errorf("gpu: occupancy of %s: %w", kn, err)
			}
			for v, suffix := range []string{"", "_full"} {
				kn := name + suffix
				if t.fn[b][w][v], err = e.mod.Function(kn); err != nil {
					return fmt.Errorf("gpu: kernel %s: %w", kn, err)
				}
				if t.occ[b][w][v], err = t.fn[b][w][v].MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
					return fmt.Errorf("gpu: occupancy of %s: %w", kn, err)
				}
			}
		}
	}
	return nil
}

// temporalTables uploads Times and ByTime once and, for a weighted
// algorithm, builds the prefix sums once (device thread).
func (e *Engine) temporalTables(alg walk.Algorithm) error {
	if err := temporalSupported(alg, e.placed == nil && e.streamed == nil && e.cfg.stripes == nil); err != nil {
		return fmt.Errorf("gpu: %w", err) // Run refused it already; kept for any other caller
	}
	t := &e.tmp
	g := e.g
	E := g.NumEdges()
	t0 := time.Now()
	built := false
	if !t.uploaded && E > 0 {
		var err error
		if t.dTimes, err = upload(e, "temporal.times", g.Times); err != nil {
			return err
		}
		if t.dByTime, err = upload(e, "temporal.bytime", g.ByTime); err != nil {
			e.free("temporal.times", &t.dTimes)
			return err
		}
		c := walk.CoarseTimes(g.Times)
		if t.dCoarse, err = upload(e, "temporal.coarse", c); err != nil {
			e.free("temporal.times", &t.dTimes)
			e.free("temporal.bytime", &t.dByTime)
			return err
		}
		t.uploaded, built = true, true
		e.tableBytes += E*12 + int64(len(c))*8
	}
	// A position must fit a record's 31 bits (the 32nd is the one-cell
	// flag); larger graphs search every step.
	if E > 0 && E <= maxNextEdges && (!t.nextBuilt || t.nextBack != alg.Time.Backward) {
		if err := e.buildNext(alg.Time.Backward); err != nil {
			return err
		}
		built = true
	}
	if alg.Time.Bias == walk.TimeExponential && E > 0 {
		k := expKey{alg.Time.Scale, alg.Time.Backward, alg.Weighted}
		if !t.expBuilt || t.expKey != k {
			if err := e.buildExpSums(k); err != nil {
				return err
			}
			built = true
		}
		if G := walk.ExpCell(k.scale); t.nextBuilt && t.nextCell != G {
			if err := e.flagNextCells(G); err != nil {
				return err
			}
			built = true
		}
	} else if alg.Weighted && !t.cumwBuilt && E > 0 {
		p, err := e.alloc("temporal.cumw", E*8)
		if err != nil {
			return err
		}
		nv := uint64(g.NumVertices())
		blocks := int(min((nv+tableThreads-1)/tableThreads, uint64(e.numSM*16)))
		args := []uint64{uint64(e.dOffsets), uint64(e.dWeights), uint64(t.dByTime), uint64(p), nv}
		if err := launch(t.fnCumw, blocks, tableThreads, cu.Stream{}, args); err != nil {
			e.free("temporal.cumw", &p)
			return fmt.Errorf("gpu: temporal_cumw_build: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			e.free("temporal.cumw", &p)
			return fmt.Errorf("gpu: temporal_cumw_build: %w", err)
		}
		t.dCumw, t.cumwBuilt, built = p, true, true
		e.tableBytes += E * 8
	}
	if built {
		e.tableBuild += time.Since(t0)
		e.cfg.logger.Info("gpu temporal tables ready", "graph", g.Name, "weighted", alg.Weighted, "duration", time.Since(t0))
	}
	return nil
}

// buildExpSums builds the exponential bias's cell sums for k in place of
// any others (device thread): the previous group's kernels are done by
// the time a group prepares its tables.
func (e *Engine) buildExpSums(k expKey) error {
	t := &e.tmp
	E := e.g.NumEdges()
	if t.expBuilt {
		e.free("temporal.exp", &t.dExp)
		t.expBuilt = false
		e.tableBytes -= E * 8
	}
	p, err := e.alloc("temporal.exp", E*8)
	if err != nil {
		return err
	}
	nv := uint64(e.g.NumVertices())
	const warpsPerBlock = tableThreads / 32
	blocks := int(min((nv+warpsPerBlock-1)/warpsPerBlock, uint64(e.numSM*32)))
	var weights uint64
	if k.weighted {
		weights = uint64(e.dWeights)
	}
	var back uint64
	if k.backward {
		back = 1
	}
	args := []uint64{uint64(e.dOffsets), uint64(t.dTimes), uint64(t.dByTime), weights, uint64(p), nv,
		walk.ExpCell(k.scale), math.Float64bits(k.scale), back}
	if err := launch(t.fnExp, blocks, tableThreads, cu.Stream{}, args); err != nil {
		e.free("temporal.exp", &p)
		return fmt.Errorf("gpu: temporal_exp_build: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		e.free("temporal.exp", &p)
		return fmt.Errorf("gpu: temporal_exp_build: %w", err)
	}
	t.dExp, t.expKey, t.expBuilt = p, k, true
	e.tableBytes += E * 8
	return nil
}

// buildNext builds the next table for direction backward in place of any
// other (device thread).
func (e *Engine) buildNext(backward bool) error {
	t := &e.tmp
	E := e.g.NumEdges()
	if t.nextBuilt {
		e.free("temporal.next", &t.dNext)
		t.nextBuilt = false
		e.tableBytes -= E * 16
	}
	p, err := e.alloc("temporal.next", E*16)
	if err != nil {
		return err
	}
	nv := uint64(e.g.NumVertices())
	const warpsPerBlock = tableThreads / 32
	blocks := int(min((nv+warpsPerBlock-1)/warpsPerBlock, uint64(e.numSM*32)))
	var back uint64
	if backward {
		back = 1
	}
	args := []uint64{uint64(e.dOffsets), uint64(e.dTargets), uint64(t.dTimes), uint64(t.dCoarse), uint64(t.dByTime),
		uint64(p), nv, back}
	if err := launch(t.fnNext, blocks, tableThreads, cu.Stream{}, args); err != nil {
		e.free("temporal.next", &p)
		return fmt.Errorf("gpu: temporal_next_build: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		e.free("temporal.next", &p)
		return fmt.Errorf("gpu: temporal_next_build: %w", err)
	}
	t.dNext, t.nextBack, t.nextBuilt, t.nextCell = p, backward, true, 0
	e.tableBytes += E * 16
	return nil
}

// maxNextEdges is the most edges a graph may have for the next records:
// positions in 31 bits.
const maxNextEdges = 1<<31 - 1

// flagNextCells sets the next records' one-cell flags for the exponential
// bias's cell width G (device thread).
func (e *Engine) flagNextCells(G uint64) error {
	t := &e.tmp
	E := uint64(e.g.NumEdges())
	blocks := int(min((E+tableThreads-1)/tableThreads, uint64(e.numSM*32)))
	var back uint64
	if t.nextBack {
		back = 1
	}
	args := []uint64{uint64(t.dTimes), uint64(t.dNext), E, G, back}
	if err := launch(t.fnNextCells, blocks, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: temporal_next_cells: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: temporal_next_cells: %w", err)
	}
	t.nextCell = G
	return nil
}

// releaseTemporal frees the temporal arrays (device thread).
func (e *Engine) releaseTemporal() {
	t := &e.tmp
	e.free("temporal.times", &t.dTimes)
	e.free("temporal.bytime", &t.dByTime)
	e.free("temporal.cumw", &t.dCumw)
	e.free("temporal.coarse", &t.dCoarse)
	e.free("temporal.exp", &t.dExp)
	e.free("temporal.next", &t.dNext)
	t.uploaded, t.cumwBuilt, t.expBuilt, t.nextBuilt = false, false, false, false
}

// ensureTimes gives every slot its times buffers, a device row pool
// parallel to the result pool and its pinned twin, for runs with
// WithTimes (device thread). A slot keeps them until it is replaced.
func (e *Engine) ensureTimes() error {
	for _, s := range e.slots {
		if s == nil || s.dTimes != 0 {
			continue
		}
		p, err := e.alloc(s.name+".times", s.capWords*8)
		if err != nil {
			return fmt.Errorf("gpu: times of the walks (with_times): %w", err)
		}
		h, err := e.hostAlloc(s.capWords * 8)
		if err != nil {
			e.free(s.name+".times", &p)
			return fmt.Errorf("gpu: times of the walks (with_times): %w", err)
		}
		s.hPtrs = append(s.hPtrs, h)
		s.dTimes, s.hTimes = p, unsafe.Slice((*int64)(h), s.capWords)
	}
	return nil
}

// wantsTimes reports whether any job of grp asked for the walks' times.
func wantsTimes(grp []*walk.Job) bool {
	for _, j := range grp {
		if j.WithTimes {
			return true
		}
	}
	return false
}

// prepareTemporal readies the engine for group grp of temporal walks:
// the tables before the slots are sized, the times buffers after.
func (e *Engine) prepareTemporal(grp []*walk.Job) error {
	return e.dev.do(func() error { return e.temporalTables(grp[0].Algorithm) })
}

// temporalKernel is the kernel, block and occupancy for alg.
func (e *Engine) temporalKernel(alg walk.Algorithm) (cu.Function, int, int) {
	w := 0
	if alg.Weighted {
		w = 1
	}
	v := 1
	if e.cfg.threadVariant >= 0 {
		v = e.cfg.threadVariant
	}
	b := int(alg.Time.Bias)
	if alg.P != 0 {
		return e.tmp.fnN2V[b][w], threadBlock, e.tmp.occN2V[b][w]
	}
	return e.tmp.fn[b][w][v], threadBlock, e.tmp.occ[b][w][v]
}

// cutTimes fills c.Times from slot s's times rows for piece pc.
func cutTimes(s *batchSlot, pc *piece, c *walk.Chunk, lens []uint32, nv int64) {
	c.Times = make([]int64, nv)
	at := 0
	for k, l := range lens {
		row := (pc.row + int64(k)) * s.timesStride
		at += copy(c.Times[at:], s.hTimes[row:row+int64(l)])
	}
}
