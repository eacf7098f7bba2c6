package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/walk"
)

func testGraph(t *testing.T) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 3, Undirected: true, Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// The requests are what the stage accepts: its own decoder reads them, with
// the shape asked for and seeds with out-edges only.
func TestRequestsDecodeAsAsked(t *testing.T) {
	g := testGraph(t)
	pool := SeedPool(g)
	if len(pool) == 0 || len(pool) == g.NumVertices() {
		t.Fatalf("pool of %d of %d vertices: R-MAT leaves some isolated", len(pool), g.NumVertices())
	}
	for _, tc := range []struct {
		name   string
		output string
		check  func(t *testing.T, r *message.Request)
	}{
		{"walks", OutputWalks, func(t *testing.T, r *message.Request) {
			if len(r.Seeds) != 50 || r.NumWalks() != 50*3 || r.Visits != nil {
				t.Errorf("seeds %d, walks %d, visits %v", len(r.Seeds), r.NumWalks(), r.Visits)
			}
		}},
		{"visits", OutputVisits, func(t *testing.T, r *message.Request) {
			if r.Visits == nil || r.NumQueries() != 7 {
				t.Errorf("visits %v, queries %d", r.Visits, r.NumQueries())
			}
		}},
		{"node2vec walks", OutputWalks, func(t *testing.T, r *message.Request) {
			if a := r.Algorithm; a.Kind != walk.Node2Vec || a.P != 0.5 || a.Q != 2 || r.NumWalks() != 50*3 {
				t.Errorf("algorithm %+v, walks %d", a, r.NumWalks())
			}
		}},
		{"samples", OutputSamples, func(t *testing.T, r *message.Request) {
			if r.Sample == nil || len(r.Seeds) != 50 || r.Sample.Params.Kind.String() != "neighbor" || len(r.Sample.Params.Fanouts) != 2 {
				t.Errorf("sample %+v, seeds %d", r.Sample, len(r.Seeds))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Brokers, c.Output, c.Seeds, c.Walks, c.Queries, c.StepsPerQuery = []string{"x:1"}, tc.output, 50, 3, 7, 1000
			c.Weighted = false
			if tc.name == "node2vec walks" {
				c.Algorithm, c.WalkParams = "node2vec", `"p":0.5,"q":2`
			}
			if err := c.Normalize(); err != nil {
				t.Fatal(err)
			}
			k1, b1 := c.Request(4, pool)
			k2, b2 := c.Request(4, pool)
			_, b3 := c.Request(5, pool)
			if k1 != k2 || string(b1) != string(b2) || string(b1) == string(b3) {
				t.Fatalf("request 4 differs between calls, or equals request 5:\n%s\n%s", b1, b3)
			}
			r, err := message.DecodeRequest([]byte(k1), b1, g, message.DefaultLimits())
			if err != nil {
				t.Fatalf("%v\n%s", err, b1)
			}
			if r.BatchID != c.BatchID(4) {
				t.Errorf("batch id %q, want %q", r.BatchID, c.BatchID(4))
			}
			for _, s := range r.Seeds {
				if g.Degree(uint32(s)) == 0 { // R-MAT ids are dense ids
					t.Errorf("seed %d has no out-edges", s)
				}
			}
			tc.check(t, r)
		})
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no brokers":   func(c *Config) { c.Brokers = nil },
		"output":       func(c *Config) { c.Output = "rows" },
		"restart":      func(c *Config) { c.Output, c.Restart = OutputVisits, 1 },
		"requests":     func(c *Config) { c.Requests = 0 },
		"id prefix":    func(c *Config) { c.IDPrefix = "a/b" },
		"visits top k": func(c *Config) { c.Output, c.TopK = OutputVisits, 0 },
		"phase":        func(c *Config) { c.Phase, c.IDPrefix = "consume", "x" },
		// Without a given prefix the two runs would name different batches.
		"phase prefix": func(c *Config) { c.Phase = PhaseCollect },
	} {
		c := Defaults()
		c.Brokers = []string{"x:1"}
		mut(&c)
		if err := c.Normalize(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakeStage answers each request on topic "in" as the stage would: a
// succeeded event on "out" with the timings filled in, or, for a batch id
// in deadLetter, a copy on "dlq" and a rejected event.
func fakeStage(t *testing.T, brokers []string, deadLetter map[string]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("in"), kgo.ConsumerGroup("fake-stage"),
		kgo.ProducerLinger(0), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				fetched := time.Now()
				var req struct {
					BatchID string  `json:"batch_id"`
					Seeds   []int64 `json:"seeds"`
					Walks   int64   `json:"walks_per_seed"`
					Length  int64   `json:"length"`
					Output  string  `json:"output"`
				}
				json.Unmarshal(r.Value, &req)
				ev := message.Event{Version: 1, BatchID: req.BatchID, Status: message.StatusSucceeded}
				if deadLetter[req.BatchID] {
					cl.ProduceSync(ctx, &kgo.Record{Topic: "dlq", Key: r.Key, Value: r.Value,
						Headers: []kgo.RecordHeader{{Key: source.HeaderReason, Value: []byte("unknown_vertices")}, {Key: source.HeaderError, Value: []byte("seed 7 is not in the graph")}}})
					ev.Status, ev.Reason = message.StatusRejected, "unknown_vertices"
				} else if req.Output == "visits" {
					ev.Queries, ev.Candidates, ev.Steps, ev.Walks = int64(len(req.Seeds)), 10*int64(len(req.Seeds)), 1000, 200
				} else {
					ev.Walks = int64(len(req.Seeds)) * req.Walks
					ev.Steps = ev.Walks * req.Length
				}
				time.Sleep(2 * time.Millisecond) // the "work"
				ev.CompletedAt = time.Now().UTC()
				ev.Timings.Total = ev.CompletedAt.Sub(fetched).Seconds()
				v, _ := json.Marshal(ev)
				cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: v})
			})
		}
	}()
}

