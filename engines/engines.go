package engines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/hybrid"
	"github.com/walkstage/walkstage/walk/ooc"
)

// Settings are what New builds an engine with: the stage fills them from
// its environment (WALKSTAGE_CPU_*, WALKSTAGE_GPU_*), the commands from
// their flags.
type Settings struct {
	// GPUMemoryLimit caps the GPU engine's device memory (gpu.WithMemoryLimit; 0: none).
	GPUMemoryLimit int64
	// GPUs are the device ordinals to spread walks over (nil: all).
	GPUs []int
	// GPUDeviceFraction, when in (0, 1), puts at most that share of the
	// edges on the device (gpu.WithDeviceFraction; benchmarks). 0 means 1.
	GPUDeviceFraction float64
	// GPUStream says when a GPU engine streams a graph larger than its
	// device budget in partitions (gpu.WithStream; the zero value, auto,
	// streams when the graph does not fit).
	GPUStream gpu.StreamMode
	// GPUStreamPartitionBytes sizes a stream plan's partitions (0: the
	// plan's default, an eighth of the budget, at most 48 MiB).
	GPUStreamPartitionBytes int64
	// HybridReorderBytes bounds how far out of walk-id order the hybrid
	// engine emits (hybrid.WithReorderBytes): half the sink's memory
	// limit, which fails a batch whose walks come further apart. 0: no
	// bound.
	HybridReorderBytes int64
	// GPUPartition says when several GPUs share one partitioned copy of
	// the graph (WALKSTAGE_GPU_PARTITION).
	GPUPartition Partition
	// GPUHostShare, when in (0, 1), puts that share of a partitioned
	// graph in host memory (gpu.NewStripes; benchmarks and tests). 0: as
	// much as the devices cannot hold (gpu.PartitionHostShare).
	GPUHostShare float64
	// GPUBatchSlots is the batches each GPU engine has in flight
	// (gpu.WithBatchSlots; 0: the engine's default).
	GPUBatchSlots int
	// GPULentChunks lends chunks out of the GPU engine's pinned buffers
	// instead of copying them (gpu.WithLentChunks), on one device only
	// (gpu.Multi does not route chunks back): for a caller whose
	// receiver gives every chunk back through the engine's Release.
	GPULentChunks bool
	Workers       int // 0: one per core
	// TableWorkers bounds the goroutines that build the CPU engine's
	// alias tables (cpu.WithTableWorkers; 0: one per core): a live graph's
	// compaction builds its engine beside the applier.
	TableWorkers    int
	FusedTableBytes int64 // -1: the engine's default limit (cpu.WithFusedTableLimit)
	// EagerLabelTables builds MetaPath's label tables at start-up instead
	// of on the first MetaPath batch.
	EagerLabelTables bool
	// HostMemoryLimit is the host memory budget in bytes: where the CPU
	// engine is chosen and the graph needs more than this in memory
	// (ooc.InMemoryBytes), the out-of-core engine (walk/ooc) walks it from
	// its file instead. 0: ooc.HostMemory (WALKSTAGE_HOST_MEMORY_LIMIT,
	// else the cgroup's memory limit, v2 or v1, else MemAvailable); -1: always in
	// memory. Where the GPU engine streams the graph in partitions and
	// their pinned host copy would exceed half of it, it reads them from
	// the graph's file instead (gpu.WithHostMemoryLimit).
	HostMemoryLimit int64
}

// NewDevice is New for callers that need an engine only for its device
// (walkstage walk's samplers: graphsample.SampleRangeOn samples on the CPU
// without an engine): the GPU engine, or nil where New would build the
// CPU engine ("cpu", or "auto" without a GPU for the graph). "hybrid"
// must get the GPU engine, as "gpu" must.
func NewDevice(g *graph.Graph, kind string, set Settings, log *slog.Logger) (walk.Engine, error) {
	switch kind {
	case "gpu", "auto", "cpu", "hybrid":
	default:
		return nil, fmt.Errorf("unknown engine %q (want cpu, gpu, hybrid or auto)", kind)
	}
	if kind == "cpu" {
		return nil, nil
	}
	e, err := newGPU(g, set, log)
	if err == nil {
		return e, nil
	}
	// Under auto, a graph too large for the device is served by the CPU
	// engine rather than not at all.
	var tooBig *gpu.MemoryPlanError
	if kind != "auto" || !errors.Is(err, gpu.ErrUnavailable) && !errors.As(err, &tooBig) {
		return nil, fmt.Errorf("gpu engine: %w", err)
	}
	log.Info("GPU engine unavailable, using the CPU engine", "reason", err.Error())
	return nil, nil
}

