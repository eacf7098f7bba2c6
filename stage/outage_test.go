package stage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk/cpu"
)

// memSource is an in-memory source: the stage's seam needs nothing of
// Kafka, so its fault handling is tested without a broker as well.
type memSource struct {
	ch   chan *source.Delivery
	mu   sync.Mutex
	acks map[string][]error // per batch id, the causes Ack was called with
}

func newMemSource() *memSource {
	return &memSource{ch: make(chan *source.Delivery, 16), acks: map[string][]error{}}
}

func (m *memSource) Next(ctx context.Context) (*source.Delivery, error) {
	select {
	case d := <-m.ch:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *memSource) send(t *testing.T, key, value string) {
	t.Helper()
	_, g := testGraphCached(t)
	d := &source.Delivery{Received: time.Now()}
	req, err := message.DecodeRequest([]byte(key), []byte(value), g, message.DefaultLimits())
	if err != nil {
		var re *message.RejectError
		if !errors.As(err, &re) {
			t.Fatal(err)
		}
		d.Reject = re
	} else {
		d.Request = req
	}
	d.Ack = func(ctx context.Context, cause error) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.acks[key] = append(m.acks[key], cause)
		return nil
	}
	m.ch <- d
}

func (m *memSource) acked(id string) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.acks[id]...)
}

// memEvents records published events; down makes Publish fail like an
// unreachable broker.
type memEvents struct {
	down atomic.Bool
	mu   sync.Mutex
	evs  []message.Event
}

func (e *memEvents) Publish(ctx context.Context, ev message.Event) error {
	if e.down.Load() {
		return errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	return nil
}

func (e *memEvents) all() []message.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]message.Event(nil), e.evs...)
}

// flakyS3 is gofakes3 behind a switch: while down, every request gets a
// 503, as from a store that is restarting.
func flakyS3(t *testing.T) (*blob.Bucket, *atomic.Bool) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	s3 := gofakes3.New(be).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "<Error><Code>ServiceUnavailable</Code></Error>", http.StatusServiceUnavailable)
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"} {
		os.Setenv(k, v)
	}
	b, err := store.OpenBucket(context.Background(), "s3://walks?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &down
}

// runMem runs a stage on an in-memory source and event sink.
func runMem(t *testing.T, b *blob.Bucket, src *memSource, evs *memEvents, opts ...func(*Options)) *Stage {
	t.Helper()
	_, g := testGraphCached(t)
	eng, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	o := Options{Graph: g, Engine: eng, Source: src, Events: evs, Bucket: b, BucketURL: "s3://walks", Prefix: "walks",
		RetryBackoffMin: 20 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond,
		ProbeInterval: 50 * time.Millisecond, ProbeTimeout: time.Second,
		Probes: []health.Probe{{Name: health.Store, Check: storeProbe(b, "s3://walks")}}, Logger: testLog(t)}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, context.Background(), s)
	return s
}