func startBroker(t testing.TB) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func testConfig(brokers []string) Config {
	c := Defaults()
	c.Brokers, c.RequestTopic, c.EventTopic, c.DLQTopic = brokers, "in", "out", "dlq"
	c.Requests, c.Seeds, c.Walks, c.Length, c.Timeout = 20, 5, 2, 10, time.Minute
	return c
}

func TestBacklogAndIdleCountEveryEvent(t *testing.T) {
	brokers := startBroker(t)
	fakeStage(t, brokers, nil)
	pool := RangePool(100)
	ctx := context.Background()

	// An earlier run's events on the topic are not this run's.
	old := testConfig(brokers)
	old.IDPrefix, old.Requests = "old", 3
	if _, err := Run(ctx, old, ModeBacklog, pool); err != nil {
		t.Fatal(err)
	}

	c := testConfig(brokers)
	r, err := Run(ctx, c, ModeBacklog, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.FetchToEvent) != 20 || r.Walks != 20*5*2 || r.Steps != 20*5*2*10 || r.WalkVertices() != 20*5*2*11 {
		t.Errorf("backlog: %d events, %d walks, %d steps", len(r.FetchToEvent), r.Walks, r.Steps)
	}
	if r.Elapsed <= 0 || r.FirstToLast <= 0 || r.FirstToLast > r.Elapsed || r.FirstEvent != 5*2*11 {
		t.Errorf("backlog: elapsed %v, first to last %v, first event %d", r.Elapsed, r.FirstToLast, r.FirstEvent)
	}
	if r.Ignored != 0 {
		t.Errorf("backlog: %d events of other runs seen (the watcher starts at the end)", r.Ignored)
	}

	c = testConfig(brokers)
	c.Output, c.Requests, c.Queries, c.Warmup = OutputVisits, 5, 3, 2
	r, err = Run(ctx, c, ModeIdle, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ProduceToEvent) != 5 || r.Queries != 15 || r.Candidates != 150 {
		t.Errorf("idle: %d measured (warm-ups excluded), %d queries, %d candidates", len(r.ProduceToEvent), r.Queries, r.Candidates)
	}
	for i := range r.ProduceToEvent {
		// Each produce starts before the fetch, which starts before
		// the publish; the work takes 2 ms.
		if r.StageTotal[i] < 2*time.Millisecond || r.FetchToEvent[i] < r.StageTotal[i] || r.ProduceToEvent[i] < r.FetchToEvent[i]-time.Millisecond {
			t.Errorf("idle request %d: produce->event %v, fetch->event %v, stage total %v", i, r.ProduceToEvent[i], r.FetchToEvent[i], r.StageTotal[i])
		}
	}
	var out strings.Builder
	r.Report(&out)
	if !strings.Contains(out.String(), "RESULT mode=idle output=visits requests=5 ") {
		t.Errorf("report:\n%s", out.String())
	}
	// load --json's line: the same figures, durations in seconds.
	line, err := json.Marshal(r.Summary())
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(line, &sum); err != nil {
		t.Fatal(err)
	}
	if sum["mode"] != "idle" || sum["requests"] != 5.0 || sum["queries"] != 15.0 || sum["candidates"] != 150.0 ||
		sum["produce_to_event_p50_seconds"] != Quantile(r.ProduceToEvent, 0.5).Seconds() || sum["duration_seconds"] != r.Elapsed.Seconds() {
		t.Errorf("summary: %s", line)
	}
}

