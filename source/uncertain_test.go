package source

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walkstage/walkstage/message"
)

// TestDeadLetterRetryAfterALateAppendCopiesOnce: the broker takes the
// first dead-letter copy but appends it only after the stage gave up on
// its answer and has read the topic's end for the retry (a produce a
// stalled broker reads when it resumes, after a request on another
// connection: the chaos suite's broker SIGSTOP). The retry must find that
// copy and not write a second, whether it is the call's own second try or
// a later acknowledgement's.
func TestDeadLetterRetryAfterALateAppendCopiesOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const callTimeout = 800 * time.Millisecond
	held := make(chan struct{})
	var copies atomic.Int32
	cons, d := heldDLQ(t, ctx, callTimeout, func(c *kfake.Cluster) {
		// The first copy: answered late, after the stage's first attempt
		// timed out and its retry read the topic's end once. Any other
		// (a second copy, while this one sleeps) goes through.
		if copies.Add(1) > 1 {
			return
		}
		close(held)
		c.SleepControl(func() { time.Sleep(callTimeout + 400*time.Millisecond) })
	})
	first := d.Ack(ctx, d.Reject)
	select {
	case <-held:
	default:
		t.Fatal("the dead-letter copy was never produced")
	}
	// The acknowledgement's own second try reads the topic and finds the
	// late copy (deadLetter's two tries), or a later acknowledgement does.
	for attempt := 0; first != nil; attempt++ {
		err := d.Ack(ctx, d.Reject)
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("retries failed: %v", err)
		}
	}
	// Both copies, had there been two, are appended by now.
	time.Sleep(time.Second)
	cl := &kafka.Client{Addr: kafka.TCP(cons.brokers...), Timeout: 10 * time.Second}
	res, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"dlq": {kafka.LastOffsetOf(0)}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Topics["dlq"][0].LastOffset; n != 1 {
		t.Fatalf("%d dead-letter copies, want 1 (first attempt: %v)", n, first)
	}
}

// TestDeadLetterTwoDeliveriesAtOnceCopyOnce: a record delivered again
// while its first dead-letter write still waits on a slow broker (the
// chaos suite's broker SIGSTOP, a redelivery meanwhile) is dead-lettered
// once: the second acknowledgement waits for the first's outcome instead
// of writing a copy beside it.
func TestDeadLetterTwoDeliveriesAtOnceCopyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var copies atomic.Int32
	_, d := heldDLQ(t, ctx, 5*time.Second, func(c *kfake.Cluster) {
		if copies.Add(1) == 1 {
			// The first copy waits on the broker, within the call timeout.
			c.SleepControl(func() { time.Sleep(time.Second) })
		}
	})
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- d.Ack(ctx, d.Reject) }()
		time.Sleep(100 * time.Millisecond)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := copies.Load(); n != 1 {
		t.Fatalf("%d dead-letter copies produced, want 1", n)
	}
}

// heldDLQ is a kfake cluster holding one bad record on "in" whose
// dead-letter produces go through onDLQ (in the cluster's control, kept for
// every request), a consumer of it with the call timeout callTimeout, and
// the delivery of its rejection.
func heldDLQ(t *testing.T, ctx context.Context, callTimeout time.Duration, onDLQ func(c *kfake.Cluster)) (*Consumer, *Delivery) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	produce(t, ctx, brokers, "in", kafka.Message{Key: []byte("bad-1"), Value: []byte(`{oops`)})
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.ProduceRequest); len(r.Topics) > 0 && r.Topics[0].Topic == "dlq" {
			onDLQ(c)
		}
		return nil, nil, false
	})
	cons, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		OutputTopic: "out", SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, CallTimeout: callTimeout,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reject == nil {
		t.Fatalf("want a rejection, got %+v", d.Request)
	}
	return cons, d
}
