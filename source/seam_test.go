package source

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/message"
)

// largeRecordCluster is kfake over TCP whose brokers take records up to
// 20 MiB, with the dead-letter topic held to Kafka's default 1 MiB, as a
// production cluster whose input topic was raised and whose DLQ was not.
func largeRecordCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out", "dlq"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20971520"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	res, err := cl.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "dlq",
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: "1048588"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		if e != nil {
			t.Fatal(e)
		}
	}
	return addrs
}

func produce(t *testing.T, ctx context.Context, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchBytes: 32 << 20}
	defer w.Close()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

func readOne(t *testing.T, ctx context.Context, brokers []string, topic string, partitions int) kafka.Message {
	t.Helper()
	for p := 0; ; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p % partitions,
			MaxWait: 100 * time.Millisecond, MaxBytes: 32 << 20})
		rctx, rc := context.WithTimeout(ctx, 2*time.Second)
		m, err := r.ReadMessage(rctx)
		rc()
		r.Close()
		if err == nil {
			return m
		}
		if p > 3*partitions {
			t.Fatalf("nothing on %s", topic)
		}
	}
}

// TestOversizedRejectIsDeadLetteredAsStub: a 2 MiB request that must be
// rejected is larger than the dead-letter topic takes. Before, the copy
// was refused and the stage stopped on every restart; now the copy is a
// stub naming the original's size and checksum, and the offset commits.
func TestOversizedRejectIsDeadLetteredAsStub(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := largeRecordCluster(t)
	big := `{"version":1,"batch_id":"big","algorithm":"deepwalk","seeds":[` + strings.Repeat("100,", 512<<10) + `100]}`
	produce(t, ctx, brokers, "in", kafka.Message{Key: []byte("big"), Value: []byte(big)})
	cfg := ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq", OutputTopic: "out",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t),
		Logger: testLogger(t)}
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CheckTopics(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.dlqMax.Load(); got != 1048588 {
		t.Fatalf("dead-letter limit read as %d", got)
	}
	d, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reject == nil || d.Reject.Reason != message.ReasonTooLarge {
		t.Fatalf("want a too_large rejection, got %+v", d.Reject)
	}
	if err := d.Ack(ctx, d.Reject); err != nil {
		t.Fatalf("ack of an oversized rejection: %v", err)
	}
	dl := readOne(t, ctx, brokers, "dlq", 2)
	hs := map[string]string{}
	for _, h := range dl.Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs[HeaderReason] != string(message.ReasonTooLarge) || hs[HeaderTruncated] != strconv.Itoa(len(big)) {
		t.Fatalf("stub headers: %v", hs)
	}
	var stub struct {
		Bytes  int    `json:"original_bytes"`
		SHA256 string `json:"original_sha256"`
	}
	if err := json.Unmarshal(dl.Value, &stub); err != nil || stub.Bytes != len(big) || len(stub.SHA256) != 64 {
		t.Fatalf("stub %q: %v", dl.Value, err)
	}
}

// TestAckRefusesInfrastructureErrors: only a request error may end a
// delivery early. An outage passed to Ack commits nothing, so the message
// comes back to the group.
func TestAckRefusesInfrastructureErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := newCluster(t, 1, "in", "dlq")
	produce(t, ctx, brokers, "in", kafka.Message{Key: []byte("b1"), Value: []byte(`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100]}`)})
	cfg := ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t),
		Logger: testLogger(t)}
	c1, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c1.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx, errors.New("object store unreachable")); err == nil {
		t.Fatal("Ack took an infrastructure error")
	}
	c1.Close()
	c2, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	d2, err := c2.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d2.BatchID() != "b1" {
		t.Fatalf("redelivered %q", d2.BatchID())
	}
	if err := d2.Ack(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCheckTopicsNamesMissingTopics: a missing output topic is found at
// start-up, by name, not at the first publish after walking and writing.
func TestCheckTopicsNamesMissingTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := newCluster(t, 1, "in", "dlq")
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		OutputTopic: "walk-events", Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.CheckTopics(ctx)
	if err == nil || !strings.Contains(err.Error(), `topic "walk-events" does not exist`) {
		t.Fatalf("CheckTopics: %v", err)
	}
	if err := c.Ping(ctx); err == nil {
		t.Fatal("Ping passed with a topic missing")
	}
}

