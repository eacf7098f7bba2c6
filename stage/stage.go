package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/source"
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
	Publish(ctx context.Context, ev source.Event) error
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
	QueueDepth            int
	MaxInFlight           int
	ChunkBuffer           int
	// RetryBackoffMin and RetryBackoffMax bound the wait between retries of
	// work that failed on a dependency (exponential, with jitter).
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Probes check the dependencies every ProbeInterval, each within
	// ProbeTimeout; a failure marks the stage not ready and pauses fetching
	// until the probe passes again.
	Probes        []Probe
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
	setInt(&o.MicroBatchMaxRequests, 64)
	setInt(&o.QueueDepth, 64)
	setInt(&o.MaxInFlight, 16)
	setInt(&o.ChunkBuffer, 4)
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
	return nil
}

// Stage runs the pipeline: source loop -> (bounded queue) -> engine loop ->
// per-batch writers -> finishers that commit the objects, publish the event
// and acknowledge the message.
type Stage struct {
	o   Options
	log *slog.Logger
	m   *metrics

	queue chan *batch   // validated requests waiting for the engine
	slots chan struct{} // MaxInFlight tokens: batches between launch and ack

	engineMu sync.Mutex // one engine Run at a time (walk.Engine contract)
	finishes sync.WaitGroup
	fatal    chan error // a finisher's unrecoverable error stops the stage
	draining atomic.Bool
	health   *health
	ln       net.Listener

	// active maps the batch ids this replica holds (queued to acked) to a
	// channel closed when the batch leaves. A redelivery of a batch still
	// in flight here (after a rebalance) waits for it instead of writing the
	// same objects concurrently, where one copy's abort could delete the
	// other's parts.
	activeMu sync.Mutex
	active   map[string]chan struct{}

	graphs graphState // the graph version walked, and its swaps (graphs.go)
}

// batch is one request on its way through the stage.
type batch struct {
	d        *source.Delivery
	req      *source.Request
	walks    int
	queuedAt time.Time // = fetched
	launched time.Time
	walked   time.Duration
	emitted  time.Time // when the engine run it took part in ended

	w       *sink.BatchWriter
	chunks  chan walk.Chunk
	written chan struct{} // closed when the writer goroutine has drained chunks
	wErr    error         // first Write error
	gotW    int64         // walks received from the engine
	steps   int64
	attempt int
	// failedDep names the dependency the last failed attempt failed on:
	// engine (walking) or object_store (writing, committing the objects).
	failedDep string
	// existing is the batch's complete output found before walking (a
	// redelivery of a batch already done): it is reported, not rewritten.
	// lookupErr is why the lookup failed (a conflict, or the store).
	existing  *sink.Manifest
	lookupErr error
	v         *served // graph version walked on, held until finished (graphs.go)
}

// New checks the options and registers the metrics.
func New(o Options) (*Stage, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Stage{
		o:      o,
		log:    o.Logger,
		queue:  make(chan *batch, o.QueueDepth),
		slots:  make(chan struct{}, o.MaxInFlight),
		fatal:  make(chan error, 1),
		active: map[string]chan struct{}{},
	}
	s.health = newHealth(func(dep string, up bool) {
		if s.m != nil {
			v := 0.0
			if up {
				v = 1
			}
			s.m.depUp.WithLabelValues(dep).Set(v)
		}
	})
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
		s.log.Info("shutting down: no new requests; finishing in-flight batches", "deadline", s.o.ShutdownTimeout)
		t := time.AfterFunc(s.o.ShutdownTimeout, func() {
			s.log.Warn("shutdown deadline reached: abandoning unfinished batches (they stay uncommitted)")
			cancelWork()
		})
		context.AfterFunc(workCtx, func() { t.Stop() })
	})
	defer stopDeadline()

	drained := make(chan struct{}) // closed when every fetched batch is finished or abandoned
	var g group
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
		select {
		case err := <-s.fatal:
			return err
		case <-drained:
			return nil
		}
	}, cancelWork)
	if len(s.o.Probes) > 0 {
		probeCtx, stopProbes := context.WithCancel(workCtx)
		g.add("probes", func() error {
			s.probeLoop(probeCtx)
			return nil
		}, stopProbes)
	}
	s.graphs.addActors(&g, workCtx)
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

