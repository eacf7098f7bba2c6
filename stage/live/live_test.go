package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/source"
)

// TestLiveGraphFromEdgeTopic runs the edge reader and the live applier
// against kfake over TCP: records in JSON and binary on three partitions
// are applied and published with the watermark after each partition's last
// record; a record that does not decode and one that does not fit the graph
// are dead-lettered with their reason and passed, and nothing stops.
func TestLiveGraphFromEdgeTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "edges", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	l := triangleLive(t)
	bin := livegraph.AppendBinary(nil, []livegraph.Update{{Op: livegraph.Insert, Src: 2, Dst: 7}, {Op: livegraph.Delete, Src: 2, Dst: 0}})
	// Partition p gets records[p]; kfake's partitions start at offset 0.
	records := [3][]string{
		{`{"op":"insert","src":0,"dst":2}`, `{oops`},
		{string(bin), `[{"op":"insert","src":7,"dst":"8"}]`},
		{`{"op":"insert","src":1,"dst":0,"weight":2}`, `{"op":"insert","src":1,"dst":0}`},
	}
	for p, recs := range records {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", Balancer: fixedPartition(p), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
		for _, r := range recs {
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(r)}); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
	}
	m, stop := runReaderApplier(ctx, t, brokers, l)

	want := map[int32]int64{0: 2, 1: 2, 2: 2}
	for !maps.Equal(l.Snapshot().Watermark(), want) {
		select {
		case <-ctx.Done():
			t.Fatalf("watermark %v, want %v", l.Snapshot().Watermark(), want)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop()
	snap := l.Snapshot()
	if v7, ok := snap.DenseID(7); !ok || snap.NumVertices() != 5 {
		t.Fatalf("vertex 7: %d %v, %d vertices", v7, ok, snap.NumVertices())
	}
	if dv := snap.Vertex(2); dv == nil || dv.Live != 1 || !dv.BaseDead(0) {
		t.Fatalf("vertex 2 after insert 2->7 and delete 2->0: %+v", dv)
	}
	if dv := snap.Vertex(1); dv == nil || dv.Live != 2 {
		t.Fatalf("vertex 1: the unweighted insert is applied, the weighted one is not: %+v", dv)
	}
	if got := liveCounter(t, m.updates); got != 5 {
		t.Fatalf("updates applied %v, want 5", got)
	}
	if got := liveCounter(t, m.rejected); got != 2 {
		t.Fatalf("rejected records %v, want 2", got)
	}
	var lag, walkable dto.Metric
	if err := m.lag.Write(&lag); err != nil {
		t.Fatal(err)
	}
	if err := m.walkable.Write(&walkable); err != nil {
		t.Fatal(err)
	}
	if lag.GetGauge().GetValue() != 0 || walkable.GetHistogram().GetSampleCount() != 6 {
		t.Fatalf("watermark lag %v records (want 0), update-to-walkable samples %d (want 6)",
			lag.GetGauge().GetValue(), walkable.GetHistogram().GetSampleCount())
	}

	// The two bad records are in the dead-letter topic with their reasons.
	reasons := map[string]string{}
	for p := range 3 {
		dr := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "dlq", Partition: p, MaxWait: 100 * time.Millisecond})
		for {
			fctx, fcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			msg, err := dr.FetchMessage(fctx)
			fcancel()
			if err != nil {
				break
			}
			h := map[string]string{}
			for _, x := range msg.Headers {
				h[x.Key] = string(x.Value)
			}
			if h[source.HeaderReason] != source.ReasonBadEdgeUpdate {
				t.Fatalf("dead letter %q has reason %q", msg.Value, h[source.HeaderReason])
			}
			reasons[string(msg.Value)] = h[source.HeaderError]
		}
		dr.Close()
	}
	if len(reasons) != 2 || !strings.Contains(reasons[`{oops`], "not an update object") ||
		!strings.Contains(reasons[`{"op":"insert","src":1,"dst":0,"weight":2}`], `weight 2 on graph "live", which has no weights`) {
		t.Fatalf("dead letters: %v", reasons)
	}
}

