package source

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/message"
)

// smallDLQCluster is kfake over TCP taking records up to 20 MiB, with the
// dead-letter topic held to dlqLimit bytes.
func smallDLQCluster(t *testing.T, dlqLimit int) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20971520"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	res, err := cl.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "dlq",
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: strconv.Itoa(dlqLimit)}}}}})
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

// rejectOne fetches the first message of "in" and acknowledges it with its
// rejection; checkTopics says whether the consumer reads the topics' limits
// first.
func rejectOne(t *testing.T, ctx context.Context, brokers []string, checkTopics bool) error {
	t.Helper()
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		OutputTopic: "out", SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, CallTimeout: 5 * time.Second,
		Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if checkTopics {
		if err := c.CheckTopics(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reject == nil {
		t.Fatalf("want a rejection, got %+v", d.Request)
	}
	return d.Ack(ctx, d.Reject)
}

// TestDeadLetterKeepsKeyAndOwnsItsHeaders: a key below the dead-letter
// topic's limit is copied byte for byte (it was cut to 4,096 bytes), and
// headers a producer set in the stage's namespace neither precede nor
// replace the stage's own: they are kept, renamed original-walkstage-*.
func TestDeadLetterKeepsKeyAndOwnsItsHeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := smallDLQCluster(t, 1048588)
	key := append(bytes.Repeat([]byte("key-"), 4<<10), 0xff, 0x00) // 16 KiB, not UTF-8
	produce(t, ctx, brokers, "in", kafka.Message{Key: key, Value: []byte(`{oops`), Headers: []kafka.Header{
		{Key: HeaderReason, Value: []byte("spoofed")},
		{Key: HeaderSourceOffset, Value: []byte("999")},
		{Key: "Walkstage-Error", Value: []byte("spoofed too")},
		{Key: "trace", Value: []byte("t1")},
	}})
	if err := rejectOne(t, ctx, brokers, true); err != nil {
		t.Fatal(err)
	}
	dl := readOne(t, ctx, brokers, "dlq", 1)
	if !bytes.Equal(dl.Key, key) || string(dl.Value) != `{oops` {
		t.Errorf("dead letter key (%d bytes of %d) or value %q changed", len(dl.Key), len(key), dl.Value)
	}
	var names []string
	for _, h := range dl.Headers {
		v := string(h.Value)
		if h.Key == HeaderSourceTimestamp {
			// The broker's append time: any positive Unix millisecond.
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
				v = "<ms>"
			}
		}
		names = append(names, h.Key+"="+v)
	}
	want := []string{HeaderError + "=not a JSON object: invalid character 'o' looking for beginning of object key string",
		HeaderReason + "=malformed", HeaderSourceTopic + "=in", HeaderSourcePartition + "=0", HeaderSourceOffset + "=0",
		HeaderSourceTimestamp + "=<ms>",
		"original-" + HeaderReason + "=spoofed", "original-" + HeaderSourceOffset + "=999", "original-Walkstage-Error=spoofed too",
		"trace=t1"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("dead-letter headers:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

// TestDeadLetterTooLargeForTheTopicFallsBackToAStub: the dead-letter
// topic takes less than the stage assumed (its limit was not read: Kafka's
// default stands), so the full copy is refused by the broker. A too-large
// record is refused on every attempt; the acknowledgement used to fail on
// every retry (kafka-go reports the broker's refusal as WriteErrors, which
// the check did not look into). Now the smallest stub is sent.
func TestDeadLetterTooLargeForTheTopicFallsBackToAStub(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	brokers := smallDLQCluster(t, 64<<10)
	value := `{"version":1,"batch_id":"big",` + strings.Repeat(" ", 200<<10) + `"oops"}`
	produce(t, ctx, brokers, "in", kafka.Message{Key: []byte("big"), Value: []byte(value),
		Headers: []kafka.Header{{Key: "trace", Value: []byte("t1")}}})
	if err := rejectOne(t, ctx, brokers, false); err != nil {
		t.Fatalf("ack: %v", err)
	}
	dl := readOne(t, ctx, brokers, "dlq", 1)
	var s stub
	if err := json.Unmarshal(dl.Value, &s); err != nil {
		t.Fatalf("stub %q: %v", dl.Value, err)
	}
	if string(dl.Key) != "big" || s.Bytes != len(value) || s.SourceTopic != "in" || s.Reason != string(message.ReasonMalformed) ||
		strings.Join(s.Cut, ",") != "headers,value" {
		t.Errorf("stub key %q value %s", dl.Key, dl.Value)
	}
}

// TestStubFitsItsLimit: whatever the message, a dead letter stays within
// the limit it is given, and the smallest stub within MinTopicRecordBytes;
// the stub keeps what fits (the key, small headers, the value's head).
func TestStubFitsItsLimit(t *testing.T) {
	huge := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	longTopic := strings.Repeat("t", 249)
	cases := []struct {
		name     string
		m        kafka.Message
		limit    int
		keyWhole bool
		headers  int // original headers kept
	}{
		{"2 MiB header", kafka.Message{Topic: "in", Key: []byte("k"), Value: []byte(`{oops`),
			Headers: []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "blob", Value: huge('h', 2<<20)}, {Key: "b", Value: []byte("2")}}},
			1048588, true, 2},
		{"600 KiB key", kafka.Message{Topic: "in", Key: huge('k', 600<<10), Value: []byte(`{oops`)}, 256 << 10, false, 0},
		{"key and value", kafka.Message{Topic: "in", Key: huge('k', 600<<10), Value: huge('v', 2<<20)}, 1048588, true, 0},
		{"escapes", kafka.Message{Topic: "in", Key: []byte("k"), Value: huge(0x01, 1<<20)}, 64 << 10, true, 0},
		{"not UTF-8", kafka.Message{Topic: "in", Key: []byte("k"), Value: huge(0xff, 1<<20)}, 64 << 10, true, 0},
		{"everything long", kafka.Message{Topic: longTopic, Partition: 1 << 30, Offset: 1 << 62, Key: huge(0xff, 1<<20),
			Value: huge('"', 1<<20), Headers: []kafka.Header{{Key: string(huge('x', 1<<20)), Value: huge('y', 1<<20)}}},
			MinTopicRecordBytes, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cause := strings.Repeat("why ", 1<<18)
			dl := deadLetterRecord(tc.m, "malformed", cause, tc.limit)
			if n := recordBytes(dl); n > tc.limit {
				t.Errorf("dead letter of %d bytes, limit %d", n, tc.limit)
			}
			if bytes.Equal(dl.Key, tc.m.Key) != tc.keyWhole {
				t.Errorf("key (%d of %d bytes) kept whole: %v", len(dl.Key), len(tc.m.Key), !tc.keyWhole)
			}
			var s stub
			if err := json.Unmarshal(dl.Value, &s); err != nil {
				t.Fatalf("stub: %v", err)
			}
			if s.HeadersKept != tc.headers || len(dl.Headers) != 7+tc.headers || s.Bytes != len(tc.m.Value) ||
				s.KeyBytes != len(tc.m.Key) {
				t.Errorf("stub %.400s with %d headers", dl.Value, len(dl.Headers))
			}
			// The value's head fills the room that is left, within a
			// margin (escapes are up to six bytes a byte).
			if free := tc.limit - recordBytes(dl); s.ValueHeadBytes < len(tc.m.Value) && free > 64<<10/6+64 {
				t.Errorf("%d bytes left unused, value head %d bytes", free, s.ValueHeadBytes)
			}
			small := stubRecord(tc.m, "malformed", cause, tc.limit, true)
			if n := recordBytes(small); n > MinTopicRecordBytes {
				t.Errorf("smallest stub is %d bytes", n)
			}
		})
	}
}

