package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/walk"
)

// NewLogger builds the slog logger the configuration asks for. Every
// record passes through redact, as configured URLs (and errors quoting
// them) carry credentials.
func NewLogger(c Config, w io.Writer) *slog.Logger {
	lvl, err := parseLogLevel(c.LogLevel)
	if err != nil {
		lvl = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "text" {
		return slog.New(redact.Handler(slog.NewTextHandler(w, ho)))
	}
	return slog.New(redact.Handler(slog.NewJSONHandler(w, ho)))
}

// loadGraph loads a walkstage graph file from a local path or an object URL
// (s3://bucket/key?region=..., gs://bucket/key, file:///path). Remote graphs
// are downloaded into dir (the system temporary directory when empty) and
// memory-mapped; the file is unlinked once mapped.
func loadGraph(ctx context.Context, location, dir string) (*graph.Graph, error) {
	if g, ok, err := loadFromCatalog(ctx, location, dir); ok { // a catalog pointer (graphs.go)
		return g, err
	}
	u, err := url.Parse(location)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // "C:\..." is a path
		return graph.Load(location)
	}
	if u.Scheme == "file" {
		return graph.Load(u.Path)
	}
	location = redact.String(location) // for the messages below; u is what is opened
	key := strings.TrimPrefix(u.Path, "/")
	if key == "" {
		return nil, fmt.Errorf("graph URL %q names a bucket, not an object", location)
	}
	bu := *u
	bu.Path = ""
	b, err := sink.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	defer b.Close()
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	defer r.Close()
	f, err := os.CreateTemp(dir, "walkstage-graph-*-"+path.Base(key))
	if err != nil {
		return nil, fmt.Errorf("graph %s: download: %w", location, err)
	}
	defer os.Remove(f.Name()) // the mapping keeps the data alive on Unix
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, fmt.Errorf("graph %s: download to %s: %w", location, f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("graph %s: download to %s: %w", location, f.Name(), err)
	}
	g, err := graph.Load(f.Name())
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	return g, nil
}

// EngineSettings are the engines' settings from the configuration.
type EngineSettings struct {
	// GPUMemoryLimit caps the GPU engine's device memory (gpu.WithMemoryLimit; 0: none).
	GPUMemoryLimit int64
	// GPUs are the device ordinals to spread walks over (nil: all).
	GPUs []int
	// GPUDeviceFraction, when in (0, 1), puts at most that share of the
	// edges on the device (gpu.WithDeviceFraction; benchmarks). 0 means 1.
	GPUDeviceFraction float64
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
	// receiver gives every chunk back through the engine's Recycle.
	GPULentChunks   bool
	Workers         int   // 0: one per core
	FusedTableBytes int64 // -1: the engine's default limit (walk.WithFusedTableLimit)
	// EagerLabelTables builds MetaPath's label tables at start-up instead
	// of on the first MetaPath batch.
	EagerLabelTables bool
}

// engineSettings are c's engine settings.
func engineSettings(c Config) EngineSettings {
	gpus, _ := ParseGPUs(c.GPUs)              // validated by LoadConfig
	part, _ := ParsePartition(c.GPUPartition) // likewise
	return EngineSettings{Workers: c.CPUWorkers, FusedTableBytes: c.CPUFusedTableBytes,
		EagerLabelTables: c.CPULabelTables == "eager", GPUMemoryLimit: c.GPUMemoryLimit, GPUs: gpus,
		GPUPartition: part, GPULentChunks: c.GPULendChunks, GPUBatchSlots: c.GPUBatchSlots}
}

