package stage

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/source"
)

// benchStage runs a stage with the CPU engine over kfake (TCP) and a
// file:// bucket, on an R-MAT scale-16 graph like the demo's.
func benchStage(b *testing.B, extra ...string) (brokers []string, nv int) {
	b.Helper()
	brokers = startKafka(b, 4)
	gpath, g := testGraph(b, 16)
	out := "file://" + filepath.ToSlash(b.TempDir())
	// WALKSTAGE_BENCH_ENGINE=gpu measures the GPU engine (a cuda build).
	engine := cmp.Or(os.Getenv("WALKSTAGE_BENCH_ENGINE"), "cpu")
	env := stageEnviron(brokers, gpath, out, append([]string{"WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_LOG_LEVEL=warn",
		"WALKSTAGE_ENGINE=" + engine}, extra...)...)
	// WALKSTAGE_BENCH_TRACE=1 turns tracing on, every request sampled,
	// exporting to an in-process OTLP receiver: its overhead is the
	// difference to a run without.
	// WALKSTAGE_BENCH_TABLES=1 appends every batch to Iceberg tables in a
	// file-based catalog beside the output (WALKSTAGE_TABLE_CATALOG).
	if os.Getenv("WALKSTAGE_BENCH_TABLES") == "1" {
		env = append(env, "WALKSTAGE_TABLE_CATALOG=file://"+filepath.ToSlash(b.TempDir()),
			"WALKSTAGE_TABLE_COMMIT_INTERVAL="+cmp.Or(os.Getenv("WALKSTAGE_BENCH_TABLE_INTERVAL"), "0s"))
	}
	if os.Getenv("WALKSTAGE_BENCH_TRACE") == "1" {
		srv := httptest.NewServer(&otlpReceiver{})
		b.Cleanup(srv.Close)
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_TRACES_SAMPLER=always_on")
	}
	runStage(b, env)
	return brokers, g.NumVertices()
}

// refreshMsg is a 1,000-seed DeepWalk request (80 steps), the shape of an
// incremental embedding refresh.
func refreshMsg(id string, i, nv int) kafka.Message {
	first := (i * 1000) % (nv - 1000)
	return requestRaw(id, fmt.Sprintf(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","length":80,"seed_range":{"first":%d,"count":1000}}`, id, first))
}

// reportLatency reports percentiles of lat (seconds) as p50-<unit> etc.
func reportLatency(b *testing.B, lat []float64, unit string) {
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] * 1000 }
	b.ReportMetric(q(0.50), "p50-"+unit)
	b.ReportMetric(q(0.95), "p95-"+unit)
	b.ReportMetric(q(0.99), "p99-"+unit)
}

// BenchmarkStageThroughput publishes b.N refresh batches at once and
// measures until the last completion event: sustained batches/s and walk
// steps/s end to end (decode, micro-batched CPU walks, Parquet, event,
// offset commit). Latencies here include queueing behind the backlog.
func BenchmarkStageThroughput(b *testing.B) {
	brokers, nv := benchStage(b)
	obs := newObserver(brokers, "out")
	defer obs.Close()
	run := fmt.Sprint(time.Now().UnixNano())
	msgs := make([]kafka.Message, b.N)
	for i := range msgs {
		msgs[i] = refreshMsg(fmt.Sprintf("t%s-%d", run, i), i, nv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	t0 := time.Now()
	produce(b, brokers, "in", msgs...)
	events, err := obs.events(ctx, func(m map[string][]source.Event) bool { return len(m) >= b.N })
	el := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	var steps int64
	var lat []float64
	for _, evs := range events {
		if evs[0].Status != source.StatusSucceeded {
			b.Fatalf("%+v", evs[0])
		}
		steps += evs[0].Steps
		lat = append(lat, evs[0].Timings.Total)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "batches/s")
	b.ReportMetric(float64(steps)/el.Seconds(), "steps/s")
	reportLatency(b, lat, "fetch-to-publish-ms")
}

// BenchmarkStageRefreshLatency sends refresh batches one at a time (the
// next once the previous event arrived): the latency of a 1,000-seed
// batch through an idle stage. produce-to-event is what a user sees, from
// their produce call to the event in their consumer: it includes the
// fetch, the walk, the durable objects and the durable (acks=all) publish
// of the event. fetch-to-publish is the stage's own part up to the moment
// it starts publishing (the event's timings.total_seconds).
func BenchmarkStageRefreshLatency(b *testing.B) {
	brokers, nv := benchStage(b)
	obs := newObserver(brokers, "out")
	defer obs.Close()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "in", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := fmt.Sprint(time.Now().UnixNano())
	var lat, e2e []float64
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("l%s-%d", run, i)
		t0 := time.Now()
		if err := w.WriteMessages(ctx, refreshMsg(id, i, nv)); err != nil {
			b.Fatal(err)
		}
		events, err := obs.events(ctx, func(m map[string][]source.Event) bool { return len(m[id]) > 0 })
		if err != nil {
			b.Fatal(err)
		}
		e2e = append(e2e, time.Since(t0).Seconds())
		lat = append(lat, events[id][0].Timings.Total)
	}
	b.StopTimer()
	reportLatency(b, e2e, "produce-to-event-ms")
	reportLatency(b, lat, "fetch-to-publish-ms")
}
