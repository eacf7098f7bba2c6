package loadgen

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// Modes of a measurement.
const (
	ModeBacklog = "backlog" // produce every request at once, measure until the last event
	ModeIdle    = "idle"    // one request at a time, the next after the previous one's event
	// ModeBeside is the idle series with Config.Expensive produced first
	// (after the warm-up): what small requests see while an expensive one
	// walks (issue 32).
	ModeBeside = "beside"
)

// Phases of a backlog, for a true backlog: every request produced while the
// stage is stopped (PhaseProduce), then the stage started while a second
// run reads the events (PhaseCollect). The rate of a collect is from the
// first event to the last, so neither the stage's start-up nor the produce
// calls are in it: the stage meets a queue that is already full, as after
// an outage or a deploy. PhaseAll produces and collects in one run, against
// a stage that is already running.
const (
	PhaseAll     = ""
	PhaseProduce = "produce"
	PhaseCollect = "collect"
)

// Result is what one measurement saw.
type Result struct {
	Mode, Output string
	Phase        string
	Requests     int

	// Backlog: Elapsed is the first produce call to the last event read;
	// FirstToLast the first event read to the last, and FirstEvent the
	// work (walk vertices or queries) of the first event, which falls
	// before that window. Idle: Elapsed is the whole series.
	Elapsed, FirstToLast time.Duration
	FirstEvent           int64

	// Sums over the measured events.
	Walks, Steps, Queries, Candidates int64
	// Bytes written (the manifests' sizes), when a bucket was given to
	// AddBytes; -1 otherwise.
	Bytes int64

	// Per measured request, in arrival order:
	// ProduceToEvent: the produce call (acks=all) to the event read here
	// (idle only: in a backlog it is mostly queueing).
	// FetchToEvent: the stage's fetch of the request to the event read
	// here; the fetch is the event's completed_at less its
	// timings.total_seconds, so this is the whole stage, the durable
	// (acks=all) publish of the event and its delivery to a consumer.
	// StageTotal: the event's timings.total_seconds (fetch to the start
	// of the publish).
	ProduceToEvent, FetchToEvent, StageTotal []time.Duration

	// Beside: the expensive request's produce to its event, and how many
	// of the measured requests had their event before it.
	Expensive       time.Duration
	SmallBeforeDone int

	// A live graph's watermark as the events saw it: the most edge-topic
	// records (summed over partitions) an event's edge_offsets covered,
	// and when the first event covering that many was read, from the
	// start of the run (a collect's: when it watched, before the stage
	// started). With a backlog of edge updates queued beside the
	// requests, that is when the stage walked on all of them.
	EdgeRecords   int64
	EdgeCoveredAt time.Duration

	// Events of other batches (another run's) and repeated events
	// (at-least-once redeliveries) seen and not counted.
	Ignored, Duplicates int

	manifests []string
}

// During is, in the beside mode, produce -> event of the measured
// requests whose event came before the expensive request's.
func (r *Result) During() []time.Duration {
	return r.ProduceToEvent[:min(r.SmallBeforeDone, len(r.ProduceToEvent))]
}

// WalkVertices is the walks' vertex count: every walk has one more vertex
// than it has steps.
func (r *Result) WalkVertices() int64 { return r.Walks + r.Steps }

// work is the unit rates are given in: walk vertices, queries, or
// sampled edges (a sampling event's steps).
func (r *Result) work() int64 {
	switch r.Output {
	case OutputVisits:
		return r.Queries
	case OutputSamples:
		return r.Steps
	}
	return r.WalkVertices()
}

// Run produces the requests of c in the given mode, drawing seeds from
// pool, and reads the events until every request has one. Any dead letter
// or event other than succeeded for a request of this run fails it.
func Run(ctx context.Context, c Config, mode string, pool []int64) (*Result, error) {
	if err := c.Normalize(); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("load: empty seed pool")
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	w, err := watch(ctx, c.Brokers, c.EventTopic, c.DLQTopic)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	defer w.Close()
	p, err := newProducer(c.Brokers)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	defer p.Close()
	if c.Phase != PhaseAll && mode != ModeBacklog {
		return nil, fmt.Errorf("load: phase %q is for the backlog mode, not %s", c.Phase, mode)
	}
	if c.OnWatching != nil {
		c.OnWatching()
	}
	r := &Result{Mode: mode, Output: c.Output, Phase: c.Phase, Requests: c.Requests, Bytes: -1}
	switch mode {
	case ModeBacklog:
		err = backlog(ctx, &c, pool, p, w, r)
	case ModeIdle:
		err = idle(ctx, &c, pool, p, w, r)
	case ModeBeside:
		err = beside(ctx, &c, pool, p, w, r)
	default:
		err = fmt.Errorf("mode %q: want backlog, idle or beside", mode)
	}
	if err != nil {
		return r, fmt.Errorf("load %s: %w", mode, err)
	}
	return r, nil
}