// NewDeviceEngine is NewEngine for callers that need an engine only for
// its device (walkstage walk's samplers: walk.SampleRangeOn samples on the
// CPU without an engine): the GPU engine, or nil where NewEngine would
// build the CPU engine ("cpu", or "auto" without a GPU for the graph).
func NewDeviceEngine(g *graph.Graph, kind string, cpu EngineSettings, log *slog.Logger) (walk.Engine, error) {
	switch kind {
	case "gpu", "auto", "cpu":
	default:
		return nil, fmt.Errorf("unknown engine %q (want cpu, gpu or auto)", kind)
	}
	if kind == "cpu" {
		return nil, nil
	}
	e, err := newGPUEngine(g, cpu, log)
	if err == nil {
		return e, nil
	}
	// Under auto, a graph too large for the device is served by the CPU
	// engine rather than not at all.
	var tooBig *gpu.MemoryPlanError
	if kind == "gpu" || !errors.Is(err, gpu.ErrUnavailable) && !errors.As(err, &tooBig) {
		return nil, fmt.Errorf("gpu engine: %w", err)
	}
	log.Info("GPU engine unavailable, using the CPU engine", "reason", err.Error())
	return nil, nil
}

// NewEngine is the one place an engine is chosen and built, for the stage
// and for the walk and bench commands: kind "gpu" must get one, "auto"
// falls back to the CPU when the GPU engine is unavailable (built without
// CUDA, no device, the graph does not fit), "cpu" is the CPU engine. Both
// engines log to log.
func NewEngine(g *graph.Graph, kind string, cpu EngineSettings, log *slog.Logger) (walk.Engine, error) {
	if de, err := NewDeviceEngine(g, kind, cpu, log); err != nil || de != nil {
		return de, err
	}
	var opts []walk.CPUOption
	if cpu.Workers > 0 {
		opts = append(opts, walk.WithWorkers(cpu.Workers))
	}
	if cpu.FusedTableBytes >= 0 {
		opts = append(opts, walk.WithFusedTableLimit(cpu.FusedTableBytes))
	}
	e, err := walk.NewCPU(g, opts...)
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
		log.Info("cpu alias tables built", "graph", g.Name, "duration", time.Since(t0), "bytes", e.TableBytes())
	}
	if cpu.EagerLabelTables {
		t0 := time.Now()
		if e.PrepareLabelTables() {
			log.Info("cpu label tables built", "graph", g.Name, "duration", time.Since(t0), "bytes", e.TableBytes())
		}
	}
	return e, nil
}

// Runtime is a Stage with the resources FromConfig opened for it.
type Runtime struct {
	*Stage
	Graph    *graph.Graph
	Consumer *source.Consumer
	closers  []func() error
}

// Close releases everything FromConfig opened, in reverse order.
func (r *Runtime) Close() error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i]())
	}
	return errors.Join(errs...)
}

// FromConfig loads the graph, builds the engine, joins the consumer group
// and opens the producers and the bucket. version is recorded in outputs.
func FromConfig(ctx context.Context, c Config, log *slog.Logger, version string) (*Runtime, error) {
	return fromConfig(ctx, c, log, version, nil, nil)
}