// sourceLoop fetches until fetchCtx ends, then closes the queue. While a
// dependency is down it fetches nothing new (the work it holds retries); a
// failed fetch is the broker's trouble, retried with back-off.
func (s *Stage) sourceLoop(fetchCtx, workCtx context.Context) error {
	defer close(s.queue)
	fetchFailures := 0
	for {
		if fetchFailures == 0 && !s.waitHealthy(fetchCtx) {
			return nil
		}
		d, err := s.o.Source.Next(fetchCtx)
		if err != nil {
			if fetchCtx.Err() != nil {
				return nil
			}
			if errors.Is(err, source.ErrClosed) {
				return err
			}
			fetchFailures++
			s.dependencyFailed(depBroker, "fetch", err)
			if !sleepCtx(fetchCtx, backoff(fetchFailures, s.o.RetryBackoffMin, s.o.RetryBackoffMax)) {
				return nil
			}
			continue
		}
		if fetchFailures > 0 {
			fetchFailures = 0
			s.dependencyOK(depBroker)
		}
		if d.Reject != nil {
			if err := s.refuse(workCtx, d, d.Reject, nil); err != nil {
				return nil // shutdown deadline: left uncommitted, redelivered
			}
			continue
		}
		b := &batch{d: d, req: d.Request, walks: d.Request.NumWalks(), queuedAt: d.Received}
		if !s.claim(workCtx, b.req.BatchID) {
			return nil
		}
		select {
		case s.queue <- b:
			s.m.queued.Inc()
		case <-workCtx.Done():
			s.leave(b.req.BatchID)
			return nil
		}
	}
}

// waitHealthy returns once every dependency is up (true) or ctx ends
// (false). This is the pause: nothing new is fetched while the stage could
// not finish it.
func (s *Stage) waitHealthy(ctx context.Context) bool {
	for s.health.err() != nil {
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false
		}
	}
	return ctx.Err() == nil
}

