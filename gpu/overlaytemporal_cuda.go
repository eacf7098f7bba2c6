//go:build cuda

package gpu

import (
	"fmt"
	"math"
	"time"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// timedState is the walk_overlay_temporal_* kernels and the timed lists
// (overlaytemporal.go) of the snapshot a temporal job walked last.
type timedState struct {
	fn                  [3][2]cu.Function // [walk.TimeBias][weighted]
	occ                 [3][2]int
	fnN2V               [3][2]cu.Function // temporal Node2Vec, walk_overlay_temporal_n2v_*
	occN2V              [3][2]int
	fnNext, fnNextCells cu.Function
	// snap and weighted say which lists are on the device (snap nil:
	// none); n the lists, edges their length.
	snap     walk.Overlay
	weighted bool
	n        int
	edges    int64
	bytes    int64
	// The lists' arrays; cumw (weighted, uniform and linear) and exp (the
	// exponential bias's cell sums for expKey) are built from them when a
	// launch first needs them.
	dIndex, dOff, dTimes, dCoarse, dTargets, dWeights, dByTime cu.DevicePtr
	dCumw, dExp                                                cu.DevicePtr
	nIndex                                                     int
	cumwBuilt, expBuilt                                        bool
	expKey                                                     expKey
	// dNext holds each list position's next record (timed_next_build)
	// for direction nextBack (when nextBuilt), with one-cell flags for
	// the cell width nextCell (0: none set), as the base's next table.
	dNext     cu.DevicePtr
	nextBack  bool
	nextBuilt bool
	nextCell  uint64
}

var _ walk.SnapshotHolder = (*Engine)(nil)

// HoldsSnapshot implements walk.SnapshotHolder: a temporal job on a
// snapshot other than the timed lists' gathers its lists again.
func (e *Engine) HoldsSnapshot(a walk.Algorithm) bool { return a.Kind == walk.Temporal }

// timedKernels names walk_overlay_temporal_* by [walk.TimeBias][weighted].
var timedKernels = [3][2]string{
	{"walk_overlay_temporal_uniform", "walk_overlay_temporal_uniform_w"},
	{"walk_overlay_temporal_linear", "walk_overlay_temporal_linear_w"},
	{"walk_overlay_temporal_exp", "walk_overlay_temporal_exp_w"},
}

// setupTimed loads the kernels (device thread).
func (e *Engine) setupTimed() error {
	t := &e.tl
	var err error
	if t.fnNext, err = e.mod.Function("timed_next_build"); err != nil {
		return fmt.Errorf("gpu: kernel timed_next_build: %w", err)
	}
	if t.fnNextCells, err = e.mod.Function("timed_next_cells"); err != nil {
		return fmt.Errorf("gpu: kernel timed_next_cells: %w", err)
	}
	for b, names := range timedKernels {
		for w, name := range names {
			for _, k := range []struct {
				name string
				fn   *cu.Function
				occ  *int
			}{
				{name, &t.fn[b][w], &t.occ[b][w]},
				{"walk_overlay_temporal_n2v" + name[len("walk_overlay_temporal"):], &t.fnN2V[b][w], &t.occN2V[b][w]},
			} {
				if *k.fn, err = e.mod.Function(k.name); err != nil {
					return fmt.Errorf("gpu: kernel %s: %w", k.name, err)
				}
				if *k.occ, err = k.fn.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
					return fmt.Errorf("gpu: occupancy of %s: %w", k.name, err)
				}
			}
		}
	}
	return nil
}

// timedNames are the lists' allocations' names.
var timedNames = [...]string{"timed.index", "timed.off", "timed.times", "timed.coarse", "timed.targets", "timed.weights", "timed.bytime", "timed.cumw", "timed.exp", "timed.next"}

// releaseTimed frees the lists' arrays (device thread).
func (e *Engine) releaseTimed() {
	t := &e.tl
	for i, p := range []*cu.DevicePtr{&t.dIndex, &t.dOff, &t.dTimes, &t.dCoarse, &t.dTargets, &t.dWeights, &t.dByTime, &t.dCumw, &t.dExp, &t.dNext} {
		e.free(timedNames[i], p)
	}
	t.snap, t.cumwBuilt, t.expBuilt, t.nextBuilt, t.nextCell = nil, false, false, false, 0
	e.tableBytes -= t.bytes
	t.bytes = 0
}