// fromConfig is FromConfig with an already bound metrics listener and
// registry (nil: none yet).
func fromConfig(ctx context.Context, c Config, log *slog.Logger, version string, ln net.Listener, reg *prometheus.Registry) (_ *Runtime, err error) {
	// The caller's logger may be any handler (tests, embedders): the
	// configured URLs reach it below and through every component.
	log = redact.Logger(log)
	rt := &Runtime{}
	defer func() {
		if err != nil {
			rt.Close()
			err = redact.Error(err) // library errors quote the URLs they opened
		}
	}()
	log.Info("loading graph", "graph", redact.String(c.Graph))
	g, err := loadGraph(ctx, c.Graph, c.GraphDownloadDir)
	if err != nil {
		return nil, err
	}
	rt.Graph = g
	rt.closers = append(rt.closers, g.Close)
	log.Info("graph loaded", "graph", g.Name, "version", g.Version, "vertices", g.NumVertices(), "edges", g.NumEdges(),
		"weighted", g.Weighted(), "labels", g.NumLabels)

	eng, err := NewEngine(g, c.Engine, engineSettings(c), log)
	if err != nil {
		return nil, err
	}
	rt.closers = append(rt.closers, eng.Close)
	log.Info("engine ready", "engine", eng.Name())

	ko, err := kafkaOptions(c)
	if err != nil {
		return nil, err
	}
	bucket, storeErr, err := rt.openOutput(ctx, c, log)
	if err != nil {
		return nil, err
	}
	pub, err := source.NewPublisher(ko, c.OutputTopic, c.BrokerTimeout)
	if err != nil {
		return nil, err
	}
	rt.closers = append(rt.closers, pub.Close)
	pub.SetLogger(log)
	cons, err := source.NewConsumer(consumerConfig(c, ko, g, log))
	if err != nil {
		return nil, err
	}
	rt.Consumer = cons
	rt.closers = append(rt.closers, cons.Close)
	// Missing topics are a configuration error: say so now, by name. The
	// stage still starts, not ready, and the broker probe keeps checking
	// (an operator may create them), so nothing is fetched meanwhile.
	topicsErr := cons.CheckTopics(ctx)
	if topicsErr != nil {
		log.Error("configuration: the stage's topics are not usable; not ready until they are", "err", topicsErr)
	}

	comp, err := sink.ParseCompression(c.OutputCompression)
	if err != nil {
		return nil, err
	}
	sinkOpts := []sink.Option{sink.WithCompression(comp), sink.WithFileBytes(c.OutputFileBytes), sink.WithCallTimeout(c.StoreTimeout),
		sink.WithMemoryLimit(c.OutputMemoryBytes), sink.WithRowGroupRows(c.OutputRowGroupWalks)}

	if reg == nil {
		reg = newRegistry()
	}
	batchCost := c.MicroBatchMaxCost
	if batchCost == 0 {
		batchCost = AutoMicroBatchMaxCost(eng.Name(), c.CPUWorkers)
	}
	s, err := New(Options{Graph: g, Engine: eng, Source: cons, Events: pub, Bucket: bucket, BucketURL: c.OutputURL,
		Prefix: c.OutputPrefix, SinkOptions: sinkOpts, MicroBatchMaxWait: c.MicroBatchMaxWait, MicroBatchMaxWalks: c.MicroBatchMaxWalks,
		MicroBatchMaxRequests: c.MicroBatchMaxRequests, MaxRequestCost: c.MaxRequestCost, MicroBatchMaxCost: batchCost, QueueDepth: c.QueueDepth, MaxInFlight: c.MaxInFlight,
		ChunkBuffer: c.ChunkBuffer, EncodeThreads: c.EncodeThreads, ShutdownTimeout: c.ShutdownTimeout,
		RetryBackoffMin: c.RetryBackoffMin, RetryBackoffMax: c.RetryBackoffMax, ProbeInterval: c.ProbeInterval, ProbeTimeout: c.ProbeTimeout,
		Probes:      []Probe{{Name: depBroker, Check: cons.CheckTopics}, {Name: depStore, Check: storeProbe(bucket, c.OutputPrefix)}},
		MetricsAddr: c.MetricsAddr, Listener: ln, Joined: cons.Joined, Lag: cons.Lag,
		Consuming: cons.Consuming, UnassignedPartitions: cons.UnassignedPartitions, LogResets: cons.LogResets, Registry: reg, Logger: log, Version: version})
	if err != nil {
		return nil, err
	}
	if topicsErr != nil {
		s.health.fail(depBroker, holdProbe, topicsErr)
	}
	if storeErr != nil {
		s.health.fail(depStore, holdProbe, storeErr)
	}
	rt.Stage = s
	if err := rt.followGraph(ctx, c, log); err != nil {
		return nil, err
	}
	return rt, nil
}

