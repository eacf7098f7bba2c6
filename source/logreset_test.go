package source

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/message"
)

// freePort is a TCP port nothing listens on, for a cluster that must come
// back on the same address.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startCluster(t *testing.T, port int, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func goodMsg(id string) kafka.Message {
	return kafka.Message{Key: []byte(id), Value: []byte(`{"version":1,"batch_id":"` + id + `","algorithm":"deepwalk","seeds":[100]}`)}
}

func badMsg(id string) kafka.Message {
	return kafka.Message{Key: []byte(id), Value: []byte(`{oops ` + id)}
}

// consumeAll acknowledges deliveries as the stage does until every id in
// want was delivered; it fails on an id delivered twice after its ack.
func consumeAll(t *testing.T, ctx context.Context, c *Consumer, want ...string) {
	t.Helper()
	left := map[string]bool{}
	for _, id := range want {
		left[id] = true
	}
	for len(left) > 0 {
		d, err := c.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("never delivered: %v (%v)", left, err)
			}
			continue // the broker's trouble: the stage retries
		}
		delete(left, d.BatchID())
		if err := d.Ack(ctx, ackCause(d)); err != nil {
			t.Fatalf("ack %s: %v", d.BatchID(), err)
		}
	}
}

// committedOffset is the group's committed offset of in/0 (-1: none).
func committedOffset(t *testing.T, ctx context.Context, brokers []string, group string) int64 {
	t.Helper()
	// A transport of its own: the default one keeps connections to a
	// cluster that was replaced on the same address.
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
	res, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"in": {0}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Topics["in"] {
		if p.Partition == 0 {
			return p.CommittedOffset
		}
	}
	return -1
}

// deadLetters counts the dead-letter copies by the source record's key.
func deadLetters(t *testing.T, ctx context.Context, brokers []string) map[string]int {
	t.Helper()
	n := countRecords(t, ctx, brokers, "dlq", 1)
	out := map[string]int{}
	if n == 0 {
		return out
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "dlq", MaxWait: 100 * time.Millisecond})
	defer r.Close()
	for range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[string(m.Key)]++
	}
	return out
}

// TestReplacedLogIsReadFromItsStart: the input partition's log is replaced
// while the stage runs (the broker back on the same address without its
// data; the topic deleted and created again) and the new log reuses the
// offsets. Before, the dead-letter index still knew the old log's rejections
// by (topic, partition, offset), so a new bad record at a reused offset was
// "already dead-lettered" and never copied, and the tracker kept the old
// log's commit point, so nothing of the new log was ever committed. Now
// every new record is delivered, every new rejection copied once, and the
// group's offset is the new log's end, never past it.
func TestReplacedLogIsReadFromItsStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, c *kfake.Cluster, port int) *kfake.Cluster
	}{
		{"broker back without its data", func(t *testing.T, c *kfake.Cluster, port int) *kfake.Cluster {
			c.Close()
			return startCluster(t, port, "in", "dlq")
		}},
		{"topic deleted and created again", func(t *testing.T, c *kfake.Cluster, port int) *kfake.Cluster {
			if err := c.DeleteTopic("in"); err != nil {
				t.Fatal(err)
			}
			if err := c.CreateTopic("in", 1, nil); err != nil {
				t.Fatal(err)
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			port := freePort(t)
			cluster := startCluster(t, port, "in", "dlq")
			defer func() { cluster.Close() }()
			brokers := cluster.ListenAddrs()
			// The old log: twelve records, rejections at offsets 3 and 7.
			var old []kafka.Message
			var oldIDs []string
			for i := range 12 {
				id := "old" + strconv.Itoa(i)
				if i == 3 || i == 7 {
					old = append(old, badMsg(id))
				} else {
					old = append(old, goodMsg(id))
				}
				oldIDs = append(oldIDs, id)
			}
			produce(t, ctx, brokers, "in", old...)
			c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
				SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: 200 * time.Millisecond,
				CallTimeout: 2 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			consumeAll(t, ctx, c, oldIDs...)
			if got := committedOffset(t, ctx, brokers, "g"); got != 12 {
				t.Fatalf("old log: committed %d, want 12", got)
			}

			cluster = tc.replace(t, cluster, port)
			// The new log: six records, rejections at offsets 3 (a
			// rejection's offset in the old log too) and 5.
			var fresh []kafka.Message
			var freshIDs []string
			for i := range 6 {
				id := "new" + strconv.Itoa(i)
				if i == 3 || i == 5 {
					fresh = append(fresh, badMsg(id))
				} else {
					fresh = append(fresh, goodMsg(id))
				}
				freshIDs = append(freshIDs, id)
			}
			produce(t, ctx, brokers, "in", fresh...)
			consumeAll(t, ctx, c, freshIDs...)

			if got := committedOffset(t, ctx, brokers, "g"); got != 6 {
				t.Errorf("new log of 6 records: the group's offset is %d", got)
			}
			dl := deadLetters(t, ctx, brokers)
			for _, id := range []string{"new3", "new5"} {
				if dl[id] != 1 {
					t.Errorf("rejection %s of the new log has %d dead-letter copies, want 1 (all: %v)", id, dl[id], dl)
				}
			}
			if c.LogResets() == 0 {
				t.Error("the replaced log was not counted")
			}
		})
	}
}