// collector matches arrivals to the run's outstanding batch ids.
type collector struct {
	c       *Config
	w       *watcher
	r       *Result
	pending map[string]time.Time // batch id -> produced at (zero: not measured)
	last    time.Time            // when the last measured event was read
	start   time.Time            // the run's start, for Result.EdgeCoveredAt
	// watch is a batch id not measured whose event time is kept in
	// watched (beside: the expensive request).
	watch   string
	watched time.Time
	before  int // measured events read before watch's
}

// until reads arrivals until done says so, counting the measured ones
// into r.
func (k *collector) until(ctx context.Context, done func() bool) error {
	for !done() {
		var a arrival
		var ok bool
		select {
		case a, ok = <-k.w.out:
			if !ok {
				select {
				case err := <-k.w.errc:
					return err
				default:
				}
				return fmt.Errorf("%w waiting for %d events", ctx.Err(), len(k.pending))
			}
		case err := <-k.w.errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%w waiting for %d events", ctx.Err(), len(k.pending))
		}
		id := a.ev.BatchID
		if a.dead || id == "" {
			id = a.key
		}
		produced, ours := k.pending[id]
		if !ours && !strings.HasPrefix(id, k.c.IDPrefix+"-") {
			k.r.Ignored++
			continue
		}
		if err := failure(a); err != nil {
			return err
		}
		if !ours {
			k.r.Duplicates++
			continue
		}
		delete(k.pending, id)
		if id == k.watch {
			k.watched = a.at
		}
		if !produced.IsZero() { // zero: a warm-up
			k.count(a, produced)
		}
	}
	return nil
}

func (k *collector) count(a arrival, produced time.Time) {
	r, ev := k.r, a.ev
	k.last = a.at
	if k.watch != "" && k.watched.IsZero() {
		k.before++
	}
	total := time.Duration(ev.Timings.Total * float64(time.Second))
	fetched := ev.CompletedAt.Add(-total)
	r.ProduceToEvent = append(r.ProduceToEvent, a.at.Sub(produced))
	r.FetchToEvent = append(r.FetchToEvent, a.at.Sub(fetched))
	r.StageTotal = append(r.StageTotal, total)
	r.Walks += ev.Walks
	r.Steps += ev.Steps
	r.Queries += ev.Queries
	r.Candidates += ev.Candidates
	if ev.Manifest != "" {
		r.manifests = append(r.manifests, ev.Manifest)
	}
	var held int64
	for _, o := range ev.EdgeOffsets {
		held += o
	}
	if held > r.EdgeRecords {
		r.EdgeRecords, r.EdgeCoveredAt = held, a.at.Sub(k.start)
	}
}

func backlog(ctx context.Context, c *Config, pool []int64, p *kgo.Client, w *watcher, r *Result) error {
	keys := make([]string, c.Requests)
	bodies := make([][]byte, c.Requests)
	for i := range keys {
		keys[i], bodies[i] = c.Request(i, pool)
	}
	t0 := time.Now()
	k := &collector{c: c, w: w, r: r, pending: map[string]time.Time{}, start: t0}
	for _, id := range keys {
		k.pending[id] = t0
	}
	if c.Phase != PhaseCollect {
		if err := produce(ctx, p, c.RequestTopic, keys, bodies); err != nil {
			return err
		}
	}
	if c.Phase == PhaseProduce {
		r.Elapsed = time.Since(t0)
		return nil
	}
	// The first event alone, to time the window after it.
	if err := k.until(ctx, func() bool { return len(r.ProduceToEvent) > 0 }); err != nil {
		return err
	}
	first := k.last
	r.FirstEvent = r.work()
	if err := k.until(ctx, func() bool { return len(k.pending) == 0 }); err != nil {
		return err
	}
	r.Elapsed, r.FirstToLast = k.last.Sub(t0), k.last.Sub(first)
	return nil
}

func idle(ctx context.Context, c *Config, pool []int64, p *kgo.Client, w *watcher, r *Result) error {
	k := &collector{c: c, w: w, r: r, pending: map[string]time.Time{}}
	return k.series(ctx, pool, p, nil)
}

