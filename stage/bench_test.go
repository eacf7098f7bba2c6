package stage

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/tracing"
)

// benchStage runs a stage with the CPU engine over kfake (TCP) and a
// file:// bucket, on an R-MAT scale-16 graph like the demo's. recv is the
// OTLP receiver when WALKSTAGE_BENCH_TRACE=1, else nil.
func benchStage(b *testing.B, extra ...string) (brokers []string, nv int, recv *otlpReceiver) {
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
		recv = &otlpReceiver{countOnly: true}
		srv := httptest.NewServer(recv)
		b.Cleanup(srv.Close)
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_TRACES_SAMPLER=always_on")
	}
	runStage(b, env)
	return brokers, g.NumVertices(), recv
}

// received is the number of spans the receiver has decoded.
func (r *otlpReceiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n + len(r.spans)
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	brokers, nv, recv := benchStage(b)
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
	cpu0 := processCPU(b)
	t0 := time.Now()
	produce(b, brokers, "in", msgs...)
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) >= b.N })
	el := time.Since(t0)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	var steps int64
	var lat []float64
	for _, evs := range events {
		if evs[0].Status != message.StatusSucceeded {
			b.Fatalf("%+v", evs[0])
		}
		steps += evs[0].Steps
		lat = append(lat, evs[0].Timings.Total)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "batches/s")
	b.ReportMetric(float64(steps)/el.Seconds(), "steps/s")
	// CPU time of the whole process (stage, broker, producer, observer,
	// OTLP receiver) per batch: what a feature costs moves it even when
	// other processes on the machine move the wall-clock figures.
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/batch")
	reportLatency(b, lat, "fetch-to-publish-ms")
	if recv != nil {
		// Spans exported by the end of the run (those still in the batch
		// processor's queue come at shutdown): the spans are really sent.
		b.ReportMetric(float64(recv.received())/float64(b.N), "exported-spans/batch")
	}
}

// BenchmarkStageRefreshLatency sends refresh batches one at a time (the
// next once the previous event arrived): the latency of a 1,000-seed
// batch through an idle stage. produce-to-event is what a user sees, from
// their produce call to the event in their consumer: it includes the
// fetch, the walk, the durable objects and the durable (acks=all) publish
// of the event. fetch-to-publish is the stage's own part up to the moment
// it starts publishing (the event's timings.total_seconds).
func BenchmarkStageRefreshLatency(b *testing.B) {
	brokers, nv, _ := benchStage(b)
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
		events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m[id]) > 0 })
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

// BenchmarkRequestSpans is what tracing adds to one request, every
// request sampled: its span (child of a producer's traceparent), the
// queue, walk, write and commit phases, the publish span with its context
// injected into headers, made and exported through the batch processor
// over OTLP/HTTP to an in-process receiver, whose decoding is counted too.
// cpu-us/request set beside BenchmarkStageThroughput's cpu-ms/batch is
// the share of a request's CPU that tracing takes, a figure other
// processes on the machine barely move.
func BenchmarkRequestSpans(b *testing.B) {
	recv := &otlpReceiver{countOnly: true}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	ctx := context.Background()
	// A queue for every span: the loop makes them far faster than a stage
	// does, and the batch processor would drop what its default queue
	// (2,048 spans) cannot hold instead of exporting it.
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", fmt.Sprint(7*b.N+2048))
	tp, err := tracing.FromEnv(ctx, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_TRACES_SAMPLER=always_on"}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	s := &Stage{tracer: tp.Tracer(TracerName)}
	d := &source.Delivery{Received: time.Now(),
		Trace: propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := range b.N {
		sp := s.startRequest(d, fmt.Sprint("batch-", i))
		t := time.Now()
		s.phase(sp, "walkstage.queue", t, t.Add(time.Millisecond))
		s.phase(sp, "walkstage.walk", t, t.Add(2*time.Millisecond), attribute.Int("walkstage.attempt", 1),
			attribute.Int("walkstage.walks", 1000), attribute.Int64("walkstage.steps", 80_000), attribute.String("walkstage.engine", "cpu"))
		s.phase(sp, "walkstage.write", t, t.Add(3*time.Millisecond))
		s.phase(sp, "walkstage.commit", t, t.Add(4*time.Millisecond))
		pctx, ps := s.publishSpan(ctx, sp, "walkstage.publish")
		propagation.TraceContext{}.Inject(pctx, propagation.MapCarrier{})
		ps.End()
		endRequest(sp, message.StatusSucceeded, "")
	}
	// The spans still queued are exported here, inside the measurement.
	if err := tp.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/request")
	b.ReportMetric(float64(recv.received())/float64(b.N), "exported-spans/request")
}