// ensureTimedLists makes ov's timed lists, and the table alg's draws read
// from them, the ones on the device: gathered on the host and copied when
// ov is not the snapshot of the lists there (or they lack the weights alg
// needs). The base's temporal tables are ready (prepareTemporal).
func (e *Engine) ensureTimedLists(ov walk.Overlay, alg walk.Algorithm) error {
	tov, ok := ov.(walk.TimedOverlay)
	if !ok {
		return fmt.Errorf("gpu: %w: temporal walks on a live graph's delta need its edge times (a timed base graph)", walk.ErrInvalidAlgorithm)
	}
	t := &e.tl
	if !sameOverlay(t.snap, ov) || alg.Weighted && !t.weighted {
		t0 := time.Now()
		l, err := buildTimedLists(tov, walk.IndexOf(ov), walk.TimedBaseOf(e.g), alg.Weighted)
		if err != nil {
			return err
		}
		t1 := time.Now()
		if err := e.dev.do(func() error {
			e.releaseTimed()
			return e.uploadTimed(l)
		}); err != nil {
			return err
		}
		t.snap, t.weighted = ov, alg.Weighted
		e.stats.DeltaBytes += l.bytes()
		e.stats.DeltaUpload += time.Since(t0)
		e.cfg.logger.Debug("gpu live graph timed lists copied", "graph", e.g.Name, "lists", t.n, "edges", t.edges,
			"bytes", l.bytes(), "gather", t1.Sub(t0), "copy", time.Since(t1))
	}
	return e.dev.do(func() error { return e.timedTables(alg) })
}

// uploadTimed copies l to the device (device thread); on an error what it
// copied is freed.
func (e *Engine) uploadTimed(l *timedLists) (err error) {
	t := &e.tl
	defer func() {
		if err != nil {
			e.releaseTimed()
		}
	}()
	if t.dIndex, err = upload(e, timedNames[0], l.index); err != nil {
		return err
	}
	if t.dOff, err = upload(e, timedNames[1], l.off); err != nil {
		return err
	}
	if t.dTimes, err = upload(e, timedNames[2], l.times); err != nil {
		return err
	}
	if t.dCoarse, err = upload(e, timedNames[3], walk.CoarseTimes(l.times)); err != nil {
		return err
	}
	if t.dTargets, err = upload(e, timedNames[4], l.targets); err != nil {
		return err
	}
	if t.dWeights, err = upload(e, timedNames[5], l.weights); err != nil {
		return err
	}
	if t.dByTime, err = upload(e, timedNames[6], l.byTime); err != nil {
		return err
	}
	t.n, t.edges, t.nIndex = len(l.off)-1, l.edges(), len(l.index)
	t.bytes = l.bytes()
	e.tableBytes += t.bytes
	return nil
}

