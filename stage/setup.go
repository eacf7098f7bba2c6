package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/tracing"
	"github.com/walkstage/walkstage/walk"
)

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
func FromConfig(ctx context.Context, c config.Config, log *slog.Logger, version string) (*Runtime, error) {
	return fromConfig(ctx, c, log, version, nil, nil, nil)
}

// fromConfig is FromConfig with an already bound metrics listener and
// registry (nil: none yet).
func fromConfig(ctx context.Context, c config.Config, log *slog.Logger, version string, ln net.Listener, reg *prometheus.Registry, tracer trace.Tracer) (_ *Runtime, err error) {
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
	g, start, err := loadStartGraph(ctx, c, log)
	if err != nil {
		return nil, err
	}
	rt.Graph = g
	rt.closers = append(rt.closers, g.Close)
	log.Info("graph loaded", "graph", g.Name, "version", g.Version, "vertices", g.NumVertices(), "edges", g.NumEdges(),
		"weighted", g.Weighted(), "labels", g.NumLabels)

	eng, err := engines.New(g, c.Engine, c.EngineSettings(), log)
	if err != nil {
		return nil, err
	}
	rt.closers = append(rt.closers, eng.Close)
	log.Info("engine ready", "engine", eng.Name())

	ko, err := kafkaOptions(c)
	if err != nil {
		return nil, err
	}
	lopts, err := rt.openLive(ctx, c, ko, g, start, eng, log)
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
	cc := consumerConfig(c, ko, g, log)
	if lopts != nil {
		cc.Limits.Vertices = LiveSeeds(lopts.Graph)
	}
	cons, err := source.NewConsumer(cc)
	if err != nil {
		return nil, err
	}
	rt.Consumer = cons
	if lopts != nil && lopts.Compaction != nil {
		lopts.Compaction.OnSwap = cons.SetGraph
	}
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
	wenc, err := sink.ParseWalkEncoding(c.OutputWalkEncoding)
	if err != nil {
		return nil, err
	}
	sinkOpts := []sink.Option{sink.WithCompression(comp), sink.WithWalkEncoding(wenc), sink.WithFileBytes(c.OutputFileBytes), sink.WithCallTimeout(c.StoreTimeout),
		sink.WithMemoryLimit(c.OutputMemoryBytes), sink.WithRowGroupRows(c.OutputRowGroupWalks)}

	var tables Tables
	if c.TableCatalog != "" {
		t, err := icetable.Open(ctx, icetable.Options{Catalog: c.TableCatalog, Namespace: c.TableNamespace,
			MaxFiles: c.TableCommitMaxFiles, CommitInterval: c.TableCommitInterval, FlushBatches: max(1, tableWaitBatches(c.MaxInFlight)/2), Logger: log})
		if err != nil {
			return nil, err
		}
		rt.closers = append(rt.closers, t.Close)
		tables = t
		log.Info("committed batches are appended to Iceberg tables", "catalog", redact.String(c.TableCatalog),
			"namespace", c.TableNamespace)
	}

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
		Probes:      []health.Probe{{Name: health.Broker, Check: cons.CheckTopics}, {Name: health.Store, Check: storeProbe(bucket, c.OutputURL)}},
		MetricsAddr: c.MetricsAddr, Listener: ln, Joined: cons.Joined, Lag: cons.Lag,
		Consuming: cons.Consuming, UnassignedPartitions: cons.UnassignedPartitions, LogResets: cons.LogResets, Registry: reg, Logger: log, Version: version, Tracer: tracer, Tables: tables, Live: lopts})
	if err != nil {
		return nil, err
	}
	if topicsErr != nil {
		s.health.Down(health.Broker, health.ProbeHolder, topicsErr)
	}
	if storeErr != nil {
		s.health.Down(health.Store, health.ProbeHolder, storeErr)
	}
	rt.Stage = s
	if err := rt.followGraph(ctx, c, log); err != nil {
		return nil, err
	}
	return rt, nil
}