// fixedPartition sends every message to one partition.
type fixedPartition int

func (p fixedPartition) Balance(kafka.Message, ...int) int { return int(p) }

func liveCounter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// A read-your-writes wait ends as soon as the applier has applied the
// records it waits for, not at the next interval's publication: with an
// interval of an hour, WaitFor still returns the snapshot holding the
// record (bounded by the test's deadline instead of hanging when it does
// not), and a record nobody waits for is not published before the tick.
func TestApplierPublishesForWaiters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := triangleLive(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	batches := make(chan source.EdgeBatch)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	applyDone := make(chan error, 1)
	go func() { applyDone <- RunApplier(actx, slog.New(slog.DiscardHandler), l, batches, time.Hour, m) }()
	insert := func(off int64) source.EdgeBatch {
		return source.EdgeBatch{Partition: 0, Offset: off, Updates: []livegraph.Update{{Op: livegraph.Insert, Src: 0, Dst: 2}}}
	}
	batches <- insert(0) // nobody waits: published at the tick
	got := make(chan *livegraph.Snapshot, 1)
	waitErr := make(chan error, 1)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	go func() {
		s, err := l.WaitFor(wctx, map[int32]int64{0: 2})
		if err != nil {
			waitErr <- err
			return
		}
		got <- s
	}()
	batches <- insert(1)
	select {
	case s := <-got:
		if s.Watermark()[0] != 2 || s.Stats().Inserted != 2 {
			t.Fatalf("WaitFor returned watermark %v with %d inserts, want offset 2 and both", s.Watermark(), s.Stats().Inserted)
		}
	case err := <-waitErr:
		t.Fatalf("the wait for a record applied ended without it: %v", err)
	}
	batches <- insert(2)
	if wm := l.Snapshot().Watermark()[0]; wm != 2 {
		t.Fatalf("a record nobody waits for was published before the interval: watermark %d", wm)
	}
	stop()
	<-applyDone
}

// The records queued behind the one the applier takes go in the same pass
// (livegraph.Live.ApplyRecords), and leave what applying them one by one
// leaves: the watermark past every record, the reader's rejected record and
// the one the live graph refuses passed and counted, the others' updates
// applied.
func TestApplierMergesQueuedRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var edges []graph.Edge
	for v := range int64(64) {
		edges = append(edges, graph.Edge{Src: v, Dst: (v + 1) % 64})
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	record := func(p int32, off int64) source.EdgeBatch {
		var ups []livegraph.Update
		for i := range int64(700) {
			op := livegraph.Insert
			if i%10 == 9 {
				op = livegraph.Delete
			}
			ups = append(ups, livegraph.Update{Op: op, Src: (off*7 + i) % 70, Dst: (i * 13) % 64})
		}
		return source.EdgeBatch{Partition: p, Offset: off, Updates: ups}
	}
	var queued []source.EdgeBatch
	for off := range int64(4) {
		for p := range int32(2) {
			queued = append(queued, record(p, off))
		}
	}
	queued[3].Updates, queued[3].Rejected = nil, errors.New("did not decode")
	queued[5].Updates = append(queued[5].Updates, livegraph.Update{Op: 9, Src: 1, Dst: 2})
	in := make(chan source.EdgeBatch, len(queued))
	for _, b := range queued {
		in <- b
	}
	close(in)
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := RunApplier(ctx, slog.New(slog.DiscardHandler), l, in, time.Hour, m); err != nil {
		t.Fatal(err)
	}
	if got := liveCounter(t, m.applyPasses); got != 1 {
		t.Errorf("%d records queued went in %v passes, want 1", len(queued), got)
	}
	one, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, b := range queued {
		if b.Rejected != nil || one.Apply(b.Partition, b.Offset, b.Updates) != nil {
			_ = one.Apply(b.Partition, b.Offset, nil)
			continue
		}
		applied += len(b.Updates)
	}
	got, want := l.Snapshot(), one.Publish()
	if got.Stats() != want.Stats() || !maps.Equal(got.Watermark(), want.Watermark()) {
		t.Fatalf("applier: %+v at %v; one by one: %+v at %v", got.Stats(), got.Watermark(), want.Stats(), want.Watermark())
	}
	if u, r := liveCounter(t, m.updates), liveCounter(t, m.rejected); u != float64(applied) || r != 2 {
		t.Errorf("counted %v updates and %v rejected records, want %d and 2", u, r, applied)
	}
}