// TestCommittedOffsetBeyondTheLogEnd: a stage starts against a log that
// ends below the group's committed offset (the log was replaced while no
// replica ran, and an old acknowledgement was committed into the new log).
// Before, kafka-go's reader waited there silently until the log grew past
// the offset, skipping every record below it. Now the partition is read
// from its start.
func TestCommittedOffsetBeyondTheLogEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := newCluster(t, 1, "in", "dlq")
	var ids []string
	var msgs []kafka.Message
	for i := range 5 {
		ids = append(ids, fmt.Sprintf("b%d", i))
		msgs = append(msgs, goodMsg(ids[i]))
	}
	produce(t, ctx, brokers, "in", msgs...)
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := cl.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: "g", GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"in": {{Partition: 0, Offset: 40}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Topics["in"] {
		if p.Error != nil {
			t.Fatal(p.Error)
		}
	}
	if got := committedOffset(t, ctx, brokers, "g"); got != 40 {
		t.Fatalf("set-up: committed %d", got)
	}
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: 200 * time.Millisecond,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumeAll(t, ctx, c, ids...)
	if got := committedOffset(t, ctx, brokers, "g"); got != 5 {
		t.Errorf("committed %d, want the log end 5", got)
	}
	if c.LogResets() != 1 {
		t.Errorf("%d log resets counted, want 1", c.LogResets())
	}
}

// TestTopicCreatedDuringAssignmentIsConsumed: the input topic is created
// after the group's leader computed an assignment without it and before the
// members took that (empty) assignment. Before, the group stayed Stable with
// nothing assigned until a restart: kafka-go's partition watcher counted the
// partitions at the start of the generation, found the new topic already
// there, and never saw a change. Now the consumer compares the group's
// assignment with the topic and has the group assigned again.
func TestTopicCreatedDuringAssignmentIsConsumed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	// The first SyncGroup carries the leader's assignment, made while the
	// topic did not exist: create the topic before the broker answers it.
	cluster.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.DropControl()
		cluster.SleepControl(func() {
			if err := cluster.CreateTopic("in", 2, nil); err != nil {
				t.Error(err)
			}
		})
		return nil, nil, false
	})
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: 200 * time.Millisecond,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []string
	var msgs []kafka.Message
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("b%d", i))
		msgs = append(msgs, goodMsg(ids[i]))
	}
	for cluster.TopicInfo("in") == nil {
		if ctxsleep.Sleep(ctx, 20*time.Millisecond) != nil {
			t.Fatal("the topic was never created")
		}
	}
	produce(t, ctx, brokers, "in", msgs...)
	consumeAll(t, ctx, c, ids...)
	for c.Consuming() != nil {
		if ctxsleep.Sleep(ctx, 50*time.Millisecond) != nil {
			t.Fatalf("still not consuming after every record was read: %v", c.Consuming())
		}
	}
}

// TestConsumingSaysTheTopicIsMissing: while the input topic does not exist,
// Consuming says so (the stage is not ready); once it exists and the group
// reads it, Consuming is nil.
func TestConsumingSaysTheTopicIsMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: 200 * time.Millisecond,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for c.Consuming() == nil {
		if ctxsleep.Sleep(ctx, 50*time.Millisecond) != nil {
			t.Fatal("the missing topic was never reported")
		}
	}
	if err := c.Consuming(); !strings.Contains(err.Error(), `input topic "in" does not exist`) {
		t.Fatalf("Consuming: %v", err)
	}
	if err := cluster.CreateTopic("in", 2, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, brokers, "in", goodMsg("b0"))
	consumeAll(t, ctx, c, "b0")
	for c.Consuming() != nil {
		if ctxsleep.Sleep(ctx, 50*time.Millisecond) != nil {
			t.Fatalf("still not consuming after the record was read: %v", c.Consuming())
		}
	}
}

