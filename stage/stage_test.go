package stage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

func counterValue(t *testing.T, rt *Runtime, name string) float64 {
	t.Helper()
	mfs, err := rt.o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.Metric {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// referenceParts walks req alone and writes it under prefix "ref-<id>",
// returning the parts' bytes: what any correct run of req must produce.
func referenceParts(t *testing.T, ctx context.Context, b *blob.Bucket, g *graph.Graph, id, body string) [][]byte {
	t.Helper()
	req, err := message.DecodeRequest([]byte(id), []byte(body), g, message.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := cpu.New(g)
	w, err := sink.NewBatchWriter(ctx, b, "ref-"+id, sink.BatchMeta{BatchID: req.BatchID, Algorithm: req.Algorithm,
		Seed: req.RNGSeed, Engine: "cpu", WalkstageVersion: "test", Walks: int64(req.NumWalks())}, g,
		sink.WithMemoryLimit(128<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Run(ctx, []walk.Job{req.Job(0)}, func(c walk.Chunk) error { return w.Write(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for _, f := range m.Files {
		p, err := b.ReadAll(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	return parts
}

// TestMicroBatchingSharesLaunchesAndKeepsOutput sends small requests
// together: they share engine launches, and each batch's Parquet is
// byte-identical to the same request walked alone.
func TestMicroBatchingSharesLaunchesAndKeepsOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	gpath, g := testGraph(t, 12)
	dir := t.TempDir()
	outURL := "file://" + filepath.ToSlash(dir)
	rt, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_MICROBATCH_MAX_WAIT=300ms", "WALKSTAGE_METRICS_ADDR="))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	const n = 12
	kinds := []string{
		`"algorithm":"deepwalk","length":30`,
		`"algorithm":"ppr","stop_probability":0.1,"walks_per_seed":3`,
		`"algorithm":"node2vec","p":2,"q":0.5,"length":15`,
		`"algorithm":"metapath","schema":[2,0],"length":9`,
	}
	bodies := map[string]string{}
	var msgs []kafka.Message
	for i := range n {
		id := fmt.Sprintf("mb-%d", i)
		bodies[id] = fmt.Sprintf(`{"version":1,"batch_id":%q,%s,"seed_range":{"first":%d,"count":%d}}`, id, kinds[i%len(kinds)], i*50, 40+i)
		msgs = append(msgs, requestRaw(id, bodies[id]))
	}
	produce(t, brokers, "in", msgs...)
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == n })
	if err != nil {
		t.Fatal(err)
	}
	runs := counterValue(t, rt, "walkstage_engine_runs_total")
	if runs >= n {
		t.Errorf("%v engine runs for %d small requests: no micro-batching", runs, n)
	}
	t.Logf("%d requests in %v engine runs", n, runs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	bucket, err := store.OpenBucket(ctx, outURL)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	for id, evs := range events {
		ev := evs[0]
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %+v", id, ev)
		}
		ref := referenceParts(t, ctx, bucket, g, id, bodies[id])
		if len(ref) != len(ev.Objects) {
			t.Fatalf("%s: %d objects, reference %d", id, len(ev.Objects), len(ref))
		}
		for i, u := range ev.Objects {
			key := u[len(outURL)+1:]
			got, err := bucket.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref[i]) {
				t.Errorf("%s part %d differs from the request walked alone", id, i)
			}
		}
	}
}

// TestGracefulShutdown cancels the stage while a batch is walking: Run
// finishes it (event published, offset committed) before returning. With a
// deadline too short to finish, the batch is abandoned uncommitted and the
// next replica completes it.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	// Generous: under a loaded CI machine the big batch below is walked
	// up to three times.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	gpath, _ := testGraph(t, 14)
	outURL := "file://" + filepath.ToSlash(t.TempDir())
	big := func(id string) kafka.Message {
		return requestRaw(id, fmt.Sprintf(`{"version":1,"batch_id":%q,"algorithm":"node2vec","length":100,"walks_per_seed":6,"seed_range":{"first":0,"count":16384}}`, id))
	}
	obs := newObserver(brokers, "out")
	defer obs.Close()

	// 1. Generous deadline: the in-flight batch completes during shutdown.
	rt, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SHUTDOWN_TIMEOUT=60s"))
	produce(t, brokers, "in", big("drain-1"))
	waitInFlight(t, ctx, rt)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, rt, "walkstage_batches_total"); got != 1 {
		t.Fatalf("after a graceful stop %v batches finished, want the in-flight one", got)
	}
	if _, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["drain-1"]) > 0 }); err != nil {
		t.Fatal(err)
	}

	// 2. A deadline too short: abandoned, uncommitted, redelivered.
	rt2, stop2 := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SHUTDOWN_TIMEOUT=1ms"))
	produce(t, brokers, "in", big("abandon-1"))
	waitInFlight(t, ctx, rt2)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, rt2, "walkstage_batches_total"); got != 0 {
		t.Fatalf("with a 1ms deadline %v batches finished", got)
	}
	runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_METRICS_ADDR="))
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["abandon-1"]) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if ev := events["abandon-1"][0]; ev.Status != message.StatusSucceeded {
		t.Fatalf("%+v", ev)
	}
	if len(events["drain-1"]) != 0 {
		t.Errorf("drain-1 was redelivered: its offset was not committed at the graceful shutdown")
	}
}

func waitInFlight(t *testing.T, ctx context.Context, rt *Runtime) {
	t.Helper()
	for ctx.Err() == nil {
		if len(rt.slots) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no batch went in flight")
}

// TestRedeliveryWhileInFlightIsSerialised sends the same batch twice back
// to back (as a rebalance can): the copies never run concurrently, both
// succeed, and they report the same objects, written once.
func TestRedeliveryWhileInFlightIsSerialised(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	gpath, _ := testGraph(t, 12)
	rt, _ := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir()), "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_MICROBATCH_MAX_WAIT=100ms"))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	body := `{"version":1,"batch_id":"twice","algorithm":"deepwalk","walks_per_seed":20,"seed_range":{"first":0,"count":4000}}`
	produce(t, brokers, "in", requestRaw("twice", body), requestRaw("twice", body))
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["twice"]) == 2 })
	if err != nil {
		t.Fatal(err)
	}
	a, b := events["twice"][0], events["twice"][1]
	if a.Status != message.StatusSucceeded || b.Status != message.StatusSucceeded || fmt.Sprint(a.Objects) != fmt.Sprint(b.Objects) {
		t.Fatalf("%+v\n%+v", a, b)
	}
	// The second copy waits for the first, then finds its output complete
	// with the same fingerprint and reports it without walking again.
	if runs := counterValue(t, rt, "walkstage_engine_runs_total"); runs != 1 {
		t.Errorf("%v engine runs: the redelivered copy was walked again", runs)
	}
}