// runReaderApplier runs the edge reader of topic "edges" on brokers and
// the applier into l, as the stage does, with metrics m; stop ends the
// reader, then the applier once it has applied what was read, and fails t
// on an error of either.
func runReaderApplier(ctx context.Context, t *testing.T, brokers []string, l *livegraph.Live) (m *Metrics, stop func()) {
	t.Helper()
	r, err := source.NewEdgeReader(source.EdgeReaderConfig{Kafka: source.KafkaOptions{Brokers: brokers, ClientID: "live"},
		Topic: "edges", DLQTopic: "dlq", Check: l.CheckSchema})
	if err != nil {
		t.Fatal(err)
	}
	m, err = NewMetrics(prometheus.NewRegistry())
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	batches := make(chan source.EdgeBatch, 16)
	rctx, cancel := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() { readDone <- r.Run(rctx, batches) }()
	applyDone := make(chan error, 1)
	go func() {
		applyDone <- RunApplier(ctx, slog.New(slog.DiscardHandler), l, batches, 10*time.Millisecond, m)
	}()
	return m, func() {
		t.Helper()
		defer r.Close()
		cancel()
		if err := <-readDone; !errors.Is(err, context.Canceled) {
			t.Fatalf("reader: %v", err)
		}
		close(batches)
		if err := <-applyDone; err != nil {
			t.Fatalf("applier: %v", err)
		}
	}
}

