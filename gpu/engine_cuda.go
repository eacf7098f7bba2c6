//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"sync"
	"time"

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

// DeviceCount is the number of CUDA devices.
func DeviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return n, nil
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
// streams its walks through its batch slots (two by default), each with
// its own stream.
type Engine struct {
	g   *graph.Graph
	cfg config
	dev *device

	mod                                    cu.Module // kernels/walk.cu
	packMod                                cu.Module // kernels/pack.cu
	fnAlias, fnSegs                        cu.Function
	fnPackPartials, fnPackScan, fnPackRows cu.Function
	numSM                                  int
	maxDegree                              int // the graph's, once sample_fire needed it (e.mu held); 0: not yet
	// reservoir kernels: [dprs][node2vec].
	fnReservoir  [2][2]cu.Function
	occReservoir [2][2]int
	// thread kernels by mode: [mode][0] compiler's register budget,
	// [mode][1] capped for full occupancy; [placed] the variants that read
	// a placement plan's host arrays.
	fnThread  [2][numModes][2]cu.Function
	occThread [2][numModes][2]int
	// visitPhases is the last CountVisitsOnDevice's time counting on the
	// device (clear, walk, count, compact), copying the used slots back
	// and waiting for a pinned buffer's top k (TestVisitsBench prints it).
	visitPhases [3]time.Duration
	// visitHost are the pinned buffers visit counts come back into.
	visitHost [2]pinnedSlots
	// placed is the placement plan's state, nil when the whole graph is
	// on the device.
	placed *placed
	// streamed is the stream plan's state (stream_cuda.go), nil unless
	// the graph is streamed to the device in partitions; lastStream is
	// what it did in the last Run (under lastMu).
	streamed   *streamed
	lastStream StreamStats
	// MetaPath label tables, built on first use (labelTables).
	dSegOffsets, dSegTargets, dSegAlias cu.DevicePtr
	segBuilt                            bool
	dOffsets, dTargets, dWeights        cu.DevicePtr
	dLabels, dAlias                     cu.DevicePtr
	// dSampleCum is the graph's per-edge weight CDF (graphsample.WeightCDF) for
	// weighted sampling, uploaded by the first weighted sampling call and
	// kept until Close: `walkstage walk` and the stage sample in waves, and
	// with its 8 bytes an edge uploaded for every wave a weighted [25, 10]
	// neighbour sample of 1 M seeds at scale 22 (33 waves) sampled for
	// 6.7 s, the unweighted one for 1.1 s.
	dSampleCum cu.DevicePtr
	// staging are the pinned buffers sampled columns come back through
	// (stagedCopy).
	staging staging
	// sampleBufs are device arrays kept from one sampling call to the
	// next (devArrays), at most sampleBufsKept bytes.
	sampleBufs             map[string]*sampleBuf
	graphBytes, tableBytes int64
	tableBuild             time.Duration
	slots                  []*batchSlot // WithBatchSlots of them; nil until sized
	chunks                 chunkPool    // chunks given back by Release
	lenders                lenders      // slots that lend chunks (WithLentChunks)
	allocs                 map[string]int64
	mu                     sync.Mutex    // one Run at a time
	stats                  walk.RunStats // the Run in progress (Run's goroutine only)
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
	// pinned are the large pinned buffers registered rather than
	// cuMemHostAlloc'd (pinned_cuda.go).
	pinned pinnedRegions
	// striped is set while the engine holds a reference to its group's
	// stripes (partitioned mode: WithStripes).
	striped bool
	// stripeBytes is the stripes' memory on the engine's device, counted
	// against its memory limit.
	stripeBytes int64
	// tmp is the temporal kernels and the timed graph's device arrays.
	tmp temporalState
	// ovl is the overlay kernels and the live graph delta on the device
	// (overlay_cuda.go).
	ovl overlayState
	// tl is the temporal overlay kernels and the timed lists of the
	// snapshot a temporal job walked last (overlaytemporal_cuda.go).
	tl timedState
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
	case cfg.batchSlots < 1 || cfg.batchSlots > maxBatchSlots:
		return nil, fmt.Errorf("gpu: %d batch slots, outside [1, %d]", cfg.batchSlots, maxBatchSlots)
	case cfg.chunkWalks < 1:
		return nil, fmt.Errorf("gpu: chunk of %d walks", cfg.chunkWalks)
	case cfg.maxBatchWalks < 0 || cfg.reserveBytes < 0 || cfg.memoryLimit < 0:
		return nil, errors.New("gpu: negative batch, reserve or memory limit")
	case !(cfg.deviceFraction >= 0 && cfg.deviceFraction <= 1):
		return nil, fmt.Errorf("gpu: device fraction %v is outside [0, 1]", cfg.deviceFraction)
	}
	if cfg.memoryLimit > 0 && !cfg.reserveSet {
		// Under a limit the reserve is the batch slots' share of it.
		cfg.reserveBytes = min(cfg.reserveBytes, cfg.memoryLimit/4)
	}
	if g.NumVertices() == 0 {
		return nil, errors.New("gpu: empty graph")
	}
	dev, err := openDevice(cfg.device)
	if err != nil {
		return nil, err
	}
	e := &Engine{g: g, cfg: cfg, dev: dev, allocs: map[string]int64{}, inject: cfg.inject, slots: make([]*batchSlot, cfg.batchSlots),
		staging: staging{size: defaultStagingBytes}}
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
			rows := e.hostBatch(stride, 1<<31-1).rowsFor(per, stride)
			err = dev.do(func() error { return e.ensureSlots(per, per*stride, rows, 1) })
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