// TestPingFailsWithinItsDeadline: a broker that accepts connections but
// never answers (stopped, partitioned) fails the probe in time.
func TestPingFailsWithinItsDeadline(t *testing.T) {
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: []string{blackhole(t)}}, Topic: "in", Group: "g",
		DLQTopic: "dlq", CallTimeout: 500 * time.Millisecond, Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now()
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("ping of a silent broker passed")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("ping took %v", d)
	}
}

// blackhole listens and accepts but never answers, like a SIGSTOPped broker.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}

// TestIdleConsumerLogsNoWarnings: a long poll that finds nothing is not an
// error. Before, every idle poll of every partition logged "the kafka reader
// got an unknown error reading partition ... i/o timeout" at warn level,
// the first thing a newcomer saw in the demo.
func TestIdleConsumerLogsNoWarnings(t *testing.T) {
	brokers := newCluster(t, 3, "in", "dlq")
	var buf syncBuf
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if _, err := c.Next(ctx); err == nil {
		t.Fatal("a message on an empty topic")
	}
	if s := buf.String(); s != "" {
		t.Fatalf("an idle consumer logged warnings:\n%s", s)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPingFailsWhenTheBrokerGoes: kafka-go answers Metadata from its cache,
// so a probe of metadata alone kept passing through a broker outage (the
// chaos suite's SIGSTOP found it). The probe must reach the broker.
func TestPingFailsWhenTheBrokerGoes(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: c.ListenAddrs()}, Topic: "in", Group: "g",
		DLQTopic: "dlq", CallTimeout: time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if err := cons.Ping(context.Background()); err != nil {
		t.Fatalf("ping of a live broker: %v", err)
	}
	c.Close()
	if err := cons.Ping(context.Background()); err == nil {
		t.Fatal("ping passed with the broker gone")
	}
}

// TestRedeliveredRejectionIsNotCopiedTwice: a replica dead-letters a
// rejection and is killed before the offset is committed (its commit waits
// behind earlier batches). The next owner gets the record again; reading the
// dead-letter topic back, it acknowledges without a second copy.
func TestRedeliveredRejectionIsNotCopiedTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := newCluster(t, 2, "in", "dlq")
	produce(t, ctx, brokers, "in", kafka.Message{Key: []byte("bad"), Value: []byte(`{oops`)})
	cfg := ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t),
		Logger: testLogger(t)}
	// The first owner: copies the record, then dies before committing.
	m := readOne(t, ctx, brokers, "in", 2)
	first, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.deadLetter(ctx, m, "bad", string(message.ReasonMalformed), "not JSON"); err != nil {
		t.Fatal(err)
	}
	first.Close()
	// The next owner.
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reject == nil {
		t.Fatal("the bad record was not rejected")
	}
	if err := d.Ack(ctx, d.Reject); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, ctx, brokers, "dlq", 2); n != 1 {
		t.Fatalf("%d dead-letter copies, want 1", n)
	}
}

// countRecords counts a topic's records (end offsets minus start offsets).
func countRecords(t *testing.T, ctx context.Context, brokers []string, topic string, partitions int) int64 {
	t.Helper()
	var n int64
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += last - first
	}
	return n
}

// TestIndexSyncReachesTheEnd: sync returns once the index has read every
// dead-letter record present, also on empty partitions, so a retry after a
// write of unknown outcome sees that write if it landed.
func TestIndexSyncReachesTheEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := newCluster(t, 3, "in", "dlq")
	m := kafka.Message{Topic: "in", Partition: 2, Offset: 77, Key: []byte("k"), Value: []byte("v")}
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.dlqIdx.sync(ctx, 10*time.Second); err != nil {
		t.Fatalf("sync of an empty topic: %v", err)
	}
	// A copy written behind the index's back (another replica's, or ours
	// whose answer was lost) is known after a sync.
	other, err := newWriter(KafkaOptions{Brokers: brokers}, "dlq", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: m.Value, Headers: []kafka.Header{
		{Key: HeaderSourceTopic, Value: []byte("in")}, {Key: HeaderSourcePartition, Value: []byte("2")},
		{Key: HeaderSourceOffset, Value: []byte("77")}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.dlqIdx.sync(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.dlqIdx.has(ctx, srcRef{"in", 2, 77, -1}, time.Second); !ok {
		t.Fatal("the copy is unknown after sync")
	}
}