// beside is idle with the expensive request produced after the warm-up,
// then waited for once the series is done.
func beside(ctx context.Context, c *Config, pool []int64, p *kgo.Client, w *watcher, r *Result) error {
	if c.Expensive == "" {
		return fmt.Errorf("the beside mode needs an expensive request")
	}
	key, body := c.ExpensiveRequest()
	k := &collector{c: c, w: w, r: r, pending: map[string]time.Time{}, watch: key}
	var t0 time.Time
	err := k.series(ctx, pool, p, func() error {
		k.pending[key] = time.Time{} // not measured with the series
		t0 = time.Now()
		return produce(ctx, p, c.RequestTopic, []string{key}, [][]byte{body})
	})
	if err != nil {
		return err
	}
	r.SmallBeforeDone = k.before
	if err := k.until(ctx, func() bool { _, left := k.pending[key]; return !left }); err != nil {
		return fmt.Errorf("expensive request %s: %w", key, err)
	}
	r.Expensive = k.watched.Sub(t0)
	return nil
}

// series produces c's warm-up and measured requests one at a time, each
// after the previous one's event; afterWarmup, when set, runs between them.
func (k *collector) series(ctx context.Context, pool []int64, p *kgo.Client, afterWarmup func() error) error {
	c, r := k.c, k.r
	var t0 time.Time
	for i := range c.Warmup + c.Requests {
		if i == c.Warmup && afterWarmup != nil {
			if err := afterWarmup(); err != nil {
				return err
			}
		}
		key, body := c.Request(i, pool)
		var at time.Time // zero: a warm-up, not measured
		if i >= c.Warmup {
			// The produce call is where a user's latency starts.
			at = time.Now()
			if t0.IsZero() {
				t0 = at
			}
		}
		k.pending[key] = at
		if err := produce(ctx, p, c.RequestTopic, []string{key}, [][]byte{body}); err != nil {
			return err
		}
		if err := k.until(ctx, func() bool { _, left := k.pending[key]; return !left }); err != nil {
			return fmt.Errorf("request %d (%s): %w", i, key, err)
		}
		if c.Gap > 0 && i < c.Warmup+c.Requests-1 {
			select {
			case <-time.After(c.Gap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	r.Elapsed = time.Since(t0)
	return nil
}

// AddBytes sums the sizes listed in the measured batches' manifests, read
// from the bucket the stage writes to (bucketURL as the stage's
// WALKSTAGE_OUTPUT_URL), into r.Bytes.
func (r *Result) AddBytes(ctx context.Context, bucketURL string) error {
	b, err := store.OpenBucket(ctx, bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	base := store.ObjectURL(bucketURL, "")
	var (
		mu    sync.Mutex
		total int64
		errs  []error
		wg    sync.WaitGroup
		next  = make(chan string)
	)
	for range 8 {
		wg.Go(func() {
			for u := range next {
				key, ok := strings.CutPrefix(u, base)
				if !ok {
					mu.Lock()
					errs = append(errs, fmt.Errorf("manifest %s is not in bucket %s", u, base))
					mu.Unlock()
					continue
				}
				m, err := output.ReadManifest(ctx, b, key)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					total += m.Bytes
				}
				mu.Unlock()
			}
		})
	}
	for _, u := range r.manifests {
		next <- u
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("read %d manifests: %d failed, the first: %w", len(r.manifests), len(errs), errs[0])
	}
	r.Bytes = total
	return nil
}

// Quantile is the q-quantile of ds (nearest rank), 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Report writes r for a reader, then one line "RESULT k=v ..." for scripts.
func (r *Result) Report(w io.Writer) {
	unit := "M walk vertices/s"
	scale := 1e6
	switch r.Output {
	case OutputVisits:
		unit, scale = "queries/s", 1
	case OutputSamples:
		unit = "M sampled edges/s"
	}
	sec := r.Elapsed.Seconds()
	if r.Phase == PhaseProduce {
		fmt.Fprintf(w, "produced %d %s requests in %.3f s; collect their events with --phase collect\n", r.Requests, r.Output, sec)
		return
	}
	rate := r.work()
	if r.Phase == PhaseCollect {
		// The stage started after the requests were queued: the rate is
		// over the window from the first event to the last (the first
		// event's work falls before it), the stage's steady state.
		sec, rate = r.FirstToLast.Seconds(), r.work()-r.FirstEvent
		fmt.Fprintf(w, "backlog already queued when the stage started: ")
	}
	fmt.Fprintf(w, "%s %s: %d requests in %.3f s: %.1f requests/s", r.Mode, r.Output, r.Requests, sec, float64(r.Requests)/sec)
	if r.Mode == ModeBacklog && r.Phase == PhaseCollect {
		fmt.Fprintf(w, ", %.1f %s from the first event to the last", float64(rate)/sec/scale, unit)
	} else if r.Mode == ModeBacklog {
		fmt.Fprintf(w, ", %.1f %s", float64(r.work())/sec/scale, unit)
		if win := r.FirstToLast.Seconds(); win > 0 {
			fmt.Fprintf(w, " (%.1f from the first event to the last)", float64(r.work()-r.FirstEvent)/win/scale)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  walks %d, steps %d, walk vertices %d", r.Walks, r.Steps, r.WalkVertices())
	if r.Output == OutputVisits {
		fmt.Fprintf(w, ", queries %d, candidates %d", r.Queries, r.Candidates)
	}
	if r.Bytes >= 0 {
		fmt.Fprintf(w, ", %.1f MB written (%.1f MB/s", float64(r.Bytes)/1e6, float64(r.Bytes)/1e6/sec)
		if v := r.WalkVertices(); v > 0 && r.Output == OutputWalks {
			fmt.Fprintf(w, ", %.2f bytes per walk vertex", float64(r.Bytes)/float64(v))
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	lat := func(name string, ds []time.Duration) {
		fmt.Fprintf(w, "  %-17s p50 %8.2f ms  p95 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", name,
			ms(Quantile(ds, 0.50)), ms(Quantile(ds, 0.95)), ms(Quantile(ds, 0.99)), ms(Quantile(ds, 1)))
	}
	if r.Mode == ModeIdle || r.Mode == ModeBeside {
		lat("produce -> event", r.ProduceToEvent)
	}
	if r.Mode == ModeBeside {
		lat("  while it walked", r.During())
		fmt.Fprintf(w, "  expensive request: its event %.3f s after its produce; %d of the %d measured requests had their event before it\n",
			r.Expensive.Seconds(), r.SmallBeforeDone, len(r.ProduceToEvent))
	}
	lat("fetch -> event", r.FetchToEvent)
	lat("fetch -> publish", r.StageTotal)
	if r.EdgeRecords > 0 {
		fmt.Fprintf(w, "  live graph: the events' watermark reached %d edge records %.3f s after the start\n", r.EdgeRecords, r.EdgeCoveredAt.Seconds())
	}
	if r.Ignored > 0 || r.Duplicates > 0 {
		fmt.Fprintf(w, "  ignored %d events of other batches, %d repeated events\n", r.Ignored, r.Duplicates)
	}
	_, vertices, queries := r.window()
	fmt.Fprintf(w, "RESULT mode=%s output=%s requests=%d seconds=%.3f requests_per_s=%.2f walk_vertices_per_s=%.0f queries_per_s=%.1f bytes=%d"+
		" produce_event_p50_ms=%.2f produce_event_p99_ms=%.2f fetch_event_p50_ms=%.2f fetch_event_p95_ms=%.2f fetch_event_p99_ms=%.2f fetch_publish_p99_ms=%.2f expensive_s=%.3f before_expensive=%d during_p99_ms=%.2f during_max_ms=%.2f edge_records=%d edge_covered_s=%.3f\n",
		r.Mode, r.Output, r.Requests, sec, float64(r.Requests)/sec, float64(vertices)/sec, float64(queries)/sec, r.Bytes,
		ms(Quantile(r.ProduceToEvent, 0.5)), ms(Quantile(r.ProduceToEvent, 0.99)),
		ms(Quantile(r.FetchToEvent, 0.5)), ms(Quantile(r.FetchToEvent, 0.95)), ms(Quantile(r.FetchToEvent, 0.99)),
		ms(Quantile(r.StageTotal, 0.99)), r.Expensive.Seconds(), r.SmallBeforeDone, ms(Quantile(r.During(), 0.99)), ms(Quantile(r.During(), 1)),
		r.EdgeRecords, r.EdgeCoveredAt.Seconds())
}

// window is what the rates are over: the seconds, and the walk vertices
// and queries in them. That is the whole measurement, but for a collect
// the first event to the last (the stage started after the requests were
// queued), without the first event's work.
func (r *Result) window() (sec float64, vertices, queries int64) {
	sec, vertices, queries = r.Elapsed.Seconds(), r.WalkVertices(), r.Queries
	if r.Phase == PhaseCollect {
		sec = r.FirstToLast.Seconds()
		if r.Output == OutputVisits {
			queries -= r.FirstEvent
		} else {
			vertices -= r.FirstEvent // samples: the first event's edges (instances are not in work)
		}
	}
	return sec, vertices, queries
}

// Summary is a measurement as load --json prints it: the figures of the
// RESULT line, with durations in seconds under _seconds keys and rates
// per second (docs/reference/vocabulary.md). Bytes is -1 when no bucket
// was read. DurationSeconds and the rates are over Result.window; a
// produce phase has only the requests and the seconds they took.
type Summary struct {
	Mode                  string  `json:"mode"`
	Phase                 string  `json:"phase,omitempty"`
	Output                string  `json:"output"`
	Requests              int     `json:"requests"`
	DurationSeconds       float64 `json:"duration_seconds"`
	RequestsPerSecond     float64 `json:"requests_per_second"`
	Walks                 int64   `json:"walks"`
	Steps                 int64   `json:"steps"`
	WalkVerticesPerSecond float64 `json:"walk_vertices_per_second"`
	Queries               int64   `json:"queries"`
	Candidates            int64   `json:"candidates"`
	QueriesPerSecond      float64 `json:"queries_per_second"`
	Bytes                 int64   `json:"bytes"`
	// Quantiles of the latencies (Result's ProduceToEvent, FetchToEvent,
	// StageTotal); produce_to_event is measured in the idle and beside
	// modes only (0 otherwise).
	ProduceToEventP50Seconds float64 `json:"produce_to_event_p50_seconds"`
	ProduceToEventP99Seconds float64 `json:"produce_to_event_p99_seconds"`
	FetchToEventP50Seconds   float64 `json:"fetch_to_event_p50_seconds"`
	FetchToEventP95Seconds   float64 `json:"fetch_to_event_p95_seconds"`
	FetchToEventP99Seconds   float64 `json:"fetch_to_event_p99_seconds"`
	FetchToPublishP99Seconds float64 `json:"fetch_to_publish_p99_seconds"`
	// Beside: the expensive request's produce to its event, the measured
	// requests whose event came before it, and their latency meanwhile.
	ExpensiveSeconds float64 `json:"expensive_seconds,omitempty"`
	BeforeExpensive  int     `json:"before_expensive,omitempty"`
	DuringP99Seconds float64 `json:"during_p99_seconds,omitempty"`
	DuringMaxSeconds float64 `json:"during_max_seconds,omitempty"`
	// A live graph's watermark (Result.EdgeRecords, EdgeCoveredAt).
	EdgeRecords        int64   `json:"edge_records,omitempty"`
	EdgeCoveredSeconds float64 `json:"edge_covered_seconds,omitempty"`
	IgnoredEvents      int     `json:"ignored_events"`
	DuplicateEvents    int     `json:"duplicate_events"`
}

// Summary returns r's figures for a JSON line.
func (r *Result) Summary() Summary {
	sec, vertices, queries := r.window()
	s := func(ds []time.Duration, q float64) float64 { return Quantile(ds, q).Seconds() }
	return Summary{Mode: r.Mode, Phase: r.Phase, Output: r.Output, Requests: r.Requests, DurationSeconds: sec,
		RequestsPerSecond: perSecond(float64(r.Requests), sec), Walks: r.Walks, Steps: r.Steps,
		WalkVerticesPerSecond: perSecond(float64(vertices), sec), Queries: r.Queries, Candidates: r.Candidates,
		QueriesPerSecond: perSecond(float64(queries), sec), Bytes: r.Bytes,
		ProduceToEventP50Seconds: s(r.ProduceToEvent, 0.5), ProduceToEventP99Seconds: s(r.ProduceToEvent, 0.99),
		FetchToEventP50Seconds: s(r.FetchToEvent, 0.5), FetchToEventP95Seconds: s(r.FetchToEvent, 0.95),
		FetchToEventP99Seconds: s(r.FetchToEvent, 0.99), FetchToPublishP99Seconds: s(r.StageTotal, 0.99),
		ExpensiveSeconds: r.Expensive.Seconds(), BeforeExpensive: r.SmallBeforeDone,
		DuringP99Seconds: s(r.During(), 0.99), DuringMaxSeconds: s(r.During(), 1),
		EdgeRecords: r.EdgeRecords, EdgeCoveredSeconds: r.EdgeCoveredAt.Seconds(),
		IgnoredEvents: r.Ignored, DuplicateEvents: r.Duplicates}
}

// perSecond is n/sec, 0 for no time: JSON has no infinity.
func perSecond(n, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return n / sec
}