// Thread-kernel modes (kernels/walk.cu: Mode) and their kernels.
const (
	modeStatic = iota
	modePPR
	modeNode2Vec
	modeMetaPath
	numModes
)

var modeKernels = [numModes]string{"walk_thread_static", "walk_thread_ppr", "walk_thread_node2vec", "walk_thread_metapath"}

// Name implements walk.Engine.
func (e *Engine) Name() string { return "gpu" }

// LastRunStats implements walk.StatsReporter.
func (e *Engine) LastRunStats() walk.RunStats {
	e.lastMu.Lock()
	defer e.lastMu.Unlock()
	return e.last
}

// Allocations lists the engine's device allocations now: the graph, the
// alias table, and the batch slots' task pools, result pools, lengths,
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

// StepperName names the stepper this engine runs a with (walk.StepperName).
func (e *Engine) StepperName(a walk.Algorithm) string { return walk.StepperName(a, e.g) }

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
			if s != nil && s.lent.Load() > 0 {
				// Freeing memory a receiver may still read would be
				// worse than keeping it.
				e.cfg.logger.Warn("gpu: engine closed with chunks still lent; their batch slot stays allocated",
					"slot", s.name, "chunks", s.lent.Load())
				e.slots[i] = nil
				continue
			}
			if s != nil {
				s.release(e)
				e.slots[i] = nil
			}
		}
		e.releaseStriped()
		for name, p := range map[string]*cu.DevicePtr{"graph.offsets": &e.dOffsets, "graph.targets": &e.dTargets,
			"graph.weights": &e.dWeights, "graph.labels": &e.dLabels, "alias.table": &e.dAlias,
			"labels.offsets": &e.dSegOffsets, "labels.targets": &e.dSegTargets, "labels.alias": &e.dSegAlias,
			"sample.cum": &e.dSampleCum} {
			e.free(name, p)
		}
		e.releasePlaced()
		e.releaseStreamed()
		e.releaseTemporal()
		e.releaseOverlay()
		e.releaseTimed()
		e.releaseLocked()
		e.releaseStaging()
		e.releaseSampleBufs()
		for i := range e.visitHost {
			e.visitHost[i].release(e)
		}
		for _, m := range []cu.Module{e.mod, e.packMod} {
			if m != (cu.Module{}) {
				unloadModule(m)
			}
		}
		return nil
	})
	e.dev.close()
	return nil
}

// ---------------------------------------------------------------- batches
