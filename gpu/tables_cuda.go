//go:build cuda

package gpu

import (
	"fmt"
	"strings"
	"time"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// kernel looks name up in the module that holds it: the pack kernels in
// kernels/pack.cu's, the others in kernels/walk.cu's (device thread).
func (e *Engine) kernel(name string) (cu.Function, error) {
	if strings.HasPrefix(name, "pack_") {
		return e.packMod.Function(name)
	}
	return e.mod.Function(name)
}

// setup runs on the device thread.
func (e *Engine) setup() error {
	var err error
	if e.mod, err = cu.LoadData(kernelImage); err != nil {
		return fmt.Errorf("%w: load kernels: %v", ErrUnavailable, err)
	}
	if e.packMod, err = cu.LoadData(packImage); err != nil {
		return fmt.Errorf("%w: load pack kernels: %v", ErrUnavailable, err)
	}
	for _, k := range []struct {
		fn   *cu.Function
		name string
	}{{&e.fnAlias, "alias_build"}, {&e.fnSegs, "label_tables_build"},
		{&e.fnPackPartials, "pack_partials"}, {&e.fnPackScan, "pack_scan_partials"}, {&e.fnPackRows, "pack_rows"}} {
		if *k.fn, err = e.kernel(k.name); err != nil {
			return fmt.Errorf("gpu: kernel %s: %w", k.name, err)
		}
	}
	for pl, placedSuffix := range []string{"", "_placed"} {
		for m, name := range modeKernels {
			for v, suffix := range []string{"", "_full"} {
				kn := name + placedSuffix + suffix
				fn, err := e.mod.Function(kn)
				if err != nil {
					return fmt.Errorf("gpu: kernel %s: %w", kn, err)
				}
				e.fnThread[pl][m][v] = fn
				if e.occThread[pl][m][v], err = fn.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
					return fmt.Errorf("gpu: occupancy of %s: %w", kn, err)
				}
			}
		}
	}
	if err := e.setupTemporal(); err != nil {
		return err
	}
	if err := e.setupOverlay(); err != nil {
		return err
	}
	if err := e.setupTimed(); err != nil {
		return err
	}
	if e.numSM, err = e.dev.dev.Attribute(cu.MultiprocessorCount); err != nil {
		return fmt.Errorf("gpu: multiprocessor count: %w", err)
	}
	for d, sampler := range []string{"zprs", "dprs"} {
		for n, suffix := range []string{"", "_n2v"} {
			name := "walk_reservoir_" + sampler + suffix
			fn, err := e.mod.Function(name)
			if err != nil {
				return fmt.Errorf("gpu: kernel %s: %w", name, err)
			}
			e.fnReservoir[d][n] = fn
			if e.occReservoir[d][n], err = fn.MaxActiveBlocksPerMultiProcessor(reservoirBlock, 0); err != nil {
				return fmt.Errorf("gpu: occupancy of %s: %w", name, err)
			}
		}
	}
	if e.cfg.stripes != nil {
		return e.setupStriped()
	}
	g := e.g
	free, err := e.memFree()
	if err != nil {
		return err
	}
	fits := graphPlan(shapeOf(g), e.cfg.reserveBytes).need() <= free
	// Under auto a graph that does not fit (or a device fraction below
	// 1) gets both plans, and each batch the faster (streamchoice.go).
	both := e.cfg.stream == StreamAuto && (!fits || e.cfg.deviceFraction < 1)
	if e.cfg.stream == StreamOn || both {
		// Too large for the device (or asked to): partitions are
		// streamed to the walkers (stream.go).
		budget := free - e.cfg.reserveBytes
		if both && !fits {
			// Half of what the device holds for the graph; the
			// placement plan gets the rest (the offsets are shared).
			budget /= 2
		}
		if e.cfg.deviceFraction < 1 {
			budget = min(budget, int64(e.cfg.deviceFraction*float64(StreamBytesNeeded(g))))
		}
		if err := e.setupStreamed(budget); err != nil {
			return err
		}
		if sp := e.streamed.plan; both && sp.Streamed() > 0 && sp.Disk == nil {
			return e.setupBoth()
		}
		return nil
	}
	if e.cfg.deviceFraction < 1 || !fits {
		// Too large for the device (or asked to be split): part of the
		// edges go to mapped host memory.
		return e.setupPlaced(free - e.cfg.reserveBytes)
	}
	if e.dOffsets, err = upload(e, "graph.offsets", g.Offsets); err != nil {
		return err
	}
	if e.dTargets, err = upload(e, "graph.targets", g.Targets); err != nil {
		return err
	}
	if e.dWeights, err = upload(e, "graph.weights", g.Weights); err != nil {
		return err
	}
	if e.dLabels, err = upload(e, "graph.labels", g.Labels); err != nil {
		return err
	}
	e.graphBytes = int64(len(g.Offsets))*8 + int64(len(g.Targets))*4 + int64(len(g.Weights))*4 + int64(len(g.Labels))
	if g.Weighted() && g.NumEdges() > 0 {
		return e.buildAlias()
	}
	return nil
}

