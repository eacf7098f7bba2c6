//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Available reports whether a CUDA device can be used. (In a cuda build the
// cu package has already initialised the driver: a process without one
// exits at start, which is cu's behaviour and why all of this sits behind
// the cuda tag, and why the GPU image starts this build only after its
// `gpu-probe` passed; see cmd/walkstage-entrypoint.)
func Available() error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no CUDA device", ErrUnavailable)
	}
	return nil
}

// Probe opens device ordinal, waits for it and round-trips a word through
// its memory, then lets it go: whether this process can run the engine at
// all (the image's entrypoint runs it through `walkstage gpu-probe` before
// it picks the CUDA binary).
func Probe(ordinal int) error {
	d, err := openDevice(ordinal)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.do(probe); err != nil {
		return fmt.Errorf("%w: device %d: %v", ErrUnavailable, ordinal, err)
	}
	return nil
}

// Allocation is one device memory allocation of the engine.
type Allocation struct {
	Name  string
	Bytes int64
}

// Engine is the CUDA walk engine. The graph (and its alias tables, for a
// weighted graph) are uploaded once by New and stay resident; each Run
// streams its walks through two batch slots on two streams.
type Engine struct {
	g   *graph.Graph
	cfg config
	dev *device

	mod                                    cu.Module
	fnAlias, fnSegs                        cu.Function
	fnPackPartials, fnPackScan, fnPackRows cu.Function
	numSM                                  int
	// reservoir kernels: [dprs][node2vec].
	fnReservoir  [2][2]cu.Function
	occReservoir [2][2]int
	// thread kernels by mode: [mode][0] compiler's register budget,
	// [mode][1] capped for full occupancy.
	fnThread  [numModes][2]cu.Function
	occThread [numModes][2]int
	// MetaPath label tables, built on first use (labelTables).
	dSegOffsets, dSegTargets, dSegAlias cu.DevicePtr
	segBuilt                            bool
	dOffsets, dTargets, dWeights        cu.DevicePtr
	dLabels, dAlias                     cu.DevicePtr
	graphBytes, tableBytes              int64
	tableBuild                          time.Duration
	slots                               [2]*batchSlot
	allocs                              map[string]int64
	mu                                  sync.Mutex    // one Run at a time
	stats                               walk.RunStats // the Run in progress (Run's goroutine only)
	// last is the last finished Run's stats, under its own lock so an emit
	// callback may read it while Run holds mu.
	lastMu sync.Mutex
	last   walk.RunStats
	closed bool
	// broken is set, wrapping walk.ErrEngineBroken, once a sticky CUDA
	// error or a failed probe says the context cannot run again; every
	// later Run returns it.
	broken error
	// liveDev and liveHost count device and pinned allocations not yet
	// freed (device thread), for the leak checks of the tests.
	liveDev, liveHost int
	// inject makes chosen allocations or copies fail (faults_cuda_test.go
	// only; nil otherwise).
	inject *faults
}

var _ walk.Engine = (*Engine)(nil)
var _ walk.StatsReporter = (*Engine)(nil)

// New uploads g to the device, builds the alias tables there when g is
// weighted, and returns the engine.
func New(g *graph.Graph, opts ...Option) (walk.Engine, error) {
	return openEngine(g, opts...)
}

// openEngine is New with the concrete type, for the tests (Allocations, fault injection).
func openEngine(g *graph.Graph, opts ...Option) (*Engine, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.warpThreshold == 0:
		return nil, errors.New("gpu: warp threshold must be positive")
	case cfg.hostBufferBytes < 1<<20 || cfg.hostBufferBytes > 8<<30:
		return nil, fmt.Errorf("gpu: host buffer of %d bytes is outside [1 MiB, 8 GiB]", cfg.hostBufferBytes)
	case cfg.logger == nil:
		return nil, errors.New("gpu: nil logger")
	case cfg.chunkWalks < 1:
		return nil, fmt.Errorf("gpu: chunk of %d walks", cfg.chunkWalks)
	case cfg.maxBatchWalks < 0 || cfg.reserveBytes < 0:
		return nil, errors.New("gpu: negative batch or reserve size")
	}
	if g.NumVertices() == 0 {
		return nil, errors.New("gpu: empty graph")
	}
	dev, err := openDevice(cfg.device)
	if err != nil {
		return nil, err
	}
	e := &Engine{g: g, cfg: cfg, dev: dev, allocs: map[string]int64{}, inject: cfg.inject}
	if err := dev.do(e.setup); err != nil {
		_ = e.Close()
		return nil, err
	}
	if cfg.prepareLength > 0 {
		if cfg.prepareLength > walk.MaxLength {
			_ = e.Close()
			return nil, fmt.Errorf("gpu: prepared length %d beyond %d", cfg.prepareLength, walk.MaxLength)
		}
		stride := rowPitch(cfg.prepareLength)
		per, err := e.batchWalks(stride, 1<<31-1)
		if err == nil {
			err = dev.do(func() error { return e.ensureSlots(per, per*stride, 1) })
		}
		if err != nil {
			_ = e.Close()
			return nil, err
		}
	}
	e.cfg.logger.Info("gpu engine ready", "graph", g.Name, "device", cfg.device, "multiprocessors", e.numSM,
		"graph_bytes", e.graphBytes, "table_bytes", e.tableBytes, "table_build", e.tableBuild)
	return e, nil
}