// serveInBackground runs s until the test ends, then stops it and fails
// the test if it exited with an error. What s's options hold (engine,
// bucket) must be closed by cleanups registered before this one, which
// run after it.
func serveInBackground(t testing.TB, ctx context.Context, s *Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stage exited with %v", err)
		}
	})
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStoreOutageIsRetriedNotDeadLettered: an object store that answers
// 503 for a while is an outage, not a bad request. The batch waits and
// retries, the stage reports not ready and says which dependency, nothing is
// dead-lettered or acknowledged meanwhile, and when the store returns the
// batch succeeds once and the stage is ready again by itself.
func TestStoreOutageIsRetriedNotDeadLettered(t *testing.T) {
	b, down := flakyS3(t)
	src, evs := newMemSource(), &memEvents{}
	s := runMem(t, b, src, evs)
	down.Store(true)
	src.send(t, "b1", `{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[1,2,3],"length":5}`)
	waitFor(t, "not ready", 10*time.Second, func() bool { return s.ready() != nil })
	if err := s.ready(); err == nil || !strings.Contains(err.Error(), "object_store unavailable") {
		t.Fatalf("readiness says %v", err)
	}
	if v := metricValue(s.m.depUp.WithLabelValues(health.Store)); v != 0 {
		t.Fatalf("walkstage_dependency_up{object_store} = %v during the outage", v)
	}
	time.Sleep(500 * time.Millisecond) // several retries' worth
	if n := len(evs.all()); n != 0 || len(src.acked("b1")) != 0 {
		t.Fatalf("during the outage: %d events, acks %v", n, src.acked("b1"))
	}
	down.Store(false)
	waitFor(t, "the batch's event", 20*time.Second, func() bool { return len(evs.all()) == 1 })
	ev := evs.all()[0]
	if ev.Status != message.StatusSucceeded || ev.BatchID != "b1" {
		t.Fatalf("%+v", ev)
	}
	waitFor(t, "ready again", 10*time.Second, func() bool { return s.ready() == nil })
	// The ack follows the event once the commit's removal of leftovers
	// has finished (sink.WithTidyAfterCommit).
	waitFor(t, "the ack", 5*time.Second, func() bool { return len(src.acked("b1")) == 1 })
	if acks := src.acked("b1"); len(acks) != 1 || acks[0] != nil {
		t.Fatalf("acks %v: want one, nil", acks)
	}
	if v := metricValue(s.m.retries.WithLabelValues(health.Store)); v < 1 {
		t.Errorf("walkstage_dependency_failures_total{object_store} = %v", v)
	}
}

// TestBrokerOutageRetriesTheEventOnly: when the event cannot be published
// after the objects are durable, only the publish is retried (no second
// walk, no dead letter), and the delivery is acknowledged after it lands.
func TestBrokerOutageRetriesTheEventOnly(t *testing.T) {
	b, _ := flakyS3(t)
	src, evs := newMemSource(), &memEvents{}
	s := runMem(t, b, src, evs)
	evs.down.Store(true)
	src.send(t, "b2", `{"version":1,"batch_id":"b2","algorithm":"deepwalk","seeds":[1,2],"length":5}`)
	waitFor(t, "not ready", 10*time.Second, func() bool { return s.ready() != nil })
	if acks := src.acked("b2"); len(acks) != 0 {
		t.Fatalf("acknowledged during the outage: %v", acks)
	}
	evs.down.Store(false)
	waitFor(t, "the event", 20*time.Second, func() bool { return len(evs.all()) == 1 })
	waitFor(t, "the ack", 5*time.Second, func() bool { return len(src.acked("b2")) == 1 })
	if runs := metricValue(s.m.engineRuns); runs != 1 {
		t.Errorf("%v engine runs: the walk was repeated for a publish failure", runs)
	}
	waitFor(t, "ready again", 10*time.Second, func() bool { return s.ready() == nil })
}

// TestRejectionAcknowledgedWithItsReason: a bad request found by the
// decoder gets a rejected event and an Ack carrying its RejectError (which
// the Kafka source turns into a dead letter plus a commit).
func TestRejectionAcknowledgedWithItsReason(t *testing.T) {
	b, _ := flakyS3(t)
	src, evs := newMemSource(), &memEvents{}
	runMem(t, b, src, evs)
	src.send(t, "bad", `{"version":1,"batch_id":"bad","algorithm":"nope","seeds":[1]}`)
	waitFor(t, "the ack", 10*time.Second, func() bool { return len(src.acked("bad")) == 1 })
	var re *message.RejectError
	if !errors.As(src.acked("bad")[0], &re) || re.Reason != message.ReasonInvalidParameters {
		t.Fatalf("ack cause %v", src.acked("bad")[0])
	}
	if ev := evs.all(); len(ev) != 1 || ev[0].Status != message.StatusRejected {
		t.Fatalf("events %+v", ev)
	}
}

