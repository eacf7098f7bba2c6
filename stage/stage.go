package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/stage/live"
	"github.com/walkstage/walkstage/walk"
)

// Deliveries is the stage's view of the source: the next message, decoded,
// with its acknowledgement. *source.Consumer implements it.
type Deliveries interface {
	Next(ctx context.Context) (*source.Delivery, error)
}

// Publisher writes completion events; Publish returns once the event is
// durable. *source.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, ev message.Event) error
}

// Options assemble a Stage from its parts; FromConfig builds them from the
// environment, tests and the demo build them directly.
type Options struct {
	Graph     *graph.Graph
	Engine    walk.Engine
	Source    Deliveries
	Events    Publisher
	Bucket    *blob.Bucket
	BucketURL string // as opened, for the object URLs in events
	Prefix    string
	// SinkOptions are passed to every sink.NewBatchWriter.
	SinkOptions []sink.Option

	MicroBatchMaxWait     time.Duration
	MicroBatchMaxWalks    int
	MicroBatchMaxRequests int
	// MaxRequestCost is the per-request budget: a walk or visits request
	// whose estimated cost (walk.CostModel, in O(1) steps) is above it is
	// rejected at intake (ReasonOverBudget). 0 means DefaultMaxRequestCost.
	MaxRequestCost int64
	// MicroBatchMaxCost is the per-micro-batch budget, in the same unit: no
	// request joins a micro-batch that would exceed it, and a request above
	// it walks alone, in slices of at most this cost, with the queued
	// micro-batches walking between them. 0 picks it from the engine
	// (AutoMicroBatchMaxCost).
	MicroBatchMaxCost int64
	QueueDepth        int
	MaxInFlight       int
	ChunkBuffer       int
	// EncodeThreads bounds the row groups encoded at once over all
	// batches (sink.Buffers); 0 means GOMAXPROCS less an eighth.
	EncodeThreads int
	// LookupDirsTTL is how long the lookups of batches taken in reuse a
	// listing of the output's kind, graph and algorithm directories
	// (sink.WithDirCache); 0 means a second, negative lists for every
	// lookup.
	LookupDirsTTL time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the wait between retries of
	// work that failed on a dependency (exponential, with jitter).
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Probes check the dependencies every ProbeInterval, each within
	// ProbeTimeout; a failure marks the stage not ready and pauses fetching
	// until the probe passes again.
	Probes        []health.Probe
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// ShutdownTimeout bounds how long in-flight batches may take once ctx
	// of Run is cancelled; what is unfinished then is abandoned uncommitted.
	ShutdownTimeout time.Duration

	// MetricsAddr, when set, serves /metrics, /healthz and /readyz.
	MetricsAddr string
	// Listener, when set, is used instead of listening on MetricsAddr (Main
	// binds it before loading the graph, to answer probes meanwhile).
	Listener net.Listener
	// Joined reports whether the consumer has joined its group (for /readyz).
	Joined func() bool
	// Lag reports the consumer's lag in messages (for metrics); may be nil.
	Lag func() int64
	// Consuming is nil while the group reads every partition of the input
	// topic, else why not (the topic is missing, or partitions are
	// unassigned): the stage is not ready meanwhile. May be nil.
	Consuming func() error
	// UnassignedPartitions and LogResets feed the source's metrics (see
	// source.Consumer); either may be nil.
	UnassignedPartitions func() int
	LogResets            func() int64
	// Tables, when set, receives every committed batch before its event
	// (tables.go).
	Tables Tables
	// Tracer makes the stage's spans (see trace.go); nil is tracing off.
	// Events and dead letters carry the requests' trace context either way.
	Tracer trace.Tracer
	// Live, when set, serves a live graph over Graph (edges.go): the
	// edge reader and applier run beside the pipeline, and walks that can
	// walk its snapshots do.
	Live *LiveOptions
	// Registry receives the stage's metrics (a new one when nil).
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Version  string // walkstage version, recorded in output metadata
}