// timedTables builds the lists' prefix sums (weighted, uniform and linear)
// or cell sums (exponential, for alg's scale, direction and weighting)
// with the base's kernels, over the lists as vertices (device thread).
func (e *Engine) timedTables(alg walk.Algorithm) error {
	t := &e.tl
	E := t.edges
	if E == 0 {
		return nil
	}
	nv := uint64(t.n)
	const warpsPerBlock = tableThreads / 32
	// The next records hold positions of the lists and of the base in 31
	// bits, as the base's do: where the base has none, neither do the
	// lists (every step searches).
	bt := &e.tmp
	if bt.nextBuilt && bt.nextBack == alg.Time.Backward && E <= maxNextEdges && (!t.nextBuilt || t.nextBack != alg.Time.Backward) {
		if t.dNext == 0 {
			p, err := e.alloc(timedNames[9], E*16)
			if err != nil {
				return err
			}
			t.dNext = p
			t.bytes += E * 16
			e.tableBytes += E * 16
		}
		var back uint64
		if alg.Time.Backward {
			back = 1
		}
		blocks := int(min((nv+warpsPerBlock-1)/warpsPerBlock, uint64(e.numSM*32)))
		args := []uint64{uint64(t.dIndex), uint64(t.nIndex), uint64(e.g.NumVertices()), uint64(t.dOff), uint64(t.dTimes),
			uint64(t.dCoarse), uint64(t.dTargets), uint64(e.dOffsets), uint64(bt.dTimes), uint64(bt.dCoarse), uint64(t.dNext), nv, back}
		if err := launch(t.fnNext, blocks, tableThreads, cu.Stream{}, args); err != nil {
			return fmt.Errorf("gpu: timed_next_build: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("gpu: timed_next_build: %w", err)
		}
		t.nextBack, t.nextBuilt, t.nextCell = alg.Time.Backward, true, 0
	}
	if G := walk.ExpCell(alg.Time.Scale); alg.Time.Bias == walk.TimeExponential && t.nextBuilt && t.nextCell != G {
		var back uint64
		if t.nextBack {
			back = 1
		}
		blocks := int(min((uint64(E)+tableThreads-1)/tableThreads, uint64(e.numSM*32)))
		args := []uint64{uint64(t.dIndex), uint64(t.nIndex), uint64(t.dTimes), uint64(bt.dTimes), uint64(t.dNext), uint64(E), G, back}
		if err := launch(t.fnNextCells, blocks, tableThreads, cu.Stream{}, args); err != nil {
			return fmt.Errorf("gpu: timed_next_cells: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("gpu: timed_next_cells: %w", err)
		}
		t.nextCell = G
	}
	switch {
	case alg.Time.Bias == walk.TimeExponential:
		k := expKey{alg.Time.Scale, alg.Time.Backward, alg.Weighted}
		if t.expBuilt && t.expKey == k {
			return nil
		}
		if t.dExp == 0 {
			p, err := e.alloc(timedNames[8], E*8)
			if err != nil {
				return err
			}
			t.dExp = p
			t.bytes += E * 8
			e.tableBytes += E * 8
		}
		var weights, back uint64
		if k.weighted {
			weights = uint64(t.dWeights)
		}
		if k.backward {
			back = 1
		}
		blocks := int(min((nv+warpsPerBlock-1)/warpsPerBlock, uint64(e.numSM*32)))
		args := []uint64{uint64(t.dOff), uint64(t.dTimes), uint64(t.dByTime), weights, uint64(t.dExp), nv,
			walk.ExpCell(k.scale), math.Float64bits(k.scale), back}
		if err := launch(e.tmp.fnExp, blocks, tableThreads, cu.Stream{}, args); err != nil {
			return fmt.Errorf("gpu: temporal_exp_build on the timed lists: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("gpu: temporal_exp_build on the timed lists: %w", err)
		}
		t.expKey, t.expBuilt = k, true
	case alg.Weighted && !t.cumwBuilt:
		p, err := e.alloc(timedNames[7], E*8)
		if err != nil {
			return err
		}
		t.dCumw = p
		t.bytes += E * 8
		e.tableBytes += E * 8
		blocks := int(min((nv+tableThreads-1)/tableThreads, uint64(e.numSM*16)))
		args := []uint64{uint64(t.dOff), uint64(t.dWeights), uint64(t.dByTime), uint64(t.dCumw), nv}
		if err := launch(e.tmp.fnCumw, blocks, tableThreads, cu.Stream{}, args); err != nil {
			return fmt.Errorf("gpu: temporal_cumw_build on the timed lists: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("gpu: temporal_cumw_build on the timed lists: %w", err)
		}
		t.cumwBuilt = true
	}
	return nil
}

// timedKernel is alg's walk_overlay_temporal kernel, its launch over n
// tasks and its arguments after the launch parameters (TimedLists'
// order, kernels/overlaytemporal.cuh; temporal Node2Vec's then the
// delta's and its edge set's, walk_overlay_temporal_n2v_*).
func (e *Engine) timedKernel(alg walk.Algorithm, n int64) (fn cu.Function, block, grid int, args []uint64) {
	t := &e.tl
	w := 0
	if alg.Weighted {
		w = 1
	}
	fn, occ := t.fn[alg.Time.Bias][w], t.occ[alg.Time.Bias][w]
	if alg.P != 0 {
		fn, occ = t.fnN2V[alg.Time.Bias][w], t.occN2V[alg.Time.Bias][w]
	}
	grid = int(min(int64(e.numSM*max(occ, 1)), (n+threadBlock-1)/threadBlock))
	var weights uint64
	if alg.Weighted {
		weights = uint64(t.dWeights)
	}
	var next uint64
	if t.nextBuilt && t.nextBack == alg.Time.Backward && e.tmp.nextBuilt && e.tmp.nextBack == alg.Time.Backward {
		next = uint64(t.dNext)
	}
	args = []uint64{uint64(t.dIndex), uint64(t.nIndex), uint64(e.g.NumVertices()), uint64(t.dOff), uint64(t.dTimes),
		uint64(t.dCoarse), uint64(t.dTargets), weights, uint64(t.dCumw), uint64(t.dExp), next}
	if alg.P != 0 {
		// The delta and its edge set, for the classes in the snapshot.
		args = append(append(args, e.overlayArgs(alg.Weighted)...), e.edgeSetArgs()...)
	}
	return fn, threadBlock, grid, args
}