// alloc allocates device memory and records it under name (device
// thread).
func (e *Engine) alloc(name string, n int64) (cu.DevicePtr, error) {
	n = allocBytes(n)
	var p cu.DevicePtr
	var err error
	if e.inject.failAlloc() {
		err = e.inject.errOr(cu.OutOfMemory)
	} else {
		p, err = cu.MemAlloc(n)
	}
	if err != nil {
		return 0, fmt.Errorf("gpu: allocate %s (%d bytes): %w", name, n, err)
	}
	e.liveDev++
	e.allocs[name] = n
	e.cfg.logger.Debug("gpu device allocation", "name", name, "bytes", n)
	return p, nil
}

// free releases *p, if allocated, and zeroes it (device thread).
func (e *Engine) free(name string, p *cu.DevicePtr) {
	if *p != 0 {
		_ = cu.MemFree(*p)
		*p = 0
		e.liveDev--
	}
	delete(e.allocs, name)
}

// hostAlloc returns n bytes (at least 8) of pinned host memory (device
// thread).
func (e *Engine) hostAlloc(n int64) (unsafe.Pointer, error) {
	if e.inject.failAlloc() {
		return nil, fmt.Errorf("gpu: pinned host memory (%d bytes): %w", n, e.inject.errOr(cu.OutOfMemory))
	}
	p, err := hostAlloc(max(n, 8))
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	e.liveHost++
	return p, nil
}

func (e *Engine) hostFree(p unsafe.Pointer) {
	if p != nil {
		hostFree(p)
		e.liveHost--
	}
}

// The engine's memory copies, each checked (and counted by inject).
func (e *Engine) copyHtoD(dst cu.DevicePtr, src unsafe.Pointer, n int64) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyHtoD(dst, src, n)
}

func (e *Engine) copyHtoDAsync(dst cu.DevicePtr, src unsafe.Pointer, n int64, s cu.Stream) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyHtoDAsync(dst, src, n, s)
}

func (e *Engine) copyDtoHAsync(dst unsafe.Pointer, src cu.DevicePtr, n int64, s cu.Stream) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyDtoHAsync(dst, src, n, s)
}

func upload[T any](e *Engine, name string, s []T) (cu.DevicePtr, error) {
	if len(s) == 0 {
		return 0, nil
	}
	n := int64(len(s)) * int64(unsafe.Sizeof(s[0]))
	// Pad to 64 bytes (zeroed): the reservoir samplers read edges in
	// aligned 16-byte chunks that may run past the last edge.
	padded := (n + 63) &^ 63
	p, err := e.alloc(name, padded)
	if err != nil {
		return 0, err
	}
	if err := cu.MemsetD8(p, 0, padded); err != nil {
		e.free(name, &p)
		return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
	}
	if err := e.copyHtoD(p, unsafe.Pointer(&s[0]), n); err != nil {
		e.free(name, &p)
		return 0, fmt.Errorf("gpu: upload %s: %w", name, err)
	}
	return p, nil
}