// A true backlog: the requests produced while no stage runs, then a
// collector started, then the stage: every event counted, the rate over
// the first event to the last.
func TestTrueBacklogInTwoPhases(t *testing.T) {
	brokers := startBroker(t)
	pool := RangePool(100)
	ctx := context.Background()
	c := testConfig(brokers)
	c.IDPrefix, c.Phase = "true", PhaseProduce
	r, err := Run(ctx, c, ModeBacklog, pool)
	if err != nil || len(r.FetchToEvent) != 0 {
		t.Fatalf("produce: %v, %d events", err, len(r.FetchToEvent))
	}
	c.Phase = PhaseCollect
	watching := make(chan struct{})
	c.OnWatching = func() { close(watching) }
	done := make(chan error, 1)
	go func() { r, err = Run(ctx, c, ModeBacklog, pool); done <- err }()
	<-watching
	fakeStage(t, brokers, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(r.FetchToEvent) != 20 || r.Walks != 20*5*2 || r.FirstToLast <= 0 || r.FirstEvent != 5*2*11 {
		t.Fatalf("collect: %d events, %d walks, first to last %v, first event %d", len(r.FetchToEvent), r.Walks, r.FirstToLast, r.FirstEvent)
	}
	var out strings.Builder
	r.Report(&out)
	want := fmt.Sprintf("walk_vertices_per_s=%.0f ", float64(r.WalkVertices()-r.FirstEvent)/r.FirstToLast.Seconds())
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), fmt.Sprintf("seconds=%.3f ", r.FirstToLast.Seconds())) {
		t.Fatalf("the collect's rate is not over the first event to the last (%s):\n%s", want, out.String())
	}
	if _, err := Run(ctx, c, ModeIdle, pool); err == nil {
		t.Fatal("a phase was accepted with the idle mode")
	}
}

func TestDeadLetterFailsTheRun(t *testing.T) {
	brokers := startBroker(t)
	c := testConfig(brokers)
	c.IDPrefix = "dl"
	fakeStage(t, brokers, map[string]bool{c.BatchID(7): true})
	_, err := Run(context.Background(), c, ModeBacklog, RangePool(100))
	if err == nil || !strings.Contains(err.Error(), "dl-7") {
		t.Fatalf("err = %v, want a failure naming batch dl-7", err)
	}
	if !strings.Contains(err.Error(), "unknown_vertices") {
		t.Errorf("err = %v, want the reason", err)
	}
}

func TestTimeoutSaysWhatIsMissing(t *testing.T) {
	brokers := startBroker(t) // no stage answers
	c := testConfig(brokers)
	c.Timeout = 2 * time.Second
	_, err := Run(context.Background(), c, ModeBacklog, RangePool(100))
	if err == nil || !strings.Contains(err.Error(), "waiting for 20 events") {
		t.Fatalf("err = %v", err)
	}
}

func TestPlainUploadWritesTheVolume(t *testing.T) {
	dir := t.TempDir()
	p := PlainUpload{BucketURL: "file://" + dir, Prefix: "p", Bytes: 10<<20 + 5, ObjectBytes: 3 << 20, Parallel: 2}
	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != 4 || r.Bytes != p.Bytes {
		t.Errorf("%d objects, %d bytes; want 4, %d", r.Objects, r.Bytes, p.Bytes)
	}
}

// load --json's line gives the RESULT line's figures: the same seconds and
// rates, over the first event to the last for a collect phase.
func TestSummaryMatchesResultLine(t *testing.T) {
	for _, phase := range []string{PhaseAll, PhaseCollect} {
		r := &Result{Mode: ModeBacklog, Output: OutputWalks, Phase: phase, Requests: 10, Elapsed: 4 * time.Second,
			FirstToLast: 2 * time.Second, FirstEvent: 1100, Walks: 100, Steps: 10_900, Bytes: -1}
		var out strings.Builder
		r.Report(&out)
		var sec, vps float64
		for _, f := range strings.Fields(out.String()[strings.Index(out.String(), "RESULT "):]) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "seconds":
				sec, _ = strconv.ParseFloat(v, 64)
			case "walk_vertices_per_s":
				vps, _ = strconv.ParseFloat(v, 64)
			}
		}
		s := r.Summary()
		if s.Phase != phase || s.DurationSeconds != sec || math.Round(s.WalkVerticesPerSecond) != vps {
			t.Errorf("phase %q: summary %+v, RESULT seconds=%v walk_vertices_per_s=%v", phase, s, sec, vps)
		}
	}
}