// While records are queued behind a pass, a read-your-writes waiter that
// the pass reached is published for once the queue is drained, not after
// the pass: the records of a backlog read from the broker (kfake over TCP)
// and queued, 256 of them (four passes), with waiters for the 11th, 81st,
// 151st and 221st, make one publication, at the backlog's end, which every
// waiter gets. A publication a pass cost the applier about half its time
// at the paced rate on the 16-core host, so a lag it fell into stayed
// (docs/benchmarks/live-graph.md, "Beside walks: a share only for a walk
// backlog").
func TestApplierPublishesOncePerDrainedQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const records = 4 * mergeRecords
	msgs := make([]kafka.Message, records)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, `{"op":"insert","src":%d,"dst":%d}`, i%3, (i+1)%3)}
	}
	brokers := edgeBacklog(ctx, t, msgs)
	l := triangleLive(t)
	r, err := source.NewEdgeReader(source.EdgeReaderConfig{Kafka: source.KafkaOptions{Brokers: brokers, ClientID: "live"},
		Topic: "edges", DLQTopic: "dlq", Check: l.CheckSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The reader queues the whole backlog before the applier starts: what
	// a stage's applier finds when it falls behind its reader.
	batches := make(chan source.EdgeBatch, 2*records)
	rctx, stopReader := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() { readDone <- r.Run(rctx, batches) }()
	for len(batches) < records {
		select {
		case <-ctx.Done():
			t.Fatalf("the reader queued %d of %d records", len(batches), records)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stopReader()
	if err := <-readDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("reader: %v", err)
	}

	wants := []int64{11, 81, 151, 221}
	got := make(chan *livegraph.Snapshot, len(wants))
	for _, off := range wants {
		go func() {
			s, err := l.WaitFor(ctx, map[int32]int64{0: off})
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
	}
	for l.Waiters() < len(wants) {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d waiters registered", l.Waiters(), len(wants))
		case <-time.After(time.Millisecond):
		}
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	applyDone := make(chan error, 1)
	// An interval of an hour: no tick publishes meanwhile.
	go func() { applyDone <- RunApplier(actx, slog.New(slog.DiscardHandler), l, batches, time.Hour, m) }()
	for range wants {
		s := <-got
		if s == nil {
			t.FailNow()
		}
		if wm := s.Watermark()[0]; wm != records {
			t.Errorf("a waiter got the snapshot at offset %d, want the queue's end %d (published per pass, not per drained queue)", wm, records)
		}
	}
	if n := liveCounter(t, m.published); n != 1 {
		t.Errorf("%d queued records and %d waiters made %v publications, want 1", records, len(wants), n)
	}
	if n := liveCounter(t, m.applyPasses); n != records/mergeRecords {
		t.Errorf("%d queued records went in %v passes, want %d", records, n, records/mergeRecords)
	}
	stop()
	<-applyDone
}

// The applier hands each record's decoded updates back to the edge reader
// once their pass is over (source.EdgeBatch.Release), so the reader decodes
// later binary records into the same slices: 256 records read from kfake
// over TCP, through a queue of 16, land in at most 81 slices (the queue,
// a pass and the record being read), where each took a new one before (48
// bytes an update for the collector).
func TestApplierReleasesDecodedUpdates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const records = 256
	msgs := make([]kafka.Message, records)
	for i := range msgs {
		ups := make([]livegraph.Update, 64)
		for j := range ups {
			ups[j] = livegraph.Update{Op: livegraph.Insert, Src: int64((i + j) % 3), Dst: int64((i + j + 1) % 3)}
		}
		msgs[i] = kafka.Message{Value: livegraph.AppendBinary(nil, ups)}
	}
	brokers := edgeBacklog(ctx, t, msgs)
	l := triangleLive(t)
	// Check sees every record's slice as the reader decoded it.
	arrays := map[*livegraph.Update]bool{}
	seen := 0
	r, err := source.NewEdgeReader(source.EdgeReaderConfig{Kafka: source.KafkaOptions{Brokers: brokers, ClientID: "live"},
		Topic: "edges", DLQTopic: "dlq", Check: func(ups []livegraph.Update) error {
			arrays[&ups[:1][0]] = true // one reader goroutine: one partition
			seen++
			return l.CheckSchema(ups)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	batches := make(chan source.EdgeBatch, 16)
	rctx, stopReader := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() { readDone <- r.Run(rctx, batches) }()
	applyDone := make(chan error, 1)
	go func() {
		applyDone <- RunApplier(ctx, slog.New(slog.DiscardHandler), l, batches, 10*time.Millisecond, m)
	}()
	for l.Snapshot().Watermark()[0] < records {
		select {
		case <-ctx.Done():
			t.Fatalf("applied up to %v of %d records", l.Snapshot().Watermark(), records)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stopReader()
	if err := <-readDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("reader: %v", err)
	}
	close(batches)
	if err := <-applyDone; err != nil {
		t.Fatalf("applier: %v", err)
	}
	if seen != records {
		t.Fatalf("checked %d records, want %d", seen, records)
	}
	// At most the queue's 16, a pass's records (mergeRecords at most: the
	// reader may refill the queue while the applier drains it) and the
	// record the reader holds while the queue is full.
	if most := 16 + mergeRecords + 1; len(arrays) > most {
		t.Errorf("%d records were decoded into %d slices, want at most %d", records, len(arrays), most)
	}
	if u := liveCounter(t, m.updates); u != records*64 {
		t.Errorf("applied %v updates, want %d", u, records*64)
	}
}

// triangleLive is a live graph over the directed triangle 0 -> 1 -> 2 -> 0.
func triangleLive(t *testing.T) *livegraph.Live {
	t.Helper()
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 1, Dst: 2}, {Src: 2, Dst: 0}}, graph.BuildOptions{Name: "live", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// edgeBacklog starts a one-broker kfake cluster over TCP with an "edges"
// topic of one partition and a "dlq" topic, writes msgs to the edges
// partition before anything reads it (a backlog), and returns the
// brokers' addresses; the cluster closes when the test ends.
func edgeBacklog(ctx context.Context, t *testing.T, msgs []kafka.Message) []string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "edges", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", Balancer: fixedPartition(0), RequiredAcks: kafka.RequireAll, BatchSize: len(msgs)}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return brokers
}