// setup runs on the device thread.
func (e *Engine) setup() error {
	var err error
	if e.mod, err = cu.LoadData(kernelImage); err != nil {
		return fmt.Errorf("%w: load kernels: %v", ErrUnavailable, err)
	}
	for _, k := range []struct {
		fn   *cu.Function
		name string
	}{{&e.fnAlias, "alias_build"}, {&e.fnSegs, "label_tables_build"},
		{&e.fnPackPartials, "pack_partials"}, {&e.fnPackScan, "pack_scan_partials"}, {&e.fnPackRows, "pack_rows"}} {
		if *k.fn, err = e.mod.Function(k.name); err != nil {
			return fmt.Errorf("gpu: kernel %s: %w", k.name, err)
		}
	}
	for m, name := range modeKernels {
		for v, suffix := range []string{"", "_full"} {
			fn, err := e.mod.Function(name + suffix)
			if err != nil {
				return fmt.Errorf("gpu: kernel %s: %w", name+suffix, err)
			}
			e.fnThread[m][v] = fn
			if e.occThread[m][v], err = fn.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
				return fmt.Errorf("gpu: occupancy of %s: %w", name+suffix, err)
			}
		}
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
	g := e.g
	free, _, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("gpu: memory info: %w", err)
	}
	if err := graphPlan(shapeOf(g), e.cfg.reserveBytes).check(free); err != nil {
		return err
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
	scaled, err := e.alloc("alias.scratch.scaled", E*8)
	if err != nil {
		return err
	}
	defer e.free("alias.scratch.scaled", &scaled)
	stack, err := e.alloc("alias.scratch.lists", E*4)
	if err != nil {
		return err
	}
	defer e.free("alias.scratch.lists", &stack)
	blocks := int(min((nseg+127)/128, uint64(e.numSM*16)))
	args := []uint64{uint64(offsets), uint64(targets), uint64(weights), uint64(table), uint64(scaled), uint64(stack), nseg}
	if err := launch(e.fnAlias, blocks, 128, cu.Stream{}, args); err != nil {
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
	t0 := time.Now()
	nl := uint64(e.g.NumLabels)
	nv := uint64(e.g.NumVertices())
	E := e.g.NumEdges()
	free, _, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("gpu: memory info: %w", err)
	}
	if err := labelTablePlan(shapeOf(e.g)).check(free); err != nil {
		return err
	}
	// Built in locals and published only once complete: a failure frees
	// them all, and the next MetaPath run starts over.
	var segOffsets, segTargets, segAlias, segWeights cu.DevicePtr
	defer func() {
		e.free("labels.scratch.weights", &segWeights)
		if err != nil {
			e.free("labels.offsets", &segOffsets)
			e.free("labels.targets", &segTargets)
			e.free("labels.alias", &segAlias)
		}
	}()
	if segOffsets, err = e.alloc("labels.offsets", int64(nv*nl+1)*8); err != nil {
		return err
	}
	if segTargets, err = e.alloc("labels.targets", E*4); err != nil {
		return err
	}
	if e.g.Weighted() {
		if segWeights, err = e.alloc("labels.scratch.weights", E*4); err != nil {
			return err
		}
		if segAlias, err = e.alloc("labels.alias", E*16); err != nil {
			return err
		}
	}
	blocks := int(min((nv+127)/128, uint64(e.numSM*16)))
	args := []uint64{uint64(e.dOffsets), uint64(e.dTargets), uint64(e.dWeights), uint64(e.dLabels),
		uint64(segOffsets), uint64(segTargets), uint64(segWeights), nv, nl}
	if err := launch(e.fnSegs, blocks, 128, cu.Stream{}, args); err != nil {
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

// launch starts fn with 8-byte arguments (cu passes each parameter as 8
// bytes).
func launch(fn cu.Function, grid, block int, s cu.Stream, args []uint64) error {
	ptrs := make([]unsafe.Pointer, len(args))
	for i := range args {
		ptrs[i] = unsafe.Pointer(&args[i])
	}
	return fn.Launch(grid, 1, 1, block, 1, 1, 0, s, ptrs)
}

// Thread-kernel modes (kernels/walk.cu: Mode) and their kernels.
const (
	modeStatic = iota
	modePPR
	modeNode2Vec
	modeMetaPath
	numModes
)

var modeKernels = [numModes]string{"walk_thread_static", "walk_thread_ppr", "walk_thread_node2vec", "walk_thread_metapath"}

const (
	threadBlock    = 256 // kThreadBlock in kernels/walk.cu
	reservoirBlock = 256 // kBlockThreads in kernels/samplers.cuh
	localPoolSlots = 64  // kLocalPoolSlots in kernels/walk.cu
	packThreads    = 256 // kPackThreads in kernels/compact.cuh

)

// Name implements walk.Engine.
func (e *Engine) Name() string { return "gpu" }

// LastRunStats implements walk.StatsReporter.
func (e *Engine) LastRunStats() walk.RunStats {
	e.lastMu.Lock()
	defer e.lastMu.Unlock()
	return e.last
}

// Allocations lists the engine's device allocations now: the graph, the
// alias table, and the two batch slots' task pools, result pools, lengths,
// seeds, cursors and parameters.
func (e *Engine) Allocations() []Allocation {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	var out []Allocation
	_ = e.dev.do(func() error {
		for n, b := range e.allocs {
			out = append(out, Allocation{n, b})
		}
		return nil
	})
	return out
}

// SamplerName names the sampler this engine runs a with (walk.SamplerName).
func (e *Engine) SamplerName(a walk.Algorithm) string { return walk.SamplerName(a, e.g) }

// TableBuild is the time the alias tables took to build at upload.
func (e *Engine) TableBuild() time.Duration { return e.tableBuild }

// Close releases all device and pinned memory and the context.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	_ = e.dev.do(func() error {
		_ = cu.Synchronize()
		for i, s := range e.slots {
			if s != nil {
				s.release(e)
				e.slots[i] = nil
			}
		}
		for name, p := range map[string]*cu.DevicePtr{"graph.offsets": &e.dOffsets, "graph.targets": &e.dTargets,
			"graph.weights": &e.dWeights, "graph.labels": &e.dLabels, "alias.table": &e.dAlias,
			"labels.offsets": &e.dSegOffsets, "labels.targets": &e.dSegTargets, "labels.alias": &e.dSegAlias} {
			e.free(name, p)
		}
		if e.mod != (cu.Module{}) {
			unloadModule(e.mod)
		}
		return nil
	})
	e.dev.close()
	return nil
}