// buildAlias builds the packed alias tables of the graph's adjacency lists
// on the device.
func (e *Engine) buildAlias() error {
	t0 := time.Now()
	E := e.g.NumEdges()
	table, err := e.alloc("alias.table", E*16)
	if err != nil {
		return err
	}
	if err := e.aliasSegments(e.dOffsets, e.dTargets, e.dWeights, table, uint64(e.g.NumVertices())); err != nil {
		e.free("alias.table", &table)
		return err
	}
	e.dAlias = table
	e.tableBytes += E * 16
	e.tableBuild += time.Since(t0)
	return nil
}

// aliasSegments runs alias_build over nseg segments (segment s is
// [offsets[s], offsets[s+1]) of targets and weights) into table, with
// float64 scratch that is freed afterwards (device thread).
func (e *Engine) aliasSegments(offsets, targets, weights, table cu.DevicePtr, nseg uint64) error {
	E := e.g.NumEdges()
	// A partitioned engine's scratch is striped like the tables: a graph
	// that needs several devices has no room for it on one.
	scaled, err := e.tableAlloc("alias.scratch.scaled", E*8)
	if err != nil {
		return err
	}
	defer e.tableFree("alias.scratch.scaled", &scaled)
	stack, err := e.tableAlloc("alias.scratch.lists", E*4)
	if err != nil {
		return err
	}
	defer e.tableFree("alias.scratch.lists", &stack)
	blocks := int(min((nseg+tableThreads-1)/tableThreads, uint64(e.numSM*16)))
	args := []uint64{uint64(offsets), uint64(targets), uint64(weights), uint64(table), uint64(scaled), uint64(stack), nseg}
	if err := launch(e.fnAlias, blocks, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: alias_build: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: alias_build: %w", err)
	}
	return nil
}

// useLabelTables says whether a MetaPath algorithm runs on the label tables
// (walk.UsesLabelTables, the rule the CPU engine follows too).
func (e *Engine) useLabelTables(a walk.Algorithm) bool { return walk.UsesLabelTables(a, e.g) }

// labelTables builds, once, each vertex's edges regrouped by label
// (label_tables_build) and, for a weighted graph, an alias table per
// (vertex, label) segment (alias_build over segments). Device thread.
func (e *Engine) labelTables() (err error) {
	if e.segBuilt {
		return nil
	}
	if e.placed != nil && !e.placed.hubs {
		return e.labelTablesPlaced()
	}
	if s := e.cfg.stripes; s != nil {
		// One build for the group: the first engine to need the tables
		// builds them into the stripes, the others find them there.
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.labelsBuilt {
			return e.useStripedLabels()
		}
		defer func() {
			if err == nil {
				s.labelsBuilt = true
				err = e.useStripedLabels()
			}
		}()
	}
	t0 := time.Now()
	nl := uint64(e.g.NumLabels)
	nv := uint64(e.g.NumVertices())
	E := e.g.NumEdges()
	if e.cfg.stripes == nil {
		free, err := e.memFree()
		if err != nil {
			return err
		}
		if err := labelTablePlan(shapeOf(e.g)).check(free); err != nil {
			return err
		}
	}
	// Built in locals and published only once complete: a failure frees
	// them all, and the next MetaPath run starts over.
	var segOffsets, segTargets, segAlias, segWeights cu.DevicePtr
	defer func() {
		e.tableFree("labels.scratch.weights", &segWeights)
		if err != nil {
			e.tableFree("labels.offsets", &segOffsets)
			e.tableFree("labels.targets", &segTargets)
			e.tableFree("labels.alias", &segAlias)
		}
	}()
	if segOffsets, err = e.tableAlloc("labels.offsets", int64(nv*nl+1)*8); err != nil {
		return err
	}
	if segTargets, err = e.tableAlloc("labels.targets", E*4); err != nil {
		return err
	}
	if e.g.Weighted() {
		if segWeights, err = e.tableAlloc("labels.scratch.weights", E*4); err != nil {
			return err
		}
		if segAlias, err = e.tableAlloc("labels.alias", E*16); err != nil {
			return err
		}
	}
	blocks := int(min((nv+tableThreads-1)/tableThreads, uint64(e.numSM*16)))
	targets, weights, labels := e.wholeArrays()
	args := []uint64{uint64(e.dOffsets), uint64(targets), uint64(weights), uint64(labels),
		uint64(segOffsets), uint64(segTargets), uint64(segWeights), nv, nl}
	if err := launch(e.fnSegs, blocks, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: label_tables_build: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: label_tables_build: %w", err)
	}
	bytes := int64(nv*nl+1)*8 + E*4
	if e.g.Weighted() {
		if err := e.aliasSegments(segOffsets, segTargets, segWeights, segAlias, nv*nl); err != nil {
			return err
		}
		bytes += E * 16
	}
	e.dSegOffsets, e.dSegTargets, e.dSegAlias = segOffsets, segTargets, segAlias
	e.tableBytes += bytes
	e.segBuilt = true
	e.tableBuild += time.Since(t0)
	e.cfg.logger.Info("gpu metapath label tables built", "graph", e.g.Name, "labels", nl, "duration", time.Since(t0))
	return nil
}