// openLive builds the live graph over g and its edge reader when
// WALKSTAGE_EDGE_TOPIC is set (nil when not), refusing what it cannot
// serve yet by name: an engine that does not walk snapshots (the
// out-of-core one, a GPU engine without the whole graph on each device),
// a graph with string ids. (Graph following is refused by config.Load
// already.)
func (rt *Runtime) openLive(ctx context.Context, c config.Config, ko source.KafkaOptions, g *graph.Graph, start liveStart, eng walk.Engine, log *slog.Logger) (*LiveOptions, error) {
	if c.EdgeTopic == "" {
		return nil, nil
	}
	if err := walk.CheckOverlay(eng, walk.Algorithm{Kind: walk.DeepWalk, Length: 1}); err != nil {
		return nil, fmt.Errorf("WALKSTAGE_EDGE_TOPIC is set, but the %s engine built for this graph cannot walk a live graph "+
			"(the in-memory CPU engine and the GPU engine with the whole graph on each device do: not the out-of-core engine chosen when the graph exceeds WALKSTAGE_HOST_MEMORY_LIMIT, "+
			"nor a GPU engine under a placement plan, streaming or partitioned: a graph larger than a device or WALKSTAGE_GPU_MEMORY_LIMIT, WALKSTAGE_GPU_STREAM, WALKSTAGE_GPU_PARTITION): %w",
			eng.Name(), err)
	}
	var lopts []livegraph.Option
	if c.EdgeWindow > 0 {
		lopts = append(lopts, livegraph.WithWindow(c.EdgeWindow, 0))
		if start.eventTime != nil {
			// The window resumes where it stood at the compaction.
			lopts = append(lopts, livegraph.WithEventTime(*start.eventTime))
		}
	}
	l, err := newLive(g, start.watermark, lopts...)
	if err != nil {
		if c.EdgeWindow > 0 && !g.Timed() && !g.HasStringIDs() {
			return nil, fmt.Errorf("WALKSTAGE_EDGE_WINDOW is set, but: %w", err)
		}
		return nil, fmt.Errorf("WALKSTAGE_EDGE_TOPIC is set, but: %w", err)
	}
	er, err := source.NewEdgeReader(source.EdgeReaderConfig{Kafka: ko, Topic: c.EdgeTopic, DLQTopic: c.DLQTopic,
		Start: start.watermark, Check: l.CheckSchema, CallTimeout: c.BrokerTimeout, Logger: log.With("component", "edge-reader")})
	if err != nil {
		return nil, err
	}
	rt.closers = append(rt.closers, er.Close)
	log.Info("live graph: edge updates are applied from the edge topic", "edge_topic", c.EdgeTopic,
		"publish_interval_seconds", c.EdgePublishInterval.Seconds(), "edge_window_seconds", c.EdgeWindow.Seconds())
	compaction, err := rt.liveCompactionFor(ctx, c, log)
	if err != nil {
		return nil, err
	}
	lo := &LiveOptions{Graph: l, Edges: er, PublishInterval: c.EdgePublishInterval, OffsetsWait: c.EdgeOffsetsWait, SnapshotHold: c.EdgeSnapshotHold, Compaction: compaction,
		ApplyShare: c.EdgeApplyShare}
	if eng.Name() == "cpu" {
		lo.WalkerCores = c.CPUWorkers // 0: every core
	}
	return lo, nil
}