// ---------------------------------------------------------------- batches

// batchSlot is one of the two ping-pong slots: a stream, device buffers for
// one batch and the pinned host buffers its inputs and results pass through.
type batchSlot struct {
	name                                                string
	stream                                              cu.Stream
	start, stop                                         cu.Event
	capWalks                                            int64 // tasks and lengths
	capWords                                            int64 // result and packed vertices
	capJobs                                             int64
	dTasks, dSeeds, dResult, dLengths, dCursor, dParams cu.DevicePtr
	dDense, dPartials                                   cu.DevicePtr
	hTasks                                              []task
	hSeeds                                              []uint64
	hDense, hLengths                                    []uint32
	hTotal                                              *uint32
	hParams                                             *walkParams
	hPtrs                                               []unsafe.Pointer
	pending                                             *batch
}

// release frees whatever of the slot was allocated, also a slot whose
// construction failed halfway (device thread).
func (s *batchSlot) release(e *Engine) {
	if s.stream != (cu.Stream{}) {
		_ = s.stream.Synchronize()
	}
	for _, p := range s.hPtrs {
		e.hostFree(p)
	}
	s.hPtrs = nil
	for name, p := range map[string]*cu.DevicePtr{"tasks": &s.dTasks, "seeds": &s.dSeeds, "result": &s.dResult,
		"lengths": &s.dLengths, "cursor": &s.dCursor, "params": &s.dParams, "dense": &s.dDense, "partials": &s.dPartials} {
		e.free(s.name+"."+name, p)
	}
	if s.stream != (cu.Stream{}) {
		_ = s.stream.Destroy()
	}
	for _, ev := range []*cu.Event{&s.start, &s.stop} {
		if *ev != (cu.Event{}) {
			_ = cu.DestroyEvent(ev)
		}
	}
}

// ensureSlots sizes both slots for batches of up to walks walks, words
// result vertices and jobs seeds (device thread). Slots only grow, each
// dimension on its own, so groups of different lengths reuse them instead
// of reallocating pinned memory run after run.
func (e *Engine) ensureSlots(walks, words, jobs int64) error {
	type size struct{ walks, words, jobs int64 }
	var want [2]*size
	for i, old := range e.slots {
		if old != nil && old.capWalks >= walks && old.capWords >= words && old.capJobs >= jobs {
			continue
		}
		sz := &size{walks, words, jobs}
		if old != nil {
			sz = &size{max(walks, old.capWalks), max(words, old.capWords), max(jobs, old.capJobs)}
			// Give the old slot's memory back first: the new ones may
			// need it (batchWalks counted it as free). Until its
			// replacement is complete there is no slot i.
			old.release(e)
			e.slots[i] = nil
		}
		want[i] = sz
	}
	for i, sz := range want {
		if sz == nil {
			continue
		}
		free, _, err := cu.MemInfo()
		if err != nil {
			return fmt.Errorf("gpu: memory info: %w", err)
		}
		if err := slotPlan(i, sz.walks, sz.words, sz.jobs).check(free); err != nil {
			return err
		}
		s, err := e.newSlot(i, sz.walks, sz.words, sz.jobs)
		if err != nil {
			return err
		}
		e.slots[i] = s
	}
	return nil
}