// kafkaOptions are the broker connection settings of c.
func kafkaOptions(c Config) (source.KafkaOptions, error) {
	ko := source.KafkaOptions{Brokers: c.Brokers, ClientID: c.ClientID, SASLMechanism: c.SASLMechanism,
		SASLUsername: c.SASLUsername, SASLPassword: c.SASLPassword}
	if c.TLS || c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSInsecureSkipVerify {
		var err error
		if ko.TLS, err = source.TLSConfig(c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile, c.TLSServerName, c.TLSInsecureSkipVerify); err != nil {
			return ko, err
		}
	}
	return ko, nil
}

// openOutput opens the output bucket (closed with rt) and checks it. A
// store that does not answer is no error here: storeErr says so, and the
// stage starts not ready.
func (rt *Runtime) openOutput(ctx context.Context, c Config, log *slog.Logger) (_ *blob.Bucket, storeErr, err error) {
	bucket, err := sink.OpenBucket(ctx, c.OutputURL)
	if err != nil {
		return nil, nil, err
	}
	rt.closers = append(rt.closers, bucket.Close)
	// A missing bucket or refused credentials is a configuration error:
	// found now, before any request is taken, not dead-lettered per batch.
	// A store that is only unreachable is an outage: the stage starts not
	// ready and its probe finds when the store is back.
	storeErr = sink.Check(ctx, bucket, c.OutputPrefix, sink.WithCallTimeout(c.StoreTimeout))
	if errors.Is(storeErr, sink.ErrStoreConfig) {
		return nil, nil, fmt.Errorf("output %s: %w", redact.String(c.OutputURL), storeErr)
	}
	if storeErr != nil {
		log.Error("object store unavailable at start-up; not ready until it answers", "err", storeErr)
	} else if c.OutputSweepAge > 0 {
		sweepOutput(ctx, bucket, c.OutputPrefix, c.OutputSweepAge, c.StoreTimeout, log)
	}
	return bucket, storeErr, nil
}

// consumerConfig is the input consumer's configuration from c.
func consumerConfig(c Config, ko source.KafkaOptions, g *graph.Graph, log *slog.Logger) source.ConsumerConfig {
	return source.ConsumerConfig{Kafka: ko, Topic: c.InputTopic, Group: c.Group, DLQTopic: c.DLQTopic,
		OutputTopic: c.OutputTopic, CallTimeout: c.BrokerTimeout,
		SessionTimeout: c.SessionTimeout, RebalanceTimeout: c.RebalanceTimeout, Graph: g, Logger: log,
		Limits: source.Limits{MaxMessageBytes: c.MaxMessageBytes, MaxSeeds: c.MaxSeeds, MaxWalkLength: c.MaxWalkLength,
			MaxWalksPerSeed: c.MaxWalksPerSeed, MaxWalksPerBatch: c.MaxWalksPerBatch, SkipUnknown: c.UnknownVertices == "skip",
			MaxTopK: c.MaxTopK, MaxStepsPerQuery: int64(c.MaxStepsPerQuery), MaxStepsPerBatch: c.MaxStepsPerBatch,
			MaxFanout: c.MaxFanout, MaxSampleVertices: c.MaxSampleVertices, MaxSampledEdges: c.MaxSampledEdges}}
}

// sweepOutput removes what killed replicas left under prefix (open
// multipart uploads, temporary files). It is housekeeping: a failure is
// logged, and the next start-up tries again.
func sweepOutput(ctx context.Context, b *blob.Bucket, prefix string, age, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	st, err := sink.Sweep(ctx, b, prefix, age, sink.WithCallTimeout(timeout))
	if err != nil {
		log.Warn("sweeping leftovers of killed writers failed; the next start-up retries", "err", err)
	}
	if st.UploadsAborted > 0 || st.TempFilesRemoved > 0 || err != nil {
		log.Info("swept leftovers of killed writers", "uploads_aborted", st.UploadsAborted,
			"temp_files_removed", st.TempFilesRemoved, "duration", time.Since(t0))
	}
}

