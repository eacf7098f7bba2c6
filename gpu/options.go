package gpu

import "log/slog"

// Option configures the GPU engine (functional options, validated once in
// New). They exist in every build so callers compile without the cuda tag.
type Option func(*config)

type config struct {
	device          int
	warpThreshold   uint32
	maxBatchWalks   int
	hostBufferBytes int64
	batchSlots      int
	batchSlotsSet   bool
	lendChunks      bool
	chunkWalks      int
	reserveBytes    int64
	threadVariant   int // -1: per mode; 0 or 1 forces a register budget (benchmarks)
	logger          *slog.Logger
	prepareLength   int
	memoryLimit     int64   // device bytes the engine may use; 0: the free memory
	deviceFraction  float64 // most of the edges a placement puts on the device
	reserveSet      bool
	stripes         *Stripes // partitioned mode: the group's shared edge arrays
	inject          *faults  // failure injection (tests only)
	stream          StreamMode
	streamPartBytes int64 // 0: an eighth of the stream budget
	streamBatch     int   // streamChoose, streamCopy or streamInPlace (tests)
	hostMemoryLimit int64 // host bytes the engine may pin; 0: MemAvailable
	streamDisk      bool  // stream from disk whatever the budget (tests)
	// resultWindowBytes, when > 0, is the pinned window a batch's packed
	// rows come back through in pieces (batchplan.go): set by a disk
	// stream plan, so its host budget bounds the window, not the batch.
	resultWindowBytes int64
}

// maxBatchSlots bounds WithBatchSlots: each slot pins a host buffer.
const maxBatchSlots = 8

// DefaultReserveBytes is the device memory an engine keeps free for its
// batch slots when it decides whether the graph fits (WithReserveBytes).
const DefaultReserveBytes = 1 << 30

func defaultConfig() config {
	return config{
		device:          0,
		warpThreshold:   4096,
		hostBufferBytes: 128 << 20,
		batchSlots:      2,
		chunkWalks:      1 << 16,
		reserveBytes:    DefaultReserveBytes,
		threadVariant:   -1,
		deviceFraction:  1,
		logger:          slog.New(slog.DiscardHandler),
	}
}

// WithDevice selects the CUDA device ordinal (default 0).
func WithDevice(ordinal int) Option { return func(c *config) { c.device = ordinal } }

// WithWarpThreshold sets the degree above which a reservoir step goes to
// the block sampler instead of a warp sampler (FlowWalker's d_t). The
// default is 4096: on an H100 at R-MAT scale 22, weighted DeepWalk through
// ZPRS ran 97, 113, 121 and 114 M steps/s at 256, 1024 (the paper's
// default), 4096 and 16384, and DPRS 75 vs 89 at 1024 vs 4096.
func WithWarpThreshold(degree uint32) Option { return func(c *config) { c.warpThreshold = degree } }

// WithMaxBatchWalks caps the walks per device batch (default: as many as
// device memory and the host buffers allow, FlowWalker equation 3). Small
// values exercise the two-stream pipeline.
func WithMaxBatchWalks(n int) Option { return func(c *config) { c.maxBatchWalks = n } }

// WithHostBufferBytes sets the size of each slot's pinned host buffer
// that results are copied into (default 128 MiB, at most 8 GiB: packed
// offsets within a batch are 32-bit). It bounds the batch size together
// with device memory. The default was 512 MiB until the batch loop became
// a pipeline; on the H100 host (scale 22, 80 steps, walks to /dev/shm)
// 128 MiB batches wrote 936-1,036 M walk vertices/s where 512 MiB ones
// wrote 863-924 M: the pipeline fills and drains sooner, and the buffers
// take 0.1 s to allocate instead of 0.35-0.6 s, with 1.3 GB less peak RSS.
func WithHostBufferBytes(n int64) Option { return func(c *config) { c.hostBufferBytes = n } }

// WithBatchSlots sets how many batches are in flight at once (default 2,
// at most 8): each slot has its own stream, device pools and pinned host
// buffer (WithHostBufferBytes each), so a batch can walk and cross the bus
// while earlier ones are still being unpacked into chunks. Device memory
// for batches is split between the slots.
func WithBatchSlots(n int) Option { return func(c *config) { c.batchSlots, c.batchSlotsSet = n, true } }