// New is the one place an engine is chosen and built, for the stage and
// for the walk and bench commands: kind "gpu" must get one, "auto" falls
// back to the CPU when the GPU engine is unavailable (built without CUDA,
// no device, the graph does not fit), "cpu" is the CPU engine, "hybrid"
// both walking every job together (walk/hybrid; it needs a GPU engine).
// The engines log to log.
func New(g *graph.Graph, kind string, set Settings, log *slog.Logger) (walk.Engine, error) {
	if kind == "hybrid" {
		return newHybrid(g, set, log)
	}
	if de, err := NewDevice(g, kind, set, log); err != nil || de != nil {
		return de, err
	}
	return newCPU(g, set, log)
}

// newHybrid is the CPU engine (in memory or out of core, as "cpu" gets it)
// and the GPU engine (as "gpu" gets it) walking every job together. The
// GPU engine does not lend chunks: the hybrid engine drops a walk that
// both engines walked from the one that emits it second, and routes a
// chunk given back by its size (hybrid.Engine.Release).
func newHybrid(g *graph.Graph, set Settings, log *slog.Logger) (walk.Engine, error) {
	gset := set
	gset.GPULentChunks = false
	ge, err := NewDevice(g, "hybrid", gset, log)
	if err != nil {
		return nil, err
	}
	ce, err := newCPU(g, set, log)
	if err != nil {
		_ = ge.Close()
		return nil, err
	}
	e, err := hybrid.New(g, ce, ge, hybrid.WithLogger(log), hybrid.WithReorderBytes(set.HybridReorderBytes))
	if err != nil {
		_ = ge.Close()
		_ = ce.Close()
		return nil, err
	}
	log.Info("hybrid engine: each job's walks split between the CPU and the GPU engine by their measured rates", "graph", g.Name,
		"cpu_engine", fmt.Sprintf("%T", ce), "gpu_engine", fmt.Sprintf("%T", ge))
	return e, nil
}

// newCPU is the CPU engine: out of core when the graph does not fit the
// host memory budget, else in memory with its tables built.
func newCPU(g *graph.Graph, set Settings, log *slog.Logger) (walk.Engine, error) {
	if oe, err := newOutOfCore(g, set, log); err != nil || oe != nil {
		return oe, err
	}
	var opts []cpu.Option
	if set.Workers > 0 {
		opts = append(opts, cpu.WithWorkers(set.Workers))
	}
	if set.FusedTableBytes >= 0 {
		opts = append(opts, cpu.WithFusedTableLimit(set.FusedTableBytes))
	}
	if set.TableWorkers > 0 {
		opts = append(opts, cpu.WithTableWorkers(set.TableWorkers))
	}
	e, err := cpu.New(g, opts...)
	if err != nil {
		return nil, fmt.Errorf("cpu engine: %w", err)
	}
	// Build the alias tables before the stage reports ready, as the GPU
	// engine does at upload, so the first weighted batch does not pay for
	// them. MetaPath's label tables are lazy unless asked for: they cost
	// as much memory again and many deployments never run MetaPath. (The
	// GPU engine builds its own on the device in milliseconds.)
	t0 := time.Now()
	e.PrepareTables()
	if g.Weighted() {
		log.Info("cpu alias tables built", "graph", g.Name, "duration_seconds", time.Since(t0).Seconds(), "bytes", e.TableBytes())
	}
	if set.EagerLabelTables {
		t0 := time.Now()
		if e.PrepareLabelTables() {
			log.Info("cpu label tables built", "graph", g.Name, "duration_seconds", time.Since(t0).Seconds(), "bytes", e.TableBytes())
		}
	}
	return e, nil
}

