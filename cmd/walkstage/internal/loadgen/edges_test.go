package loadgen

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage"
	"github.com/walkstage/walkstage/stage/config"
)

// The records a run produces: the count asked for, in batches, inserts
// between pool vertices (with times when asked), deletes only of pairs the
// run inserted before, and the same records for the same draw seed (a
// produce and a collect agree).
func TestEdgeRecords(t *testing.T) {
	pool := RangePool(50)
	c := EdgeConfig{Updates: 10_001, Batch: 1000, DeleteShare: 0.2, Times: true}
	c.RNGSeed = 3
	recs := c.records(pool)
	if len(recs) != 11 {
		t.Fatalf("%d records, want 11", len(recs))
	}
	inserted := map[[2]int64]bool{}
	var n, deletes int
	for i, rec := range recs {
		ups, err := livegraph.DecodeBinary(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		for _, u := range ups {
			switch u.Op {
			case livegraph.Insert:
				if u.Src < 0 || u.Src >= 50 || u.Dst < 0 || u.Dst >= 50 || u.Has&livegraph.HasTime == 0 || u.Time <= 0 {
					t.Fatalf("update %d: %+v", n, u)
				}
				inserted[[2]int64{u.Src, u.Dst}] = true
			case livegraph.Delete:
				deletes++
				if !inserted[[2]int64{u.Src, u.Dst}] {
					t.Fatalf("update %d deletes %d->%d, which the run never inserted", n, u.Src, u.Dst)
				}
			}
			n++
		}
	}
	if n != 10_001 || deletes < 1500 || deletes > 2500 {
		t.Errorf("%d updates, %d deletes; want 10001, about 2000", n, deletes)
	}
	again := c.records(pool)
	for i := range recs {
		if string(again[i]) != string(recs[i]) {
			t.Fatalf("record %d differs for the same draw seed", i)
		}
	}
}

// Against the real stage with a live graph (in this process, kfake over
// TCP, the CPU engine, a file:// bucket): the backlog's probe waiting for
// the topic's ends gets an event whose watermark covers them, and every
// paced probe gets its event, with update -> walkable measured for each.
func TestEdgesAgainstTheStage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the stage")
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Undirected: true, Name: "rmat"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gpath := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(gpath, g); err != nil {
		t.Fatal(err)
	}
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out", "dlq", "edges"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	brokers := cl.ListenAddrs()
	c, err := config.Load([]string{"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_INPUT_TOPIC=in",
		"WALKSTAGE_OUTPUT_TOPIC=out", "WALKSTAGE_DLQ_TOPIC=dlq", "WALKSTAGE_GRAPH=" + gpath,
		"WALKSTAGE_OUTPUT_URL=file://" + filepath.ToSlash(t.TempDir()), "WALKSTAGE_ENGINE=cpu", "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_SESSION_TIMEOUT=6s", "WALKSTAGE_LOG_LEVEL=warn", "WALKSTAGE_EDGE_TOPIC=edges",
		"WALKSTAGE_EDGE_PUBLISH_INTERVAL=10ms", "WALKSTAGE_EDGE_OFFSETS_WAIT=30s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := SeedPool(g)
	ec := EdgeConfig{Config: testConfig(brokers), EdgeTopic: "edges", Updates: 20_000, Batch: 1000, DeleteShare: 0.1}
	ec.Phase, ec.IDPrefix = PhaseProduce, "edges"
	r, err := RunEdges(ctx, ec, pool)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 20 {
		t.Fatalf("produced %d records, want 20", r.Records)
	}

	// The true backlog: the stage starts once the collect watches.
	started := make(chan *stage.Runtime, 1)
	ec.Phase = PhaseCollect
	ec.OnWatching = func() {
		rt, err := stage.FromConfig(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
		if err != nil {
			t.Error(err)
			close(started)
			return
		}
		started <- rt
	}
	done := make(chan error, 1)
	go func() {
		rt, ok := <-started
		if !ok {
			done <- nil
			return
		}
		defer rt.Close()
		done <- rt.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	r, err = RunEdges(ctx, ec, pool)
	if err != nil {
		t.Fatal(err)
	}
	var covered int64
	for _, o := range r.Watermark {
		covered += o
	}
	// The two probes' events may come in either order (other partitions).
	if covered != 20 || r.Walkable <= 0 || r.Serving <= 0 {
		t.Errorf("backlog: watermark %v (want 20 records in all), serving after %v, walkable after %v", r.Watermark, r.Serving, r.Walkable)
	}

	// A backlog the stage has yet to apply when the paced run starts
	// (stage-load.sh starts it right after the walks beside a backlog).
	ec.Phase, ec.OnWatching, ec.IDPrefix = PhaseProduce, nil, "more"
	if _, err := RunEdges(ctx, ec, pool); err != nil {
		t.Fatal(err)
	}
	meta, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	held, err := endOffsets(ctx, meta, "edges")
	if err != nil {
		t.Fatal(err)
	}

	// Paced against the running stage: 10 records, a probe pair after
	// every 3rd and after the last.
	ec.Phase, ec.IDPrefix = PhaseAll, "paced"
	ec.Updates, ec.Rate, ec.ProbeEvery, ec.Timeout = 10_000, 100_000, 3, time.Minute
	r, err = RunEdges(ctx, ec, pool)
	if err != nil {
		t.Fatal(err)
	}
	// The series starts once the stage holds what the topic held: the
	// stage's event for a probe asking for those offsets comes before the
	// first of the series' records is produced. Without that, its first
	// probes measured the backlog's drain (docs/benchmarks/live-graph.md).
	settled := settleEvent(ctx, t, meta, ec.BatchID(0)+"-settle")
	for p, o := range held {
		if settled.ev.EdgeOffsets[p] < o {
			t.Fatalf("the settle probe's event holds edge offsets %v, the topic held %v", settled.ev.EdgeOffsets, held)
		}
	}
	first := kgo.NewOffset().At(held[0])
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"edges": {0: first}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	rec := pollOne(ctx, t, cons)
	if rec.Timestamp.Before(settled.ts) {
		t.Errorf("the paced series' first record on partition 0 (offset %d) was produced at %v, before the stage held the earlier records (%v)",
			rec.Offset, rec.Timestamp, settled.ts)
	}
	if r.Held != 40 || r.Settled <= 0 {
		t.Errorf("the paced run saw %d records held before it (want 40) and waited %v for them", r.Held, r.Settled)
	}
	covered = 0
	for _, o := range r.Watermark {
		covered += o
	}
	if len(r.ToWalkable) != 4 || len(r.Plain) != 4 || covered < 21 {
		t.Errorf("paced: %d waiting probes, %d plain ones, watermark %v; want 4, 4 and at least 21 of the 30 records", len(r.ToWalkable), len(r.Plain), r.Watermark)
	}
}

type settled struct {
	ev message.Event
	ts time.Time // the event record's timestamp (the stage's producer)
}

// settleEvent reads the event topic "out" up to its end and returns the
// event of batch id; it fails the test when there is none.
func settleEvent(ctx context.Context, t *testing.T, meta *kgo.Client, id string) settled {
	t.Helper()
	ends, err := endOffsets(ctx, meta, "out")
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int32]kgo.Offset{}
	left := 0
	for p, o := range ends {
		starts[p] = kgo.NewOffset().AtStart()
		if o > 0 {
			left++
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(meta.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"out": starts}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	done := map[int32]bool{}
	for len(done) < left {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			var ev message.Event
			if json.Unmarshal(r.Value, &ev) == nil && ev.BatchID == id {
				return settled{ev: ev, ts: r.Timestamp}
			}
			if r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
			}
		}
	}
	t.Fatalf("no event for probe %s in the event topic: the paced run did not wait for the stage to hold the topic's records first", id)
	return settled{}
}

// pollOne returns the first record cl fetches.
func pollOne(ctx context.Context, t *testing.T, cl *kgo.Client) *kgo.Record {
	t.Helper()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		if rs := fs.Records(); len(rs) > 0 {
			return rs[0]
		}
	}
}