// newSlot allocates slot i for batches of up to walks walks, words result
// vertices and jobs seeds. It returns a complete slot, or an error with
// everything it had allocated freed (device thread).
func (e *Engine) newSlot(i int, walks, words, jobs int64) (_ *batchSlot, err error) {
	s := &batchSlot{name: fmt.Sprintf("slot%d", i)}
	defer func() {
		if err != nil {
			s.release(e)
		}
	}()
	if s.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, fmt.Errorf("gpu: stream: %w", err)
	}
	if s.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, fmt.Errorf("gpu: event: %w", err)
	}
	if s.stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, fmt.Errorf("gpu: event: %w", err)
	}
	dev := []*cu.DevicePtr{&s.dTasks, &s.dSeeds, &s.dResult, &s.dLengths, &s.dCursor, &s.dParams, &s.dDense, &s.dPartials}
	for k, part := range slotParts(walks, words, jobs) {
		if *dev[k], err = e.alloc(s.name+"."+part.name, part.bytes); err != nil {
			return nil, err
		}
	}
	host := func(n int64) (unsafe.Pointer, error) {
		p, err := e.hostAlloc(n)
		if err == nil {
			s.hPtrs = append(s.hPtrs, p)
		}
		return p, err
	}
	p, err := host(walks * 16)
	if err != nil {
		return nil, err
	}
	s.hTasks = unsafe.Slice((*task)(p), walks)
	if p, err = host(jobs * 8); err != nil {
		return nil, err
	}
	s.hSeeds = unsafe.Slice((*uint64)(p), jobs)
	if p, err = host(words * 4); err != nil {
		return nil, err
	}
	s.hDense = unsafe.Slice((*uint32)(p), words)
	if p, err = host(8); err != nil {
		return nil, err
	}
	s.hTotal = (*uint32)(p)
	if p, err = host(walks * 4); err != nil {
		return nil, err
	}
	s.hLengths = unsafe.Slice((*uint32)(p), walks)
	if p, err = host(paramsSize); err != nil {
		return nil, err
	}
	s.hParams = (*walkParams)(p)
	// Capacities only now that every buffer exists.
	s.capWalks, s.capWords, s.capJobs = walks, words, jobs
	return s, nil
}

// batchWalks sizes a batch by FlowWalker's equation 3: the free device
// memory (less a reserve) split between the two ping-pong slots, each walk
// needing its result row, length and task; bounded by the pinned host
// buffers and the configured cap.
func (e *Engine) batchWalks(stride, total int64) (int64, error) {
	perWalk := 2*stride*4 + 4 + 16 // result row, dense copy, length, task
	var free int64
	err := e.dev.do(func() error {
		// Slots already allocated count as free: they are reused or
		// replaced.
		f, _, err := cu.MemInfo()
		for _, s := range e.slots {
			if s != nil {
				f += s.capWalks*(4+16) + 2*s.capWords*4 + s.capJobs*8
			}
		}
		free = f
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("gpu: memory info: %w", err)
	}
	n := (free - e.cfg.reserveBytes) / (2 * perWalk)
	n = min(n, e.cfg.hostBufferBytes/(stride*4+4+16), total, 1<<31-1)
	if e.cfg.maxBatchWalks > 0 {
		n = min(n, int64(e.cfg.maxBatchWalks))
	}
	if n < 1 {
		return 0, fmt.Errorf("gpu: no device memory for a batch (%d bytes free, %d reserved)", free, e.cfg.reserveBytes)
	}
	return n, nil
}

// Run implements walk.Engine. Jobs with equal algorithms share launches;
// each group's walks run in batches through the two slots.
func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return e.broken
	}
	if err := walk.ValidateJobs(e.g, jobs); err != nil {
		return err
	}
	t0 := time.Now()
	e.stats = walk.RunStats{TableBytes: e.tableBytes, TableBuild: e.tableBuild}
	for _, grp := range groupJobs(jobs) {
		if err := e.runGroup(ctx, grp, emit); err != nil {
			return e.afterError(err)
		}
	}
	e.stats.Wall = time.Since(t0)
	for n, b := range e.allocs {
		if len(n) > 4 && n[:4] == "slot" {
			e.stats.MemoryBytes += b
		}
	}
	e.lastMu.Lock()
	e.last = e.stats
	e.lastMu.Unlock()
	return nil
}