// testGraphCached is one small scale-8 graph for the in-memory tests.
func testGraphCached(t *testing.T) (string, *graph.Graph) {
	t.Helper()
	memGraphOnce.Do(func() { memGraphPath, memGraph = testGraph(t, 8) })
	return memGraphPath, memGraph
}

var (
	memGraphOnce sync.Once
	memGraphPath string
	memGraph     *graph.Graph
)

func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// fileBucket is a real file:// store in a temporary directory.
func fileBucket(t *testing.T) *blob.Bucket {
	t.Helper()
	b, err := store.OpenBucket(context.Background(), "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestRedeliveryAfterSuccessIsReportedNotRewritten: a batch whose output is
// complete (its commit was lost, say) comes back. It is answered from its
// manifest: no walk, nothing deleted or rewritten, the same objects named.
func TestRedeliveryAfterSuccessIsReportedNotRewritten(t *testing.T) {
	b := fileBucket(t)
	src, evs := newMemSource(), &memEvents{}
	s := runMem(t, b, src, evs)
	body := `{"version":1,"batch_id":"again","algorithm":"deepwalk","seeds":[1,2,3],"length":6}`
	src.send(t, "again", body)
	waitFor(t, "first event", 10*time.Second, func() bool { return len(evs.all()) == 1 })
	before := snapshot(t, b)
	src.send(t, "again", body)
	waitFor(t, "second event", 10*time.Second, func() bool { return len(evs.all()) == 2 })
	a, c := evs.all()[0], evs.all()[1]
	if c.Status != message.StatusSucceeded || fmt.Sprint(a.Objects) != fmt.Sprint(c.Objects) || a.Manifest != c.Manifest ||
		a.Walks != c.Walks || a.Steps != c.Steps {
		t.Fatalf("redelivery reported\n%+v\nafter\n%+v", c, a)
	}
	if runs := metricValue(s.m.engineRuns); runs != 1 {
		t.Errorf("%v engine runs", runs)
	}
	if after := snapshot(t, b); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("objects changed:\n%v\n%v", before, after)
	}
	waitFor(t, "two acks", 5*time.Second, func() bool { return len(src.acked("again")) == 2 })
}

// A batch written before output kinds had directories of their own
// ({prefix}/graph=..., no kind=) comes back: it is found and answered from
// its manifest where it is, not walked again under kind=walks.
func TestRedeliveryOfEarlierLayoutIsReported(t *testing.T) {
	b := fileBucket(t)
	ctx := context.Background()
	src, evs := newMemSource(), &memEvents{}
	// The batch moves into a directory made just now, which the lookups'
	// listing of a second ago (Options.LookupDirsTTL) would not hold.
	s := runMem(t, b, src, evs, func(o *Options) { o.LookupDirsTTL = -1 })
	body := `{"version":1,"batch_id":"old","algorithm":"deepwalk","seeds":[1,2,3],"length":6}`
	src.send(t, "old", body)
	waitFor(t, "first event", 10*time.Second, func() bool { return len(evs.all()) == 1 })
	// Move the batch where earlier versions wrote it, manifest keys too.
	keys := snapshotKeys(t, b)
	for _, k := range keys {
		data, err := b.ReadAll(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), "/kind=walks/", "/"))
		if err := b.WriteAll(ctx, strings.Replace(k, "/kind=walks/", "/", 1), data, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	src.send(t, "old", body)
	waitFor(t, "second event", 10*time.Second, func() bool { return len(evs.all()) == 2 })
	a, c := evs.all()[0], evs.all()[1]
	want := strings.Replace(a.Manifest, "/kind=walks/", "/", 1)
	if c.Status != message.StatusSucceeded || c.Manifest != want || len(c.Objects) != len(a.Objects) ||
		c.Objects[0] != strings.Replace(a.Objects[0], "/kind=walks/", "/", 1) {
		t.Fatalf("redelivery of the earlier layout reported\n%+v\nwant manifest %s", c, want)
	}
	if runs := metricValue(s.m.engineRuns); runs != 1 {
		t.Errorf("%v engine runs", runs)
	}
}

// snapshotKeys lists every object's key but the stage's own (probes,
// staging).
func snapshotKeys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		if strings.Contains(o.Key, "/kind=walks/") {
			out = append(out, o.Key)
		}
	}
	return out
}