// TestIndexTellsRecordsAtReusedOffsetsApart: a copy names its source record
// by offset and timestamp, so a new record at an offset a replaced log had
// used is not taken for the old one; a copy without a timestamp (written
// before the header existed) matches until its partition is forgotten.
func TestIndexTellsRecordsAtReusedOffsetsApart(t *testing.T) {
	ready := make(chan struct{})
	close(ready)
	x := &dlqIndex{seen: map[srcRef]uint64{}, limit: dlqIndexLimit, ready: ready, log: testLogger(t)}
	x.add(srcRef{"in", 0, 3, 1000})
	x.add(srcRef{"in", 1, 5, -1})
	for _, tc := range []struct {
		ref  srcRef
		want bool
	}{
		{srcRef{"in", 0, 3, 1000}, true},
		{srcRef{"in", 0, 3, 2000}, false}, // the same offset in a new log
		{srcRef{"in", 1, 5, 2000}, true},  // a copy without timestamp
		{srcRef{"in", 2, 5, 2000}, false},
	} {
		if got, _ := x.has(context.Background(), tc.ref, time.Second); got != tc.want {
			t.Errorf("has(%v) = %v", tc.ref, got)
		}
	}
	if n := x.forget("in", 1); n != 1 {
		t.Fatalf("forgot %d entries", n)
	}
	if got, _ := x.has(context.Background(), srcRef{"in", 1, 5, 2000}, time.Second); got {
		t.Error("a forgotten partition's copy still counts")
	}
}

// TestRebalanceIsNotALogReset: partitions moving between members, with
// commits made by each in turn, are no replaced log: nothing is counted and
// every record is delivered.
func TestRebalanceIsNotALogReset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	brokers := newCluster(t, 2, "in", "dlq")
	cfg := ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: 200 * time.Millisecond,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)}
	batch := func(from, to int) []string {
		var ids []string
		var msgs []kafka.Message
		for i := from; i < to; i++ {
			ids = append(ids, fmt.Sprintf("b%d", i))
			msgs = append(msgs, goodMsg(ids[len(ids)-1]))
		}
		produce(t, ctx, brokers, "in", msgs...)
		return ids
	}
	c1, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	consumeAll(t, ctx, c1, batch(0, 10)...)
	// A second member takes a partition, commits on it and leaves: the
	// first gets it back at an offset it did not commit itself.
	c2, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for c2.UnassignedPartitions() != 0 || len(c2.assignedNow()) == 0 {
		if ctxsleep.Sleep(ctx, 50*time.Millisecond) != nil {
			t.Fatal("the second member was never assigned a partition")
		}
	}
	ids := batch(10, 30)
	mine := map[int]bool{}
	for _, p := range c2.assignedNow() {
		mine[p] = true
	}
	var theirs, ours []string
	for _, id := range ids {
		if mine[(&kafka.Hash{}).Balance(kafka.Message{Key: []byte(id)}, 0, 1)] {
			theirs = append(theirs, id)
		} else {
			ours = append(ours, id)
		}
	}
	consumeAll(t, ctx, c2, theirs...)
	c2.Close()
	consumeAll(t, ctx, c1, ours...)
	consumeAll(t, ctx, c1, batch(30, 40)...)
	if n := c1.LogResets() + c2.LogResets(); n != 0 {
		t.Fatalf("%d log resets counted across rebalances", n)
	}
}

// TestRecreatedTopicGrownPastThePositionBetweenFetches: the input topic is
// deleted and created again while the reader waits on it, and the new log
// grows past the reader's position before the next fetch (the chaos
// suite's topics recreated right after a broker loss, seeds 12 and 15).
// Before, the next fetch simply answered the new log's records from the
// old position on: its first records were never delivered, and the checks
// that compare records came later, once the last record read was one of
// the new log's. Now every fetch that brings records first checks that the
// log still holds the last record read, so all of the new log is
// delivered. The metadata checks are kept out of the way (a minute apart)
// so that only the fetches can tell.
func TestRecreatedTopicGrownPastThePositionBetweenFetches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	cluster := startCluster(t, port, "in", "dlq")
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	var oldIDs []string
	var old []kafka.Message
	for i := range 4 {
		id := "old" + strconv.Itoa(i)
		old = append(old, goodMsg(id))
		oldIDs = append(oldIDs, id)
	}
	produce(t, ctx, brokers, "in", old...)
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, MetadataInterval: time.Minute,
		CallTimeout: 2 * time.Second, Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumeAll(t, ctx, c, oldIDs...)

	if err := cluster.DeleteTopic("in"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("in", 1, nil); err != nil {
		t.Fatal(err)
	}
	var fresh []kafka.Message
	var freshIDs []string
	for i := range 10 {
		id := "new" + strconv.Itoa(i)
		fresh = append(fresh, goodMsg(id))
		freshIDs = append(freshIDs, id)
	}
	produce(t, ctx, brokers, "in", fresh...)
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	consumeAll(t, wctx, c, freshIDs...)
	if c.LogResets() == 0 {
		t.Error("the replaced log was not counted")
	}
}