// WithLentChunks makes Run emit chunks whose Vertices lie in the batch
// slot's pinned buffer (walk.Chunk.Lent) instead of copies of it: the copy
// out of pinned memory was a tenth of the CPU time of a one-shot GPU walk
// to Parquet, and the serial stage that bounded its pipeline. The
// receiver must give every chunk back through Release once it reads it no
// more (sink.WithChunkRelease does, after encoding), without waiting for
// later chunks (sink.BatchWriter copies what it keeps): a slot is walked
// again only when all its chunks are back, so a chunk never given back
// stops every later batch on that slot until the run's context ends, and
// Close leaves the slot's memory allocated. For receivers that give back
// every chunk also when they fail, or whose process ends then (`walkstage
// walk`).
func WithLentChunks() Option { return func(c *config) { c.lendChunks = true } }

// WithChunkWalks sets the most walks per emitted chunk (default 65536).
func WithChunkWalks(n int) Option { return func(c *config) { c.chunkWalks = n } }

// WithReserveBytes sets the device memory left free when sizing batches
// (default 1 GiB), for other users of the device and the driver.
func WithReserveBytes(n int64) Option {
	return func(c *config) { c.reserveBytes, c.reserveSet = n, true }
}

// WithMemoryLimit caps the device memory the engine uses (graph, tables and
// batch slots) at n bytes (WALKSTAGE_GPU_MEMORY_LIMIT); 0 means the device's
// free memory. A graph whose arrays do not fit is walked under a placement
// plan (placement.go) with part of its edges in mapped host memory. Unless
// WithReserveBytes says otherwise, a quarter of the limit, at most 1 GiB,
// is kept for the batch slots.
func WithMemoryLimit(n int64) Option { return func(c *config) { c.memoryLimit = n } }

// WithDeviceFraction puts at most fraction f (0 to 1) of the graph's edges
// on the device, the rest in mapped host memory, even when all would fit:
// for benchmarks and tests of the placement plan. 1 (the default) places
// only when the graph does not fit.
func WithDeviceFraction(f float64) Option { return func(c *config) { c.deviceFraction = f } }

// WithLogger logs the engine's device allocations (debug), table builds and
// batch sizing (info) to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPreparedSlots allocates the batch slots (device pools and pinned
// host buffers, sized for walks of length steps) in New, so the first Run
// does not pay for them (0.1 s for pinned memory at the default host buffer
// size on the H100 host; 0.35-0.6 s at 512 MiB). Runs with longer walks grow the slots as needed.
func WithPreparedSlots(length int) Option { return func(c *config) { c.prepareLength = length } }

// WithStream says when the engine streams partitions of a graph that does
// not fit the device (stream.go): StreamOff (the default) never (the
// placement plan reads the host's share in place), StreamAuto when the
// graph does not fit (or under WithDeviceFraction below 1), with a
// placement plan beside it and each batch walked under the faster
// (streamchoice.go), StreamOn always (WithDeviceFraction then caps the
// share of the streamed arrays on the device: benchmarks). Streaming walks DeepWalk
// and PPR on the uniform and alias samplers, Node2Vec on the rejection
// sampler and MetaPath on label tables; Run refuses the others.
func WithStream(m StreamMode) Option { return func(c *config) { c.stream = m } }

// WithStreamPartitionBytes sets the bytes of one streamed partition (0,
// the default: an eighth of the graph's device budget, at most 48 MiB); tests force small partitions so a small graph streams through
// many.
func WithStreamPartitionBytes(n int64) Option { return func(c *config) { c.streamPartBytes = n } }

// WithHostMemoryLimit sets the host memory budget in bytes
// (WALKSTAGE_HOST_MEMORY_LIMIT, or the cgroup's memory.max, as engines
// resolves it; 0, the default: MemAvailable). Under a stream plan whose
// pinned host copy of the streamed arrays exceeds half of it, the
// partitions are read from the graph's file into a ring of pinned buffers
// that takes at most half of it (streamdisk.go); a graph not loaded from
// a file is then refused.
func WithHostMemoryLimit(n int64) Option { return func(c *config) { c.hostMemoryLimit = n } }

// withStreamDisk streams from disk whatever the host budget: tests only.
func withStreamDisk() Option { return func(c *config) { c.streamDisk = true } }

// withStreamBatch forces how a streaming engine walks its batches
// (streamCopy, streamInPlace; default streamChoose): tests only.
func withStreamBatch(m int) Option { return func(c *config) { c.streamBatch = m } }