// storeProbe asks the object store about one key under prefix: cheap, and
// it fails when the store does not answer within the probe's deadline.
func storeProbe(b *blob.Bucket, prefix string) func(context.Context) error {
	key := path.Join(prefix, ".walkstage-probe")
	return func(ctx context.Context) error {
		if _, err := b.Exists(ctx, key); err != nil {
			return fmt.Errorf("object store: %w", err)
		}
		return nil
	}
}

// Main is `walkstage run`: configuration from environ, logs to logw, run
// until ctx is cancelled (SIGTERM), then shut down gracefully.
func Main(ctx context.Context, environ []string, logw io.Writer, version string) (err error) {
	defer func() { err = redact.Error(err) }()
	c, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	log := NewLogger(c, logw)
	// Answer probes while the graph loads (a large graph downloads for
	// minutes): /healthz is 200, /readyz 503 until the stage runs. The same
	// socket then passes to the stage's HTTP actor.
	var ln net.Listener
	reg := newRegistry()
	if c.MetricsAddr != "" {
		if ln, err = net.Listen("tcp", c.MetricsAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", c.MetricsAddr, err)
		}
		loading := func() error { return errors.New("loading the graph and joining the group") }
		stopEarly := serveUntilHandoff(ln, probeHandler(reg, loading, func() error { return nil }))
		defer stopEarly() // idempotent; normally called below
		rt, err := fromConfig(ctx, c, log, version, ln, reg)
		stopEarly()
		if err != nil {
			ln.Close()
			return err
		}
		return runRuntime(ctx, rt, c, log)
	}
	rt, err := fromConfig(ctx, c, log, version, nil, reg)
	if err != nil {
		return err
	}
	return runRuntime(ctx, rt, c, log)
}

func runRuntime(ctx context.Context, rt *Runtime, c Config, log *slog.Logger) error {
	defer rt.Close()
	log.Info("stage running", "input", c.InputTopic, "output", c.OutputTopic, "group", c.Group, "metrics", c.MetricsAddr)
	if err := rt.Run(ctx); err != nil {
		log.Error("stage stopped", "err", err)
		return err
	}
	log.Info("stage stopped")
	return nil
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// keepOpen hands a listener to a server that may not close it.
type keepOpen struct{ net.Listener }

func (keepOpen) Close() error { return nil }

// serveUntilHandoff serves h on ln until the returned stop is called; stop
// returns once that server no longer accepts, leaving ln open for the next.
// (Shutdown cannot interrupt an Accept without closing the socket, so an
// expired deadline does.)
func serveUntilHandoff(ln net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		srv.Serve(keepOpen{ln})
		close(served)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			// Expire Accept first: Shutdown waits for Serve to leave it.
			// Serve retries the timeouts until Shutdown marks it closing.
			tl, _ := ln.(*net.TCPListener)
			if tl != nil {
				tl.SetDeadline(time.Unix(1, 0))
			}
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			if tl != nil {
				<-served
				tl.SetDeadline(time.Time{})
			}
		})
	}
}

// ParseGPUs reads WALKSTAGE_GPUS: "all" (nil) or device ordinals.
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

// ParsePartition reads WALKSTAGE_GPU_PARTITION: auto, on or off.
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

// newGPUEngine opens the GPU engine on each device of s.GPUs (all when
// nil): one engine, or a gpu.Multi over one per device, each holding the
// graph or, partitioned, all sharing one copy of it cut over their memory.
func newGPUEngine(g *graph.Graph, s EngineSettings, log *slog.Logger) (walk.Engine, error) {
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
	var engines []walk.Engine
	for _, d := range ordinals {
		opts := []gpu.Option{gpu.WithLogger(log.With("device", d)), gpu.WithDevice(d), gpu.WithMemoryLimit(s.GPUMemoryLimit)}
		if s.GPUDeviceFraction > 0 {
			opts = append(opts, gpu.WithDeviceFraction(s.GPUDeviceFraction))
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
func partitionFor(g *graph.Graph, ordinals []int, s EngineSettings, log *slog.Logger) (*gpu.Stripes, error) {
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