func (e *Engine) runGroup(ctx context.Context, grp []*walk.Job, emit walk.EmitFunc) error {
	alg := grp[0].Algorithm
	stride := rowPitch(alg.Length)
	var total int64
	for _, j := range grp {
		total += int64(len(j.Starts))
	}
	if total == 0 {
		return nil
	}
	if e.useLabelTables(alg) {
		if err := e.dev.do(e.labelTables); err != nil {
			return err
		}
		e.stats.TableBytes, e.stats.TableBuild = e.tableBytes, e.tableBuild
	}
	per, err := e.batchWalks(stride, total)
	if err != nil {
		return err
	}
	if err := e.dev.do(func() error { return e.ensureSlots(per, per*stride, int64(len(grp))) }); err != nil {
		return err
	}
	// Grown slots may hold more than this group's sizing asked for.
	per = min(total, e.slots[0].capWalks, e.slots[0].capWords/stride, 1<<31-1)
	if e.cfg.maxBatchWalks > 0 {
		per = min(per, int64(e.cfg.maxBatchWalks))
	}
	e.cfg.logger.Info("gpu run group", "algorithm", alg.String(), "sampler", e.SamplerName(alg), "walks", total, "batch_walks", per)
	batches := cutBatches(grp, per)
	var runErr error
	for i, b := range batches {
		s := e.slots[i%2]
		if s.pending != nil {
			if runErr = e.finish(s, stride, int64(alg.Length)+1, emit); runErr != nil {
				break
			}
		}
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		if runErr = e.enqueue(s, b, alg); runErr != nil {
			break
		}
	}
	// Drain: the older pending batch first.
	for k := 0; k < 2; k++ {
		s := e.slots[(len(batches)+k)%2]
		if s.pending == nil {
			continue
		}
		if runErr != nil {
			_ = e.dev.do(func() error { return s.stream.Synchronize() })
			s.pending = nil
			continue
		}
		runErr = e.finish(s, stride, int64(alg.Length)+1, emit)
	}
	return runErr
}

// afterError decides, after Run met err, whether the engine can run again.
// A sticky CUDA error has destroyed the context: the engine is broken. Any
// other error (an emit error, a cancelled context, a failed allocation or
// copy) is followed by a probe of the context; if the probe fails the
// engine is broken too. A broken engine's Run returns an error wrapping
// walk.ErrEngineBroken, now and from then on; otherwise err is returned as
// it is and the next Run may retry.
func (e *Engine) afterError(err error) error {
	if isSticky(err) {
		e.broken = fmt.Errorf("gpu: %w: %w", walk.ErrEngineBroken, err)
	} else if perr := e.dev.do(probe); perr != nil {
		e.broken = fmt.Errorf("gpu: %w: %w (device probe after it: %w)", walk.ErrEngineBroken, err, perr)
	}
	if e.broken != nil {
		e.cfg.logger.Error("gpu engine unusable", "graph", e.g.Name, "error", e.broken.Error())
		return e.broken
	}
	return err
}

// stickyErrors are the CUDA errors after which a context can no longer be
// used: every later call in it fails the same way until the process ends
// (or the context is reset, which would invalidate every allocation).
var stickyErrors = []error{cu.IllegalAddress, cu.LaunchFailed, cu.MisalignedAddress, cu.InvalidAddressSpace,
	cu.InvalidPc, cu.IllegalInstruction, cu.HardwareStackError, cu.Assert, cu.LaunchTimeout,
	cu.EccUncorrectable, cu.NvlinkUncorrectable, cu.ContextIsDestroyed, cu.Deinitialized}