// ParseGPUs reads a device list (WALKSTAGE_GPUS, bench --gpus): "all"
// (nil) or device ordinals.
func ParseGPUs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want all or device ordinals such as 0,1", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// Partition is when several GPUs share one partitioned copy of the graph
// (WALKSTAGE_GPU_PARTITION).
type Partition int

const (
	PartitionAuto Partition = iota // when the graph does not fit the smallest GPU
	PartitionOn
	PartitionOff
)

// ParseStream reads a GPU stream mode (WALKSTAGE_GPU_STREAM, bench
// --gpu-stream): auto, on or off.
func ParseStream(s string) (gpu.StreamMode, error) { return gpu.ParseStreamMode(s) }

// ParsePartition reads a partition mode (WALKSTAGE_GPU_PARTITION, bench
// --partition): auto, on or off.
func ParsePartition(s string) (Partition, error) {
	switch strings.TrimSpace(s) {
	case "", "auto":
		return PartitionAuto, nil
	case "on":
		return PartitionOn, nil
	case "off":
		return PartitionOff, nil
	}
	return 0, fmt.Errorf("%q: want auto, on or off", s)
}

// newGPU opens the GPU engine on each device of s.GPUs (all when nil):
// one engine, or a gpu.Multi over one per device, each holding the graph
// or, partitioned, all sharing one copy of it cut over their memory.
func newGPU(g *graph.Graph, s Settings, log *slog.Logger) (walk.Engine, error) {
	ordinals := s.GPUs
	if ordinals == nil {
		n, err := gpu.DeviceCount()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: no CUDA device", gpu.ErrUnavailable)
		}
		for d := range n {
			ordinals = append(ordinals, d)
		}
	}
	stripes, err := partitionFor(g, ordinals, s, log)
	if err != nil {
		return nil, err
	}
	// A stream plan whose pinned host copy exceeds half the host budget
	// reads the partitions from the graph's file instead (gpu.WithHostMemoryLimit).
	host, err := hostBudget(s)
	if err != nil {
		return nil, err
	}
	var engines []walk.Engine
	for _, d := range ordinals {
		opts := []gpu.Option{gpu.WithLogger(log.With("device", d)), gpu.WithDevice(d), gpu.WithMemoryLimit(s.GPUMemoryLimit)}
		if host.Bytes > 0 && s.HostMemoryLimit >= 0 {
			opts = append(opts, gpu.WithHostMemoryLimit(host.Bytes))
		}
		if s.GPUDeviceFraction > 0 {
			opts = append(opts, gpu.WithDeviceFraction(s.GPUDeviceFraction))
		}
		if s.GPUStreamPartitionBytes > 0 {
			opts = append(opts, gpu.WithStreamPartitionBytes(s.GPUStreamPartitionBytes))
		}
		if s.GPUStream != gpu.StreamOff {
			opts = append(opts, gpu.WithStream(s.GPUStream))
		}
		if s.GPUBatchSlots > 0 {
			opts = append(opts, gpu.WithBatchSlots(s.GPUBatchSlots))
		}
		if s.GPULentChunks && len(ordinals) == 1 {
			opts = append(opts, gpu.WithLentChunks())
		}
		if stripes != nil {
			opts = append(opts, gpu.WithStripes(stripes))
		}
		e, err := gpu.New(g, opts...)
		if err != nil {
			for _, o := range engines {
				_ = o.Close()
			}
			return nil, fmt.Errorf("device %d: %w", d, err)
		}
		engines = append(engines, e)
	}
	if len(engines) == 1 {
		return engines[0], nil
	}
	log.Info("gpu engines: walks split over devices", "devices", ordinals, "partitioned", stripes != nil)
	return gpu.NewMulti(engines...)
}