// kafkaOptions are the broker connection settings of c.
func kafkaOptions(c config.Config) (source.KafkaOptions, error) {
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
func (rt *Runtime) openOutput(ctx context.Context, c config.Config, log *slog.Logger) (_ *blob.Bucket, storeErr, err error) {
	bucket, err := store.OpenBucket(ctx, c.OutputURL)
	if err != nil {
		return nil, nil, err
	}
	rt.closers = append(rt.closers, bucket.Close)
	// A missing bucket or refused credentials is a configuration error:
	// found now, before any request is taken, not dead-lettered per batch.
	// A store that is only unreachable is an outage: the stage starts not
	// ready and its probe finds when the store is back.
	storeErr = store.Check(ctx, bucket, c.OutputPrefix, store.WithCallTimeout(c.StoreTimeout))
	if errors.Is(storeErr, store.ErrConfig) {
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
func consumerConfig(c config.Config, ko source.KafkaOptions, g *graph.Graph, log *slog.Logger) source.ConsumerConfig {
	return source.ConsumerConfig{Kafka: ko, Topic: c.InputTopic, Group: c.Group, DLQTopic: c.DLQTopic,
		OutputTopic: c.OutputTopic, CallTimeout: c.BrokerTimeout,
		SessionTimeout: c.SessionTimeout, RebalanceTimeout: c.RebalanceTimeout, Graph: g, Logger: log,
		Limits: message.Limits{MaxMessageBytes: c.MaxMessageBytes, MaxSeeds: c.MaxSeeds, MaxWalkLength: c.MaxWalkLength,
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
	st, err := store.Sweep(ctx, b, prefix, age, store.WithCallTimeout(timeout))
	if err != nil {
		log.Warn("sweeping leftovers of killed writers failed; the next start-up retries", "err", err)
	}
	if st.UploadsAborted > 0 || st.TempFilesRemoved > 0 || err != nil {
		log.Info("swept leftovers of killed writers", "uploads_aborted", st.UploadsAborted,
			"temp_files_removed", st.TempFilesRemoved, "duration_seconds", time.Since(t0).Seconds())
	}
}

// storeProbe asks the object store whether the output bucket answers, once
// a probe interval (a second by default), with a bucket-level request: S3's
// HeadBucket, the cheapest request there is and one that succeeds, where a
// HEAD of a missing key filled the store's logs and 4xx metrics with a
// not-found a second. Other stores get blob's IsAccessible (a listing of at
// most one key). It fails when the store does not answer within the probe's
// deadline or the bucket is gone.
func storeProbe(b *blob.Bucket, bucketURL string) func(context.Context) error {
	var client *s3.Client
	if u, err := url.Parse(bucketURL); err == nil && u.Scheme == "s3" && u.Host != "" && b.As(&client) {
		name := u.Host
		return func(ctx context.Context) error {
			if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name}); err != nil {
				return fmt.Errorf("object store: bucket %s: %w", name, err)
			}
			return nil
		}
	}
	return func(ctx context.Context) error {
		ok, err := b.IsAccessible(ctx)
		if err != nil {
			return fmt.Errorf("object store: %w", err)
		}
		if !ok {
			return errors.New("object store: the output bucket does not exist")
		}
		return nil
	}
}

// Main is `walkstage run`: configuration from environ, logs to logw, run
// until ctx is cancelled (SIGTERM), then shut down gracefully.
func Main(ctx context.Context, environ []string, logw io.Writer, version string) (err error) {
	defer func() { err = redact.Error(err) }()
	c, err := config.Load(environ)
	if err != nil {
		return err
	}
	log := config.NewLogger(c, logw)
	tp, err := tracing.FromEnv(ctx, environ, version)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("spans not exported at exit", "err", err)
		}
	}()
	if tp.Enabled {
		log.Info("tracing on: spans exported over OTLP/HTTP", "endpoint", redact.String(tp.Endpoint))
	}
	tracer := tp.Tracer(TracerName)
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
		stopEarly := health.ServeUntilHandoff(ln, health.Handler(reg, loading, func() error { return nil }))
		defer stopEarly() // idempotent; normally called below
		rt, err := fromConfig(ctx, c, log, version, ln, reg, tracer)
		stopEarly()
		if err != nil {
			ln.Close()
			return err
		}
		return runRuntime(ctx, rt, c, log)
	}
	rt, err := fromConfig(ctx, c, log, version, nil, reg, tracer)
	if err != nil {
		return err
	}
	return runRuntime(ctx, rt, c, log)
}

func runRuntime(ctx context.Context, rt *Runtime, c config.Config, log *slog.Logger) error {
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
	// Beside the default Go series, the collector's CPU and the bytes
	// allocated (go_cpu_classes_gc_total_cpu_seconds_total,
	// go_gc_heap_allocs_bytes_total): what the allocations of a stage
	// beside a live ingest cost it (docs/benchmarks/live-graph.md, "The
	// stage's allocations beside the ingest").
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
		Matcher: regexp.MustCompile(`^/(cpu/classes/gc/total:cpu-seconds|gc/heap/allocs:bytes)$`),
	})), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