// probeLoop runs the dependency probes until ctx ends.
func (s *Stage) probeLoop(ctx context.Context) {
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		for _, p := range s.o.Probes {
			pctx, cancel := context.WithTimeout(ctx, s.o.ProbeTimeout)
			err := p.Check(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.dependencyFailed(p.Name, "probe", err)
			} else {
				s.dependencyOK(p.Name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Stage) dependencyFailed(dep, op string, err error) {
	s.m.retries.WithLabelValues(dep).Inc()
	if s.health.fail(dep, err) {
		s.log.Warn("dependency unavailable: not ready, pausing consumption, retrying with back-off",
			"dependency", dep, "op", op, "err", err)
	}
}

func (s *Stage) dependencyOK(dep string) {
	if d := s.health.ok(dep); d > 0 {
		s.log.Info("dependency available again: resuming", "dependency", dep, "outage", d.Round(time.Millisecond))
	}
}

// persist runs f until it succeeds, retrying a failure as the given
// dependency's outage with capped, jittered back-off. It returns nil, or
// ctx's error once ctx ends (the shutdown deadline).
func (s *Stage) persist(ctx context.Context, dep, op string, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			s.dependencyOK(dep)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.dependencyFailed(dep, op, err)
		if !sleepCtx(ctx, backoff(attempt, s.o.RetryBackoffMin, s.o.RetryBackoffMax)) {
			return ctx.Err()
		}
	}
}

// claim registers id as held by this replica, first waiting for an
// earlier copy of it to leave. False means ctx ended while waiting.
func (s *Stage) claim(ctx context.Context, id string) bool {
	for {
		s.activeMu.Lock()
		ch, busy := s.active[id]
		if !busy {
			s.active[id] = make(chan struct{})
			s.activeMu.Unlock()
			return true
		}
		s.activeMu.Unlock()
		s.log.Info("batch redelivered while still in flight here; waiting for the first copy", "batch_id", id)
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// leave releases id (see claim).
func (s *Stage) leave(id string) {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if ch, ok := s.active[id]; ok {
		close(ch)
		delete(s.active, id)
	}
}

// refuse reports a request error: a "rejected" completion event, then the
// acknowledgement that dead-letters and commits the message. Broker
// trouble on the way is retried, never the request's fault; the error is
// ctx's, at the shutdown deadline (the message stays uncommitted). b, when
// set, is the batch found invalid after it was queued.
func (s *Stage) refuse(ctx context.Context, d *source.Delivery, re *source.RejectError, b *batch) error {
	log := s.log.With("batch_id", re.BatchID, "reason", string(re.Reason))
	v := s.graphs.serving()
	if b != nil && b.v != nil {
		v = b.v
	}
	ev := source.Event{BatchID: re.BatchID, Status: source.StatusRejected, Reason: string(re.Reason), Error: re.Msg,
		Graph: v.g.Name, GraphVersion: v.g.Version,
		Timings: source.Timings{Total: time.Since(d.Received).Seconds()}}
	if b != nil {
		ev.Algorithm, ev.Engine, ev.RNGSeed, ev.Seeds = b.req.Algorithm.Describe(v.g), v.e.Name(), b.req.RNGSeed, len(b.req.Seeds)
		ev.Timings.Queued = b.launched.Sub(b.queuedAt).Seconds()
	}
	if err := s.persist(ctx, depBroker, "publish rejection", func(ctx context.Context) error { return s.o.Events.Publish(ctx, ev) }); err != nil {
		return err
	}
	if err := s.persist(ctx, depBroker, "dead-letter", func(ctx context.Context) error { return d.Ack(ctx, re) }); err != nil {
		return err
	}
	s.m.batches.WithLabelValues(string(source.StatusRejected)).Inc()
	s.m.rejections.WithLabelValues(string(re.Reason)).Inc()
	log.Info("request rejected", "error", re.Msg)
	return nil
}

// engineLoop forms micro-batches from the queue and walks them.
func (s *Stage) engineLoop(ctx context.Context, drained chan<- struct{}) error {
	defer func() {
		s.finishes.Wait()
		close(drained)
	}()
	var carry *batch
	for {
		var first *batch
		if carry != nil {
			first, carry = carry, nil
		} else {
			select {
			case b, ok := <-s.queue:
				if !ok {
					return nil
				}
				first = b
			case <-ctx.Done():
				s.abandonQueued()
				return nil
			}
		}
		mb := []*batch{first}
		walks := first.walks
		closed := false
		if s.o.MicroBatchMaxWait > 0 {
			timer := time.NewTimer(s.o.MicroBatchMaxWait)
		collect:
			for len(mb) < s.o.MicroBatchMaxRequests && walks < s.o.MicroBatchMaxWalks {
				select {
				case b, ok := <-s.queue:
					if !ok {
						closed = true
						break collect
					}
					if walks+b.walks > s.o.MicroBatchMaxWalks {
						carry = b
						break collect
					}
					mb, walks = append(mb, b), walks+b.walks
				case <-timer.C:
					break collect
				case <-ctx.Done():
					break collect
				}
			}
			timer.Stop()
		} else {
		drain:
			for len(mb) < s.o.MicroBatchMaxRequests && walks < s.o.MicroBatchMaxWalks {
				select {
				case b, ok := <-s.queue:
					if !ok {
						closed = true
						break drain
					}
					if walks+b.walks > s.o.MicroBatchMaxWalks {
						carry = b
						break drain
					}
					mb, walks = append(mb, b), walks+b.walks
				default:
					break drain
				}
			}
		}
		s.m.queued.Sub(float64(len(mb)))
		if err := s.launch(ctx, mb); err != nil {
			return err
		}
		if closed && carry == nil {
			return nil
		}
	}
}

// abandonQueued drops queued batches at the shutdown deadline: they were
// never started and stay uncommitted.
func (s *Stage) abandonQueued() {
	for b := range s.queue {
		s.m.queued.Dec()
		s.log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
		s.leave(b.req.BatchID)
	}
}

// launch takes an in-flight slot per batch, walks them in one engine run
// and hands each to a finisher.
func (s *Stage) launch(ctx context.Context, mb []*batch) error {
	for i := range mb {
		select {
		case s.slots <- struct{}{}:
			s.m.inFlight.Inc()
		case <-ctx.Done():
			for _, b := range mb[i:] {
				s.log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
				s.leave(b.req.BatchID)
			}
			for range mb[:i] {
				s.release()
			}
			return nil
		}
	}
	s.m.microBatchRequests.Observe(float64(len(mb)))
	runErr := s.walk(ctx, mb)
	for _, b := range mb {
		s.finishes.Add(1)
		go s.finish(ctx, b, runErr)
	}
	return nil
}

func (s *Stage) release() {
	<-s.slots
	s.m.inFlight.Dec()
}

// walk opens a writer per batch, runs the engine once for all of them and
// routes each chunk to its batch's writer. It returns the engine's error;
// writer errors are recorded per batch. On return every writer goroutine
// has finished (b.written closed).
func (s *Stage) walk(ctx context.Context, mb []*batch) error {
	// One graph version for the whole micro-batch (graphs.go).
	for _, b := range mb {
		b.unbind()
	}
	v := s.graphs.acquire(ctx)
	if v == nil {
		for _, b := range mb {
			b.written = make(chan struct{})
			close(b.written)
		}
		return ctx.Err()
	}
	defer v.release()
	jobs := make([]walk.Job, 0, len(mb))
	live := make([]*batch, 0, len(mb))
	now := time.Now()
	s.lookup(ctx, mb)
	for _, b := range mb {
		b.launched, b.attempt = now, b.attempt+1
		b.gotW, b.steps, b.wErr = 0, 0, nil
		b.written = make(chan struct{})
		if re := s.bind(b, v); re != nil {
			b.w, b.wErr = nil, re
			close(b.written)
			continue
		}
		if b.existing != nil || b.lookupErr != nil {
			b.w = nil
			close(b.written)
			continue
		}
		w, err := sink.NewBatchWriter(ctx, s.o.Bucket, s.o.Prefix, sink.BatchMeta{
			BatchID: b.req.BatchID, Algorithm: b.req.Algorithm, Seed: b.req.RNGSeed, Engine: v.e.Name(),
			WalkstageVersion: s.o.Version, Walks: int64(b.walks), Fingerprint: b.req.Fingerprint(),
		}, v.g, s.o.SinkOptions...)
		if err != nil {
			b.w, b.wErr = nil, fmt.Errorf("open writer: %w", err)
			close(b.written)
			continue
		}
		b.w = w
		b.chunks = make(chan walk.Chunk, s.o.ChunkBuffer)
		go s.write(ctx, b)
		jobs = append(jobs, b.req.Job(len(jobs)))
		live = append(live, b)
	}
	var runErr error
	if len(jobs) > 0 {
		s.engineMu.Lock()
		t0 := time.Now()
		runErr = v.e.Run(ctx, jobs, func(c walk.Chunk) error {
			b := live[c.Tag]
			b.gotW += int64(c.Len())
			b.steps += c.Steps()
			select {
			case b.chunks <- c:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		d := time.Since(t0)
		s.engineMu.Unlock()
		var steps int64
		for _, b := range live {
			b.walked = d
			steps += b.steps
			close(b.chunks)
		}
		s.m.engineRuns.Inc()
		s.m.engineSeconds.Add(d.Seconds())
		if sr, ok := v.e.(walk.StatsReporter); ok {
			s.m.engineBytes.Set(float64(sr.LastRunStats().MemoryBytes))
		}
		if runErr == nil {
			s.log.Debug("engine run", "batches", len(live), "walks", len(jobs), "steps", steps, "duration", d)
		}
	}
	end := time.Now()
	for _, b := range mb {
		<-b.written
		b.emitted = end
	}
	return runErr
}

// write feeds one batch's chunks to its writer. After a Write error it keeps
// draining, so the engine never blocks on a dead batch.
func (s *Stage) write(ctx context.Context, b *batch) {
	defer close(b.written)
	for c := range b.chunks {
		if b.wErr != nil {
			continue
		}
		if err := b.w.Write(ctx, c); err != nil {
			b.wErr = fmt.Errorf("write: %w", err)
		}
	}
}

// finish completes one batch after its engine run: commit the objects,
// publish the event, acknowledge. What fails splits in two classes. A
// request error found late (parameters the engine refuses, a batch id
// already used for another request) is refused like a bad message. Any
// other failure is a dependency's (engine, object store, broker), never the
// request's: the batch is retried alone, with capped back-off and for as
// long as it takes, while the stage reports not ready and fetches nothing
// new. At the shutdown deadline the batch is abandoned unacknowledged.
func (s *Stage) finish(ctx context.Context, b *batch, runErr error) {
	defer s.finishes.Done()
	defer s.release()
	defer s.leave(b.req.BatchID)
	defer b.unbind()
	log := s.log.With("batch_id", b.req.BatchID, "algorithm", b.req.Algorithm.Kind.String())
	for {
		err := s.complete(ctx, b, runErr)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			if b.w != nil {
				b.w.Abort(context.WithoutCancel(ctx))
			}
			log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)")
			return
		}
		if re := requestError(b, err); re != nil {
			if b.w != nil {
				b.w.Abort(context.WithoutCancel(ctx))
			}
			if s.refuse(ctx, b.d, re, b) != nil {
				log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)")
			}
			return
		}
		if errors.Is(err, walk.ErrEngineBroken) {
			s.health.breakEngine(err)
			log.Error("engine unusable: replica not ready, batch left uncommitted for another replica", "err", err)
			return
		}
		s.dependencyFailed(b.failedDep, "batch", err)
		log.Warn("batch attempt failed; retrying", "attempt", b.attempt, "dependency", b.failedDep, "err", err)
		if s.draining.Load() {
			// Shutting down: leave the retry to the next owner.
			log.Info("batch abandoned at shutdown after a failed attempt (uncommitted)")
			return
		}
		if !sleepCtx(ctx, backoff(b.attempt, s.o.RetryBackoffMin, s.o.RetryBackoffMax)) {
			continue // ctx is done: the next round abandons
		}
		runErr = s.walk(ctx, []*batch{b})
	}
}

// requestError is the rejection err amounts to, or nil when err is not the
// request's fault.
func requestError(b *batch, err error) *source.RejectError {
	var re *source.RejectError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, walk.ErrInvalidAlgorithm):
		return &source.RejectError{Reason: source.ReasonInvalidParameters, BatchID: b.req.BatchID, Msg: err.Error()}
	case sink.IsRequestError(err):
		return &source.RejectError{Reason: source.ReasonBatchIDConflict, BatchID: b.req.BatchID, Msg: err.Error()}
	}
	return nil
}

// complete is one attempt at finishing: writer errors and engine errors
// come back plain (retryable); failing to publish is fatal.
func (s *Stage) complete(ctx context.Context, b *batch, runErr error) error {
	if b.lookupErr != nil {
		b.failedDep = depStore
		return b.lookupErr
	}
	if b.existing != nil {
		return s.report(ctx, b, b.existing, s.manifestKey(b, b.existing), time.Now())
	}
	if runErr == nil && b.wErr == nil && b.gotW != int64(b.walks) {
		runErr = fmt.Errorf("engine emitted %d of %d walks", b.gotW, b.walks)
	}
	b.failedDep = depStore
	if runErr != nil {
		b.failedDep = depEngine
	}
	if err := errors.Join(runErr, b.wErr); err != nil {
		if b.w != nil {
			b.w.Abort(context.WithoutCancel(ctx))
		}
		return err
	}
	wt := time.Now()
	man, err := b.w.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit objects: %w", err)
	}
	if b.failedDep == depEngine {
		s.dependencyOK(depEngine)
	}
	return s.report(ctx, b, man, b.w.Layout().SuccessKey(), wt)
}

// report publishes the succeeded event of a batch whose output is durable
// (written now, or found complete by a redelivery), then acknowledges it.
func (s *Stage) report(ctx context.Context, b *batch, man *sink.Manifest, manifestKey string, wt time.Time) error {
	writing := time.Since(b.emitted)
	ev := source.Event{BatchID: b.req.BatchID, Status: source.StatusSucceeded,
		Graph: man.Graph, GraphVersion: man.GraphVersion, Algorithm: b.req.Algorithm.Describe(b.v.g), Engine: man.Engine,
		RNGSeed: b.req.RNGSeed, Seeds: len(b.req.Seeds), SkippedSeeds: b.req.Skipped, SkippedIDs: b.req.SkippedIDs,
		Walks: man.Walks, Steps: man.Steps,
		Manifest: sink.ObjectURL(s.o.BucketURL, manifestKey),
		Timings: source.Timings{Queued: b.launched.Sub(b.queuedAt).Seconds(), Walking: b.walked.Seconds(),
			Writing: writing.Seconds(), Total: time.Since(b.queuedAt).Seconds()}}
	for _, f := range man.Files {
		ev.Objects = append(ev.Objects, sink.ObjectURL(s.o.BucketURL, f.Key))
	}
	s.dependencyOK(depStore)
	// The objects are durable: from here only the event is retried, never
	// the walk. Abandoned at the deadline, the redelivery finds the output
	// complete and publishes it then.
	if err := s.persist(ctx, depBroker, "publish", func(ctx context.Context) error { return s.o.Events.Publish(ctx, ev) }); err != nil {
		s.log.Info("batch abandoned at shutdown with its output written (uncommitted; the redelivery reports it)", "batch_id", b.req.BatchID)
		return nil
	}
	if err := b.d.Ack(ctx, nil); err != nil {
		s.log.Warn("acknowledgement failed; the batch will be redelivered", "batch_id", b.req.BatchID, "err", err)
	}
	// The latency users see ends when the event is durable, not when it
	// was built.
	total := time.Since(b.queuedAt)
	s.m.batches.WithLabelValues(string(source.StatusSucceeded)).Inc()
	s.m.walks.Add(float64(man.Walks))
	s.m.steps.Add(float64(man.Steps))
	s.m.latency.Observe(total.Seconds())
	s.m.phase.WithLabelValues("queued").Observe(ev.Timings.Queued)
	s.m.phase.WithLabelValues("walking").Observe(ev.Timings.Walking)
	s.m.phase.WithLabelValues("writing").Observe(ev.Timings.Writing)
	s.log.Info("batch succeeded", "batch_id", b.req.BatchID, "algorithm", b.req.Algorithm.Kind.String(),
		"walks", man.Walks, "steps", man.Steps, "objects", len(man.Files), "duration", total,
		"commit", time.Since(wt))
	return nil
}

// lookup finds, for each batch, whether its complete output already exists
// (a redelivery after the event or the commit was lost): such a batch is
// reported from its manifest instead of walked again, and a batch id whose
// output came from a different request is a conflict, never overwritten.
// The lookups of a micro-batch run in parallel.
func (s *Stage) lookup(ctx context.Context, mb []*batch) {
	var wg sync.WaitGroup
	for _, b := range mb {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.existing, b.lookupErr = nil, nil
			m, err := sink.Lookup(ctx, s.o.Bucket, s.o.Prefix, b.req.BatchID, b.req.Fingerprint(), s.o.SinkOptions...)
			switch {
			case err != nil:
				b.lookupErr = fmt.Errorf("look for existing output: %w", err)
			case m != nil:
				b.existing = m
				s.log.Info("batch already complete (a redelivery): reporting its output without walking", "batch_id", b.req.BatchID,
					"graph_version", m.GraphVersion)
			}
		}()
	}
	wg.Wait()
}

// manifestKey is where a found manifest lives: beside its parts.
func (s *Stage) manifestKey(b *batch, m *sink.Manifest) string {
	if len(m.Files) > 0 {
		return path.Dir(m.Files[0].Key) + "/" + sink.SuccessName
	}
	l, err := sink.BatchLayout(s.o.Prefix, m.Graph, b.req.Algorithm.Kind.String(), b.req.BatchID)
	if err != nil {
		return ""
	}
	return l.SuccessKey()
}

func (s *Stage) fail(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
