package loadgen

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/stage"
	"github.com/walkstage/walkstage/stage/config"
)

// Against the real stage (in this process, kfake over TCP, the CPU engine,
// a file:// bucket): every request's event is counted, the events' sums are
// the requests' shapes, fetch -> event holds the stage's own total, and the
// bytes come from the manifests.
func TestAgainstTheStage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the stage")
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Undirected: true,
		Weighted: true, Name: "rmat"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gpath := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(gpath, g); err != nil {
		t.Fatal(err)
	}
	brokers := startBroker(t)
	out := "file://" + filepath.ToSlash(t.TempDir())
	c, err := config.Load([]string{"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_INPUT_TOPIC=in",
		"WALKSTAGE_OUTPUT_TOPIC=out", "WALKSTAGE_DLQ_TOPIC=dlq", "WALKSTAGE_GRAPH=" + gpath, "WALKSTAGE_OUTPUT_URL=" + out,
		"WALKSTAGE_ENGINE=cpu", "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SESSION_TIMEOUT=6s", "WALKSTAGE_LOG_LEVEL=warn"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := stage.FromConfig(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); <-done }()

	pool := SeedPool(g)
	lc := testConfig(brokers)
	lc.Requests, lc.Seeds, lc.Walks, lc.Length = 6, 20, 2, 10
	r, err := Run(ctx, lc, ModeBacklog, pool)
	if err != nil {
		t.Fatal(err)
	}
	// Weighted DeepWalk on an undirected graph from vertices with
	// out-edges never stops early.
	if r.Walks != 6*20*2 || r.Steps != 6*20*2*10 {
		t.Errorf("backlog: %d walks, %d steps; want %d, %d", r.Walks, r.Steps, 6*20*2, 6*20*2*10)
	}
	if err := r.AddBytes(ctx, out); err != nil || r.Bytes <= 0 {
		t.Errorf("bytes %d, %v", r.Bytes, err)
	}

	lc = testConfig(brokers)
	lc.Output, lc.Weighted, lc.Requests, lc.Queries, lc.StepsPerQuery, lc.TopK, lc.Timeout = OutputVisits, false, 3, 1, 500, 5, time.Minute
	r, err = Run(ctx, lc, ModeIdle, pool)
	if err != nil {
		t.Fatal(err)
	}
	if r.Queries != 3 || r.Steps != 3*500 || len(r.FetchToEvent) != 3 {
		t.Errorf("idle visits: %d queries, %d steps, %d measured", r.Queries, r.Steps, len(r.FetchToEvent))
	}
	for i, d := range r.FetchToEvent {
		if d < r.StageTotal[i] || r.ProduceToEvent[i] < d-time.Millisecond {
			t.Errorf("request %d: produce->event %v, fetch->event %v, stage total %v", i, r.ProduceToEvent[i], d, r.StageTotal[i])
		}
	}

	// Beside: the series is measured, the expensive request waited for
	// and timed, but not counted with the series.
	lc = testConfig(brokers)
	lc.Requests, lc.Seeds, lc.Walks, lc.Length = 3, 5, 1, 10
	lc.Expensive = `"algorithm":"node2vec","p":0.5,"length":50,"walks_per_seed":4,"seed_range":{"first":0,"count":50}`
	r, err = Run(ctx, lc, ModeBeside, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ProduceToEvent) != 3 || r.Walks != 3*5 || r.Expensive <= 0 || r.SmallBeforeDone > 3 {
		t.Errorf("beside: %d measured, %d walks, expensive after %v, %d before it", len(r.ProduceToEvent), r.Walks, r.Expensive, r.SmallBeforeDone)
	}
}

// BenchmarkSmallBesideExpensive is issue 32's measurement through the real
// stage (in this process, kfake over TCP, the CPU engine, a file://
// bucket): an idle series of small walk requests (weighted DeepWalk, 10
// seeds x 10 walks x 80 steps) produced while one expensive request walks
// (WALKSTAGE_BENCH_EXPENSIVE, JSON members; default Node2Vec p = 1e-6,
// 1,000 seeds x 10 walks x 1,000 steps, within the default budget), on the
// issue's graph (R-MAT scale 10, edge factor 8). "sliced" runs the stage's
// defaults; "unsliced" sets WALKSTAGE_MICROBATCH_MAX_COST above the
// expensive request's cost, which walks it in one run as before issue 32.
// It reports the produce -> event p50, p99 and max of the small requests
// whose event came while the expensive request walked (before its event),
// the expensive request's own produce -> event, and how many small
// requests that is. Run it alone, once:
//
//	go test -run XXX -bench SmallBesideExpensive -benchtime 1x ./cmd/walkstage/internal/loadgen
func BenchmarkSmallBesideExpensive(b *testing.B) {
	expensive := os.Getenv("WALKSTAGE_BENCH_EXPENSIVE")
	if expensive == "" {
		expensive = `"algorithm":"node2vec","p":1e-6,"length":1000,"walks_per_seed":10,"seed_range":{"first":0,"count":1000}`
	}
	requests := 100
	if n, err := strconv.Atoi(os.Getenv("WALKSTAGE_BENCH_REQUESTS")); err == nil && n > 0 {
		requests = n
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 7, Undirected: true,
		Weighted: true, Labels: 3, Name: "chaos"})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	gpath := filepath.Join(b.TempDir(), "g.wsg")
	if err := graph.Save(gpath, g); err != nil {
		b.Fatal(err)
	}
	pool := SeedPool(g)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"sliced", nil},
		{"unsliced", []string{"WALKSTAGE_MICROBATCH_MAX_COST=9000000000000000000"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			brokers := startBroker(b)
			out := "file://" + filepath.ToSlash(b.TempDir())
			env := append([]string{"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_INPUT_TOPIC=in",
				"WALKSTAGE_OUTPUT_TOPIC=out", "WALKSTAGE_DLQ_TOPIC=dlq", "WALKSTAGE_GRAPH=" + gpath, "WALKSTAGE_OUTPUT_URL=" + out,
				"WALKSTAGE_ENGINE=cpu", "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SESSION_TIMEOUT=6s", "WALKSTAGE_LOG_LEVEL=warn"}, tc.extra...)
			c, err := config.Load(env)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt, err := stage.FromConfig(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil)), "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			done := make(chan error, 1)
			go func() { done <- rt.Run(ctx) }()
			defer func() { cancel(); <-done }()
			for b.Loop() {
				lc := testConfig(brokers)
				lc.Requests, lc.Warmup, lc.Seeds, lc.Walks, lc.Length, lc.Timeout = requests, 3, 10, 10, 80, 20*time.Minute
				lc.Expensive, lc.IDPrefix = expensive, fmt.Sprintf("%s-%d", tc.name, time.Now().UnixNano())
				r, err := Run(ctx, lc, ModeBeside, pool)
				if err != nil {
					b.Fatal(err)
				}
				r.Report(os.Stdout)
				during := r.During()
				b.ReportMetric(ms(Quantile(during, 0.5)), "small-p50-ms")
				b.ReportMetric(ms(Quantile(during, 0.99)), "small-p99-ms")
				b.ReportMetric(ms(Quantile(during, 1)), "small-max-ms")
				b.ReportMetric(r.Expensive.Seconds(), "expensive-s")
				b.ReportMetric(float64(r.SmallBeforeDone), "small-before-expensive")
			}
		})
	}
}