// TestEventFitsASmallTopic: a rejected event whose batch id is a 600 KiB
// key and whose error is 100 KiB is published within a completions topic
// that takes 4 KiB (it was refused on every retry), its batch id bounded
// and equal to its key.
func TestEventFitsASmallTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	if _, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "out",
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: strconv.Itoa(MinTopicRecordBytes)}}}}}); err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(KafkaOptions{Brokers: brokers}, "out", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	key := strings.Repeat("k", 600<<10)
	ev := message.Event{BatchID: key, Status: message.StatusRejected, Reason: string(message.ReasonMalformed), Error: strings.Repeat("e", 100<<10),
		SkippedIDs: make([]string, 100)}
	if err := p.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	m := readOne(t, ctx, brokers, "out", 1)
	var got message.Event
	if err := json.Unmarshal(m.Value, &got); err != nil {
		t.Fatal(err)
	}
	if n := recordBytes(m); n > MinTopicRecordBytes || got.BatchID != message.BoundID(key) || string(m.Key) != got.BatchID ||
		got.Reason != ev.Reason || len(got.Error) > minErrorBytes || !strings.HasPrefix(got.Error, "eee") {
		t.Errorf("event of %d bytes: key %.40q... %.300s", n, m.Key, m.Value)
	}
}

// TestCheckTopicsRefusesTinyLimits: a dead-letter or completions topic that
// cannot take even the smallest stub or event is a configuration error.
func TestCheckTopicsRefusesTinyLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := smallDLQCluster(t, 1000)
	c, err := NewConsumer(ConsumerConfig{Kafka: KafkaOptions{Brokers: brokers}, Topic: "in", Group: "g", DLQTopic: "dlq",
		OutputTopic: "out", Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CheckTopics(ctx); err == nil || !strings.Contains(err.Error(), `topic "dlq" takes records up to 1000 bytes`) {
		t.Fatalf("CheckTopics: %v", err)
	}
}

// FuzzDeadLetterFits: any key, header and value, any limit the stage
// accepts, gives a dead letter within the limit whose stub (when it is one)
// is JSON with the original's sizes.
func FuzzDeadLetterFits(f *testing.F) {
	f.Add([]byte("k"), []byte("h"), []byte(`{oops`), "malformed", MinTopicRecordBytes)
	f.Add(bytes.Repeat([]byte{0xff}, 9000), bytes.Repeat([]byte{1}, 3000), bytes.Repeat([]byte(`"\`), 5000), "too_large", 8192)
	f.Fuzz(func(t *testing.T, key, header, value []byte, cause string, limit int) {
		limit = MinTopicRecordBytes + abs(limit)%(64<<10)
		m := kafka.Message{Topic: "in", Partition: 3, Offset: 17, Key: key, Value: value,
			Headers: []kafka.Header{{Key: "walkstage-x", Value: header}, {Key: string(header), Value: key}}}
		dl := deadLetterRecord(m, "malformed", cause, limit)
		if n := recordBytes(dl); n > limit {
			t.Fatalf("dead letter of %d bytes, limit %d", n, limit)
		}
		if dl.Headers[0].Key != HeaderError || dl.Headers[4].Key != HeaderSourceOffset {
			t.Fatalf("the stage's headers are not first: %v", dl.Headers[:5])
		}
		if bytes.Equal(dl.Value, value) && bytes.Equal(dl.Key, key) {
			return // a full copy
		}
		var s stub
		if err := json.Unmarshal(dl.Value, &s); err != nil || s.Bytes != len(value) || s.KeyBytes != len(key) ||
			s.ValueHeadBytes > len(value) {
			t.Fatalf("stub %q: %v", dl.Value, err)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
