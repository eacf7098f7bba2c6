package loadgen

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/stage"
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
	c, err := stage.LoadConfig([]string{"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_INPUT_TOPIC=in",
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
}