func isSticky(err error) bool {
	for _, s := range stickyErrors {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// probe checks that the current context still works: it waits for all its
// work, then round-trips a word through a fresh allocation. It bypasses
// the failure injection and the engine's allocation records (device
// thread).
func probe() error {
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("synchronize: %w", err)
	}
	p, err := cu.MemAlloc(64)
	if err != nil {
		return fmt.Errorf("allocate: %w", err)
	}
	defer func() { _ = cu.MemFree(p) }()
	const want = 0x5eed5eed
	if err := cu.MemsetD32(p, want, 16); err != nil {
		return fmt.Errorf("memset: %w", err)
	}
	var got uint32
	if err := cu.MemcpyDtoH(unsafe.Pointer(&got), p, 4); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if got != want {
		return fmt.Errorf("read back %#x, wrote %#x", got, want)
	}
	return nil
}

// drained waits for stream st after err stopped the issue of its work, so
// that nothing queued still uses the buffers, and returns err (with the
// synchronisation's error, if any, which may be the sticky one).
func drained(st cu.Stream, err error) error {
	if serr := st.Synchronize(); serr != nil {
		return fmt.Errorf("%w; then synchronising its stream: %w", err, serr)
	}
	return err
}

// enqueue fills slot s's pinned inputs with batch b and queues copies in,
// the kernel between two events, and copies out on s's stream.
func (e *Engine) enqueue(s *batchSlot, b *batch, alg walk.Algorithm) error {
	n := b.walks
	nj := 0
	k := int64(0)
	for si := range b.segs {
		sg := &b.segs[si]
		sg.seed = uint32(nj)
		s.hSeeds[nj] = sg.job.Seed
		nj++
		for id := sg.lo; id < sg.hi; id++ {
			s.hTasks[k] = task{start: sg.job.Starts[id], job: sg.seed, walk: uint64(id)}
			k++
		}
	}
	p := s.hParams
	*p = walkParams{}
	algorithmParams(p, alg, e.cfg.warpThreshold)
	p.offsets, p.targets = uint64(e.dOffsets), uint64(e.dTargets)
	sampler := alg.ResolvedSampler()
	if alg.Weighted {
		p.weights = uint64(e.dWeights)
		if sampler == walk.SamplerAlias || sampler == walk.SamplerRejection {
			p.alias = uint64(e.dAlias)
		}
	}
	p.labels = uint64(e.dLabels)
	p.tasks, p.seeds, p.result, p.lengths, p.cursor = uint64(s.dTasks), uint64(s.dSeeds), uint64(s.dResult), uint64(s.dLengths), uint64(s.dCursor)
	p.nTasks = uint64(n)
	stride := p.stride
	mode := modeStatic
	switch alg.Kind {
	case walk.PPR:
		mode = modePPR
	case walk.Node2Vec:
		mode = modeNode2Vec
	case walk.MetaPath:
		mode = modeMetaPath
	}
	if e.useLabelTables(alg) {
		p.sampler = samplerLabelTables
		p.segOffsets, p.segTargets, p.numLabels = uint64(e.dSegOffsets), uint64(e.dSegTargets), uint64(e.g.NumLabels)
		if alg.Weighted {
			p.segAlias = uint64(e.dSegAlias)
		}
	}
	// Full occupancy pays for the simple modes; Node2Vec's rejection loop
	// would spill under the register cap.
	variant := 1
	if mode == modeNode2Vec {
		variant = 0
	}
	if e.cfg.threadVariant >= 0 {
		variant = e.cfg.threadVariant
	}
	fn, block, occ, perBlock := e.fnThread[mode][variant], threadBlock, e.occThread[mode][variant], int64(threadBlock)
	if (sampler == walk.SamplerZPRS || sampler == walk.SamplerDPRS) && !e.useLabelTables(alg) {
		d, n2v := 0, 0
		if sampler == walk.SamplerDPRS {
			d = 1
		}
		if alg.Kind == walk.Node2Vec {
			n2v = 1
		}
		fn, block, occ, perBlock = e.fnReservoir[d][n2v], reservoirBlock, e.occReservoir[d][n2v], localPoolSlots
	}
	grid := int(min(int64(e.numSM*max(occ, 1)), (n+perBlock-1)/perBlock))
	b2 := b
	tiles := packTiles(n)
	err := e.dev.do(func() error {
		st := s.stream
		// In order, each checked before the next is issued; on an error
		// the stream is drained before returning, so nothing queued
		// still reads or writes the slot's buffers.
		steps := []struct {
			what string
			do   func() error
		}{
			{"copy tasks", func() error { return e.copyHtoDAsync(s.dTasks, unsafe.Pointer(&s.hTasks[0]), n*16, st) }},
			{"copy seeds", func() error { return e.copyHtoDAsync(s.dSeeds, unsafe.Pointer(&s.hSeeds[0]), int64(nj)*8, st) }},
			{"copy params", func() error { return e.copyHtoDAsync(s.dParams, unsafe.Pointer(p), paramsSize, st) }},
			{"reset cursor", func() error { return cu.MemsetD32Async(s.dCursor, 0, 2, st) }},
			{"poison lengths", func() error { return cu.MemsetD32Async(s.dLengths, 0, n, st) }},
			{"record start", func() error { return s.start.Record(st) }},
			{"launch", func() error { return launch(fn, grid, block, st, []uint64{uint64(s.dParams)}) }},
			{"record stop", func() error { return s.stop.Record(st) }},
			{"pack partials", func() error {
				return launch(e.fnPackPartials, int(tiles), packThreads, st, []uint64{uint64(s.dLengths), uint64(n), uint64(s.dPartials)})
			}},
			{"pack scan", func() error {
				return launch(e.fnPackScan, 1, packThreads, st, []uint64{uint64(s.dPartials), uint64(tiles)})
			}},
			{"pack rows", func() error {
				return launch(e.fnPackRows, int(tiles), packThreads, st,
					[]uint64{uint64(s.dResult), uint64(s.dLengths), uint64(s.dPartials), uint64(n), stride, uint64(s.dDense)})
			}},
			{"copy lengths", func() error { return e.copyDtoHAsync(unsafe.Pointer(&s.hLengths[0]), s.dLengths, n*4, st) }},
			{"copy total", func() error {
				return e.copyDtoHAsync(unsafe.Pointer(s.hTotal), s.dPartials+cu.DevicePtr(tiles*4), 4, st)
			}},
		}
		for _, x := range steps {
			if err := x.do(); err != nil {
				return drained(st, fmt.Errorf("gpu: %s: %w", x.what, err))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.pending = b2
	return nil
}

// finish waits for slot s's batch, turns its result rows into chunks (in
// parallel) and emits them in order.
func (e *Engine) finish(s *batchSlot, stride, maxVertices int64, emit walk.EmitFunc) error {
	b := s.pending
	s.pending = nil
	var ms float64
	if err := e.dev.do(func() error {
		if err := s.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: batch: %w", err)
		}
		var err error
		if ms, err = s.start.Elapsed(s.stop); err != nil {
			return fmt.Errorf("gpu: kernel time: %w", err)
		}
		// Only now is the packed size known: copy exactly the walked
		// vertices. (The other slot's kernel runs meanwhile.)
		total := int64(*s.hTotal)
		if total > int64(len(s.hDense)) {
			return fmt.Errorf("gpu: batch packed %d vertices into a pool of %d (kernel fault)", total, len(s.hDense))
		}
		if total > 0 {
			if err := e.copyDtoHAsync(unsafe.Pointer(&s.hDense[0]), s.dDense, total*4, s.stream); err != nil {
				return drained(s.stream, fmt.Errorf("gpu: copy walks: %w", err))
			}
		}
		if err := s.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: copy walks: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	e.stats.Compute += time.Duration(ms * float64(time.Millisecond))
	type piece struct {
		seg    *segment
		row    int64 // first walk's index in the batch
		at     int64 // first walk's first vertex in the packed array
		lo, hi int   // walk ids
	}
	var pieces []piece
	row, at := int64(0), int64(0)
	for si := range b.segs {
		sg := &b.segs[si]
		for lo := sg.lo; lo < sg.hi; lo += e.cfg.chunkWalks {
			hi := min(lo+e.cfg.chunkWalks, sg.hi)
			pieces = append(pieces, piece{sg, row, at, lo, hi})
			for _, l := range s.hLengths[row : row+int64(hi-lo)] {
				at += int64(l)
			}
			row += int64(hi - lo)
		}
	}
	if at != int64(*s.hTotal) {
		return fmt.Errorf("gpu: lengths sum to %d vertices, the packed batch holds %d (kernel fault)", at, *s.hTotal)
	}
	chunks := make([]walk.Chunk, len(pieces))
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range pieces {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			pc := pieces[i]
			nw := pc.hi - pc.lo
			lens := s.hLengths[pc.row : pc.row+int64(nw)]
			var nv int64
			for k, l := range lens {
				if l == 0 || int64(l) > maxVertices {
					errs[i] = fmt.Errorf("gpu: walk %d of job %d came back with %d vertices (kernel fault)", pc.lo+k, pc.seg.job.Tag, l)
					return
				}
				nv += int64(l)
			}
			// append rather than make and copy: the vertices (most of
			// the bytes) are written once, not zeroed first.
			c := walk.Chunk{Tag: pc.seg.job.Tag, WalkIDs: make([]uint64, nw), Offsets: make([]uint32, nw+1),
				Vertices: append([]uint32(nil), s.hDense[pc.at:pc.at+nv]...)}
			at := uint32(0)
			for k, l := range lens {
				c.WalkIDs[k] = uint64(pc.lo + k)
				at += l
				c.Offsets[k+1] = at
			}
			chunks[i] = c
		}(i)
	}
	wg.Wait()
	for i := range chunks {
		if errs[i] != nil {
			return errs[i]
		}
	}
	for _, c := range chunks {
		e.stats.Walks += int64(c.Len())
		e.stats.Steps += c.Steps()
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}
