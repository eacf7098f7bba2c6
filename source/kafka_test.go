package source

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
)

func newCluster(t *testing.T, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("WALKSTAGE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testGraph is a small weighted, labelled, undirected graph with external
// ids 100..109 (a ring plus chords), so dense and external ids differ; the
// message package's tests decode against the same graph.
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := int64(0); i < 10; i++ {
		edges = append(edges, graph.Edge{Src: 100 + i, Dst: 100 + (i+1)%10, Weight: float32(i + 1), Label: uint8(i % 2)})
		edges = append(edges, graph.Edge{Src: 100 + i, Dst: 100 + (i+3)%10, Weight: 1, Label: uint8((i + 1) % 2)})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "test", Undirected: true, Weighted: true, Labelled: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestConsumerGroupOverKfake checks kafka-go's group protocol against kfake:
// join, sync, fetch, in-order commit, and a second member resuming from the
// committed offsets. It also dead-letters one message.
func TestConsumerGroupOverKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := newCluster(t, 3, "in", "dlq")
	g := testGraph(t)
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "in", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 10 {
		id := fmt.Sprintf("b%d", i)
		msgs = append(msgs, kafka.Message{Key: []byte(id), Value: []byte(`{"version":1,"batch_id":"` + id + `","algorithm":"deepwalk","seeds":[100]}`)})
	}
	msgs = append(msgs, kafka.Message{Key: []byte("bad"), Value: []byte(`{oops`), Headers: []kafka.Header{{Key: "trace", Value: []byte("t1")}}})
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	cfg := ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers, ClientID: "test"}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, Limits: message.DefaultLimits(), Graph: g, Logger: testLogger(t)}
	c1, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Read 6 messages, acknowledge them all, then close: the group's
	// offsets must cover exactly those.
	seen := map[string]bool{}
	for range 6 {
		d, err := c1.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reject != nil {
			if d.Reject.Reason != message.ReasonMalformed || d.BatchID() != "bad" {
				t.Fatalf("reject: %+v", d.Reject)
			}
		}
		seen[d.BatchID()] = true
		if err := d.Ack(ctx, ackCause(d)); err != nil {
			t.Fatal(err)
		}
	}
	if !c1.Joined() {
		time.Sleep(500 * time.Millisecond)
		if !c1.Joined() {
			t.Error("consumer never reported joining")
		}
	}
	if lag := c1.Lag(); lag < 0 || lag > 5 {
		t.Errorf("lag %d after 6 of 11 messages", lag)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for len(seen) < 11 {
		d, err := c2.Next(ctx)
		if err != nil {
			t.Fatalf("after %d batches: %v", len(seen), err)
		}
		if seen[d.BatchID()] {
			t.Fatalf("batch %s redelivered after its commit", d.BatchID())
		}
		seen[d.BatchID()] = true
		if err := d.Ack(ctx, ackCause(d)); err != nil {
			t.Fatal(err)
		}
	}
	var dl kafka.Message
	for p := 0; ; p++ {
		r2 := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "dlq", Partition: p % 3, MaxWait: 100 * time.Millisecond})
		rctx, rc := context.WithTimeout(ctx, time.Second)
		m, err := r2.ReadMessage(rctx)
		rc()
		r2.Close()
		if err == nil {
			dl = m
			break
		}
		if p > 6 {
			t.Fatal("no dead letter found")
		}
	}
	if string(dl.Value) != `{oops` || string(dl.Key) != "bad" {
		t.Fatalf("dead letter changed: %q %q", dl.Key, dl.Value)
	}
	hs := map[string]string{}
	for _, h := range dl.Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["trace"] != "t1" || hs[HeaderReason] != "malformed" || hs[HeaderError] == "" || hs[HeaderSourceTopic] != "in" {
		t.Fatalf("dead letter headers: %v", hs)
	}
}

// ackCause is what the stage acknowledges a delivery with: its rejection, or
// nil for a request it completed.
func ackCause(d *Delivery) error {
	if d.Reject != nil {
		return d.Reject
	}
	return nil
}