// TestBatchIDReuseIsAConflict: the same batch id with a different request
// is refused (batch_id_conflict) and the first output is kept intact.
func TestBatchIDReuseIsAConflict(t *testing.T) {
	b := fileBucket(t)
	src, evs := newMemSource(), &memEvents{}
	runMem(t, b, src, evs)
	src.send(t, "dup", `{"version":1,"batch_id":"dup","algorithm":"deepwalk","seeds":[1,2,3],"length":6}`)
	waitFor(t, "first event", 10*time.Second, func() bool { return len(evs.all()) == 1 })
	before := snapshot(t, b)
	src.send(t, "dup", `{"version":1,"batch_id":"dup","algorithm":"deepwalk","seeds":[4,5],"length":6}`)
	waitFor(t, "second event", 10*time.Second, func() bool { return len(evs.all()) == 2 })
	ev := evs.all()[1]
	if ev.Status != message.StatusRejected || ev.Reason != string(message.ReasonBatchIDConflict) {
		t.Fatalf("%+v", ev)
	}
	waitFor(t, "two acks", 5*time.Second, func() bool { return len(src.acked("dup")) == 2 })
	var re *message.RejectError
	if acks := src.acked("dup"); acks[0] != nil || !errors.As(acks[1], &re) || re.Reason != message.ReasonBatchIDConflict {
		t.Fatalf("acks %v", acks)
	}
	if after := snapshot(t, b); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the first output changed:\n%v\n%v", before, after)
	}
}

// snapshot lists every object with its size and modification time.
func snapshot(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		out = append(out, fmt.Sprintf("%s %d %v", o.Key, o.Size, o.ModTime.UnixNano()))
	}
	return out
}

// TestLookupsReuseDirectoryListing: the lookup of each batch taken in
// lists the output's kind, graph and algorithm directories only as often
// as Options.LookupDirsTTL allows (three of the eight small requests a
// batch made against S3, each a TCP connection at versitygw), and a batch
// committed in a directory the listing did not hold yet is still found
// when it comes back: its writer added the directory.
func TestLookupsReuseDirectoryListing(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	var listings atomic.Int64
	fake := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Has("delimiter") {
			listings.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	b, err := store.OpenBucket(context.Background(), "s3://walks?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	src, evs := newMemSource(), &memEvents{}
	// An hour: every lookup of the test falls within one listing.
	s := runMem(t, b, src, evs, func(o *Options) { o.LookupDirsTTL = time.Hour })
	const batches = 8
	body := func(i int) string {
		return fmt.Sprintf(`{"version":1,"batch_id":"b%d","algorithm":"deepwalk","seeds":[1,2,3],"length":6}`, i)
	}
	for i := range batches {
		src.send(t, fmt.Sprintf("b%d", i), body(i))
		waitFor(t, fmt.Sprintf("event %d", i+1), 10*time.Second, func() bool { return len(evs.all()) == i+1 })
	}
	// The first lookup listed an empty bucket (one request); without the
	// cache every batch lists three levels.
	if n := listings.Load(); n > 3 {
		t.Errorf("%d delimited listings for %d batches, want at most 3", n, batches)
	}
	src.send(t, "b0", body(0))
	waitFor(t, "the redelivery's event", 10*time.Second, func() bool { return len(evs.all()) == batches+1 })
	first, again := evs.all()[0], evs.all()[batches]
	if again.Status != message.StatusSucceeded || again.Manifest != first.Manifest {
		t.Fatalf("redelivery reported\n%+v\nafter\n%+v", again, first)
	}
	if runs := metricValue(s.m.engineRuns); runs != batches {
		t.Errorf("%v engine runs for %d batches and a redelivery, want %d", runs, batches, batches)
	}
}