func (o *Options) defaults() error {
	if o.Graph == nil || o.Engine == nil || o.Source == nil || o.Events == nil || o.Bucket == nil {
		return errors.New("stage: graph, engine, source, events and bucket are required")
	}
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&o.MicroBatchMaxWalks, 1<<20)
	setInt(&o.MicroBatchMaxRequests, 16)
	if o.MaxRequestCost <= 0 {
		o.MaxRequestCost = DefaultMaxRequestCost
	}
	if o.MicroBatchMaxCost <= 0 {
		o.MicroBatchMaxCost = AutoMicroBatchMaxCost(o.Engine.Name(), 0)
	}
	setInt(&o.QueueDepth, 64)
	setInt(&o.MaxInFlight, 64)
	setInt(&o.ChunkBuffer, 4)
	procs := runtime.GOMAXPROCS(0)
	setInt(&o.EncodeThreads, max(1, procs-procs/8))
	if o.LookupDirsTTL == 0 {
		o.LookupDirsTTL = DefaultLookupDirsTTL
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	setDur(&o.RetryBackoffMin, 200*time.Millisecond)
	setDur(&o.RetryBackoffMax, 30*time.Second)
	setDur(&o.ProbeInterval, time.Second)
	setDur(&o.ProbeTimeout, 2*time.Second)
	// A launch holds an in-flight slot per request until its finisher is
	// done, and finishers start only after the launch: a micro-batch larger
	// than the slots would wait for itself.
	o.MicroBatchMaxRequests = min(o.MicroBatchMaxRequests, o.MaxInFlight)
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Joined == nil {
		o.Joined = func() bool { return true }
	}
	if o.Live != nil {
		if o.Live.Graph == nil || o.Live.Graph.Base() != o.Graph {
			return errors.New("stage: the live graph must be over the stage's graph")
		}
		if err := walk.CheckOverlay(o.Engine, walk.Algorithm{Kind: walk.DeepWalk, Length: 1}); err != nil {
			return fmt.Errorf("stage: a live graph needs an engine that walks it: %w", err)
		}
		if o.Live.PublishInterval <= 0 {
			o.Live.PublishInterval = 100 * time.Millisecond
		}
		if o.Live.ApplyShare <= 0 {
			o.Live.ApplyShare = live.DefaultApplyShare
		}
	}
	return nil
}

// Stage runs the pipeline: source loop -> (bounded queue) -> engine loop ->
// per-batch writers -> finishers that commit the objects, publish the event
// and acknowledge the message.
type Stage struct {
	o      Options
	log    *slog.Logger
	m      *metrics
	tracer trace.Tracer
	// sampleCols holds *graphsample.Columns between sampling batches
	// (sample): a wave's columns are up to about 160 MB, touched afresh
	// by every batch otherwise.
	sampleCols sync.Pool

	queue chan *batch   // validated requests waiting for the engine
	slots chan struct{} // MaxInFlight tokens: batches between launch and ack
	// tableSlots bounds the batches whose objects are durable and that
	// wait for their table commit (tableWaitBatches of them). Such a batch
	// gives its slot back: it holds a manifest, not walks, so the commits,
	// grouped, no longer cap how many batches walk.
	tableSlots chan struct{}
	// buffers are the sink's encoders and buffers, handed from each
	// batch's writer to the next (sink.Buffers).
	buffers *sink.Buffers
	// dirs are the output directories above the batch directories, for
	// the lookup of every batch taken in (sink.WithDirCache).
	dirs *output.DirCache

	// held is the live graph's snapshot kept for the engine's costly
	// moves (edges.go, snapshotFor).
	held heldSnapshot

	turns    *turns.Line // one engine run at a time, in the order asked (internal/turns)
	finishes sync.WaitGroup
	draining atomic.Bool
	health   *health.Tracker
	ln       net.Listener

	// active maps the batch ids this replica holds (queued to acked) to a
	// channel closed when the batch leaves. A redelivery of a batch still
	// in flight here (after a rebalance) waits for it instead of writing the
	// same objects concurrently, where one copy's abort could delete the
	// other's parts.
	activeMu sync.Mutex
	active   map[string]chan struct{}

	graphs graphState // the graph version walked, and its swaps (graphs.go)

	// waiting counts the requests waiting for their edge offsets
	// (edges.go): the queue closes after the last of them.
	waiting sync.WaitGroup
	// walkers tells the live graph's applier the cores the walks hold
	// (edges.go).
	walkers walkerLoad
}