// partitionFor is the stripes the engines on ordinals share, or nil when
// each holds the graph itself: PartitionOn with two devices or more, and
// PartitionAuto when the graph and its tables do not fit the smallest
// device's free memory (or the memory limit) with room for the batches.
// What the devices cannot hold together goes to host memory (the stripes'
// host share).
func partitionFor(g *graph.Graph, ordinals []int, s Settings, log *slog.Logger) (*gpu.Stripes, error) {
	if len(ordinals) < 2 {
		if s.GPUPartition == PartitionOn {
			return nil, fmt.Errorf("WALKSTAGE_GPU_PARTITION=on needs two devices or more in WALKSTAGE_GPUS (have %v)", ordinals)
		}
		return nil, nil
	}
	if s.GPUPartition == PartitionOff {
		return nil, nil
	}
	if s.GPUPartition == PartitionOn && s.GPUHostShare > 0 {
		return gpu.NewStripes(ordinals, s.GPUHostShare) // asked for: nothing to measure
	}
	need := gpu.DeviceBytesNeeded(g) + gpu.DefaultReserveBytes
	smallest := int64(-1)
	for _, d := range ordinals {
		free, err := gpu.FreeMemory(d)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", d, err)
		}
		if s.GPUMemoryLimit > 0 {
			free = min(free, s.GPUMemoryLimit)
		}
		if smallest < 0 || free < smallest {
			smallest = free
		}
	}
	if s.GPUPartition == PartitionAuto && need <= smallest {
		return nil, nil
	}
	share := s.GPUHostShare
	if share == 0 {
		var err error
		if share, err = gpu.PartitionHostShare(g, len(ordinals), smallest-gpu.DefaultReserveBytes); err != nil {
			return nil, err
		}
	}
	log.Info("gpu: graph partitioned over the devices", "need_bytes", need, "smallest_free_bytes", smallest, "host_share", share)
	return gpu.NewStripes(ordinals, share)
}

// hostBudget is the host memory budget of s: HostMemoryLimit when
// positive, else ooc.HostMemory (WALKSTAGE_HOST_MEMORY_LIMIT, the cgroup's
// memory limit, MemAvailable); 0 bytes when unknown or -1 (in memory).
func hostBudget(s Settings) (ooc.Budget, error) {
	switch {
	case s.HostMemoryLimit < 0:
		return ooc.Budget{}, nil
	case s.HostMemoryLimit > 0:
		return ooc.Budget{Bytes: s.HostMemoryLimit, Source: "setting"}, nil
	}
	return ooc.HostMemory()
}

// newOutOfCore is the out-of-core engine when the graph does not fit the
// host memory budget (Settings.HostMemoryLimit), else nil: the in-memory
// CPU engine would map more than the budget and build its alias table on
// top, and past the budget every step is a page fault.
func newOutOfCore(g *graph.Graph, s Settings, log *slog.Logger) (walk.Engine, error) {
	if s.HostMemoryLimit < 0 {
		return nil, nil
	}
	budget, err := hostBudget(s)
	if err != nil {
		return nil, err
	}
	need := ooc.InMemoryBytes(g)
	if budget.Bytes == 0 || need <= budget.Bytes { // 0: not known here (not Linux)
		return nil, nil
	}
	if g.File() == "" {
		// Built in memory (bench's generated graph): it is there already.
		log.Warn("graph larger than the host memory budget, but not from a file: walked in memory", "graph", g.Name,
			"need_bytes", need, "budget_bytes", budget.Bytes, "budget_source", budget.Source)
		return nil, nil
	}
	log.Info("graph larger than the host memory budget: walked out of core", "graph", g.Name, "need_bytes", need,
		"budget_bytes", budget.Bytes, "budget_source", budget.Source)
	opts := []ooc.Option{ooc.WithMemoryLimit(budget.Bytes), ooc.WithLogger(log)}
	if s.Workers > 0 {
		opts = append(opts, ooc.WithWorkers(s.Workers))
	}
	// New reads the offsets once to cut the partitions; engines.New has
	// no context to cancel that with (its callers build engines at start).
	e, err := ooc.New(context.Background(), g, g.File(), opts...)
	if err != nil {
		return nil, fmt.Errorf("cpu engine: %w", err)
	}
	return e, nil
}