// batch is one request on its way through the stage.
type batch struct {
	d        *source.Delivery
	req      *message.Request
	walks    int
	queuedAt time.Time // = fetched
	// cost is the request's estimated engine cost (walk.CostModel) on the
	// graph version it was admitted on; 0 for sampling requests, which
	// walk in waves of their own (samples.go).
	cost     int64
	launched time.Time
	walked   time.Duration
	emitted  time.Time // when the engine run it took part in ended

	w       *sink.BatchWriter
	chunks  chan walk.Chunk
	written chan struct{} // closed when the writer goroutine has drained chunks
	wErr    error         // first Write error
	gotW    int64         // walks received from the engine
	vErr    error         // output visits: the counting run's error (engine, or a rejection)
	steps   int64
	attempt int
	// unresolvable counts the attempts that ended in
	// sink.ErrManifestUnresolvable (finish gives up at
	// manifestUnresolvableAttempts).
	unresolvable int
	// failedDep names the dependency the last failed attempt failed on:
	// engine (walking) or object_store (writing, committing the objects).
	failedDep string
	// slotFreed: the batch gave its in-flight slot back (waiting for its
	// table commit); tableSlot: it holds a table-wait slot.
	slotFreed, tableSlot bool
	// existing is the batch's complete output found before walking (a
	// redelivery of a batch already done): it is reported, not rewritten.
	// lookupErr is why the lookup failed (a conflict, or the store).
	existing  *output.Manifest
	lookupErr error
	// lookedUp, when set, is closed once the lookup started at intake is
	// done (existing and lookupErr hold its answer); the first launch
	// waits for it instead of looking up on the engine loop.
	lookedUp chan struct{}
	// held is the walks counted for the live graph's applier while b is
	// queued or walked (walkerLoad).
	held int64
	// alone is set when the last engine run walked this batch only.
	alone bool
	v     *served // graph version walked on, held until finished (graphs.go)
	// snap is the live graph snapshot walked on, nil when the batch
	// walked the graph version alone (edges.go).
	snap *livegraph.Snapshot
	// span is the request's span, from its fetch to its acknowledgement
	// (trace.go).
	span trace.Span
}

// holder is the name b's attempts hold dependencies down by.
func (b *batch) holder() string { return fmt.Sprintf("batch#%p", b) }

// New checks the options and registers the metrics.
func New(o Options) (*Stage, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Stage{
		o:          o,
		log:        o.Logger,
		queue:      make(chan *batch, o.QueueDepth),
		slots:      make(chan struct{}, o.MaxInFlight),
		tableSlots: make(chan struct{}, tableWaitBatches(o.MaxInFlight)),
		buffers:    sink.NewBuffers(o.EncodeThreads),
		dirs:       output.NewDirCache(o.LookupDirsTTL),
		turns:      turns.NewLine(),
		active:     map[string]chan struct{}{},
		tracer:     o.Tracer,
	}
	s.walkers.cores = walkerCores(o.Live, o.Engine)
	if s.tracer == nil {
		s.tracer = noop.NewTracerProvider().Tracer(TracerName)
	}
	s.health = health.New(health.Options{Logger: o.Logger, RetryBackoffMin: o.RetryBackoffMin, RetryBackoffMax: o.RetryBackoffMax,
		OnChange: func(dep string, up bool) {
			if s.m != nil {
				v := 0.0
				if up {
					v = 1
				}
				s.m.depUp.WithLabelValues(dep).Set(v)
			}
		},
		OnFailure: func(dep string) { s.m.retries.WithLabelValues(dep).Inc() }})
	m, err := newMetrics(o.Registry, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	if err := s.graphs.init(s); err != nil {
		return nil, err
	}
	s.m.graphBytes.Set(float64(o.Graph.MemoryBytes()))
	return s, nil
}

// Listen binds the metrics address now (so a caller can learn the port of
// ":0" before Run); Run calls it when the caller has not.
func (s *Stage) Listen() (net.Addr, error) {
	if s.ln == nil && s.o.Listener != nil {
		s.ln = s.o.Listener
	}
	if s.ln != nil {
		return s.ln.Addr(), nil
	}
	if s.o.MetricsAddr == "" {
		return nil, errors.New("stage: no metrics address")
	}
	ln, err := net.Listen("tcp", s.o.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("stage: listen on %s: %w", s.o.MetricsAddr, err)
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Run processes requests until ctx is cancelled, then shuts down
// gracefully: it stops fetching, finishes what it holds within
// ShutdownTimeout, abandons the rest (uncommitted, so the group redelivers
// it) and returns nil. Any actor's failure stops all of them and is returned.
func (s *Stage) Run(ctx context.Context) error {
	// fetchCtx ends at shutdown; workCtx outlives it by at most
	// ShutdownTimeout, so in-flight batches can finish.
	fetchCtx, cancelFetch := context.WithCancel(ctx)
	defer cancelFetch()
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	// Stopping the work stops fetching too (an actor failed, or the deadline).
	context.AfterFunc(workCtx, cancelFetch)
	stopDeadline := context.AfterFunc(ctx, func() {
		s.draining.Store(true)
		s.log.Info("shutting down: no new requests; finishing in-flight batches", "deadline_seconds", s.o.ShutdownTimeout.Seconds())
		t := time.AfterFunc(s.o.ShutdownTimeout, func() {
			s.log.Warn("shutdown deadline reached: abandoning unfinished batches (they stay uncommitted)")
			cancelWork()
		})
		context.AfterFunc(workCtx, func() { t.Stop() })
	})
	defer stopDeadline()

	drained := make(chan struct{}) // closed when every fetched batch is finished or abandoned
	g := group{log: s.log}
	// The group stops everything when the first actor returns, so on a
	// graceful shutdown only the sink actor returns first (once drained);
	// the source and engine actors wait for that after their own work.
	g.add("source", func() error {
		if err := s.sourceLoop(fetchCtx, workCtx); err != nil {
			return err
		}
		select {
		case <-drained:
		case <-workCtx.Done():
		}
		return nil
	}, cancelWork)
	g.add("engine", func() error {
		if err := s.engineLoop(workCtx, drained); err != nil {
			return err
		}
		<-drained
		return nil
	}, cancelWork)
	g.add("sink", func() error {
		<-drained
		return nil
	}, cancelWork)
	if len(s.o.Probes) > 0 {
		probeCtx, stopProbes := context.WithCancel(workCtx)
		g.add("probes", func() error {
			s.health.RunProbes(probeCtx, s.o.Probes, s.o.ProbeInterval, s.o.ProbeTimeout)
			return nil
		}, stopProbes)
	}
	s.graphs.addActors(&g, workCtx)
	if err := s.addLiveActors(&g, workCtx); err != nil {
		return err
	}
	if s.o.MetricsAddr != "" || s.o.Listener != nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
		srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
		g.add("http", func() error {
			if err := srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		}, func() {
			sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
			defer c()
			srv.Shutdown(sctx)
		})
	}
	return g.run()
}

// EngineName is the engine's name ("cpu" or "gpu"), as recorded in outputs.
func (s *Stage) EngineName() string { return s.graphs.serving().e.Name() }
