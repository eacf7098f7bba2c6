package stage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
)

// limitedCluster is kfake over TCP whose brokers take records up to 20 MiB
// (the input topic takes what producers send) while the completions and
// dead-letter topics are held to the given max.message.bytes, as a cluster
// whose input topic was raised and whose other topics were not.
func limitedCluster(t *testing.T, outLimit, dlqLimit int) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20971520"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	var res []kafka.AlterConfigRequestResource
	for topic, limit := range map[string]int{"out": outLimit, "dlq": dlqLimit} {
		res = append(res, kafka.AlterConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: strconv.Itoa(limit)}}})
	}
	r, err := cl.AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Errors {
		if e != nil {
			t.Fatal(e)
		}
	}
	return addrs
}

// readTopic reads every record partition 0 of topic holds now.
func readTopic(t *testing.T, ctx context.Context, brokers []string, topic string) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, last, err := conn.ReadOffsets()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond,
		MaxBytes: 32 << 20})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for off := first; off < last; off++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("%s: %d of %d records: %v", topic, len(out), last-first, err)
		}
		out = append(out, m)
	}
	return out
}

func recordSize(m kafka.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// TestOversizedKeysAndHeadersDoNotStopTheStage: a malformed message with a
// 2 MiB header, or with a 600 KiB key, used to stop consumption for good.
// The dead-letter copy kept the original headers and was refused by the
// dead-letter topic; the key became the rejected event's batch id and key,
// and the event was refused by the completions topic; either write was
// retried forever by the single source loop. Each bad message must now be
// dead-lettered once, within the topic's limit (a stub where the original
// does not fit, the key byte for byte where it does), get a rejected event
// that fits, and the next good message must complete.
func TestOversizedKeysAndHeadersDoNotStopTheStage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	bigKey := bytes.Repeat([]byte("k"), 600<<10)
	bigHeader := bytes.Repeat([]byte("h"), 2<<20)
	cases := []struct {
		name     string
		dlqLimit int
		bad      kafka.Message
		stub     bool // the dead letter cannot be a full copy
		keyWhole bool // the dead letter's key is the original, byte for byte
	}{
		{name: "2 MiB header", dlqLimit: 1048588, stub: true, keyWhole: true,
			bad: kafka.Message{Key: []byte("bad-header"), Value: []byte(`{oops`),
				Headers: []kafka.Header{{Key: "trace", Value: []byte("t1")}, {Key: "blob", Value: bigHeader}}}},
		{name: "600 KiB key fits the dead-letter topic", dlqLimit: 1048588, keyWhole: true,
			bad: kafka.Message{Key: bigKey, Value: []byte(`{oops`)}},
		{name: "600 KiB key above the dead-letter limit", dlqLimit: 256 << 10, stub: true,
			bad: kafka.Message{Key: bigKey, Value: []byte(`{oops`)}},
	}
	gpath, _ := testGraph(t, 8)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const outLimit = 64 << 10
			brokers := limitedCluster(t, outLimit, tc.dlqLimit)
			produce(t, brokers, "in", tc.bad,
				request("good-after", map[string]any{"algorithm": "deepwalk", "seeds": []int{1, 2, 3}, "length": 5}))
			_, stop := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir())))
			defer stop()

			obs := newObserver(brokers, "out")
			defer obs.Close()
			evs, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["good-after"]) > 0 })
			if err != nil {
				t.Fatalf("the good message after the bad one never completed (events %d): %v", len(evs), err)
			}
			if ev := evs["good-after"][0]; ev.Status != message.StatusSucceeded {
				t.Fatalf("good-after: %+v", ev)
			}
			var rejected []message.Event
			for id, es := range evs {
				if id != "good-after" {
					rejected = append(rejected, es...)
				}
			}
			if len(rejected) != 1 || rejected[0].Status != message.StatusRejected || rejected[0].Reason != string(message.ReasonMalformed) {
				t.Fatalf("want one rejected event, got %+v", rejected)
			}
			id := rejected[0].BatchID
			if len(tc.bad.Key) <= 256 {
				if id != string(tc.bad.Key) {
					t.Errorf("rejected batch id %q, want the key %q", id, tc.bad.Key)
				}
			} else {
				sum := sha256.Sum256(tc.bad.Key)
				if len(id) > 256 || !strings.Contains(id, hex.EncodeToString(sum[:])) || !strings.HasPrefix(id, "kkkk") {
					t.Errorf("rejected batch id (%d bytes) %.300q: want at most 256 bytes naming the key's SHA-256", len(id), id)
				}
			}
			outs := readTopic(t, ctx, brokers, "out")
			for _, m := range outs {
				if recordSize(m) > outLimit {
					t.Errorf("event of %d bytes above the topic's limit", recordSize(m))
				}
			}

			dls := readTopic(t, ctx, brokers, "dlq")
			if len(dls) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dls))
			}
			dl := dls[0]
			if recordSize(dl) > tc.dlqLimit {
				t.Errorf("dead letter of %d bytes above the topic's limit %d", recordSize(dl), tc.dlqLimit)
			}
			hs := map[string]string{}
			for _, h := range dl.Headers {
				if len(h.Value) < 1024 {
					hs[h.Key] = string(h.Value)
				}
			}
			if hs[source.HeaderReason] != string(message.ReasonMalformed) || hs[source.HeaderSourceTopic] != "in" ||
				hs[source.HeaderSourceOffset] != "0" || hs[source.HeaderError] == "" {
				t.Errorf("dead-letter headers %v", hs)
			}
			if tc.keyWhole != bytes.Equal(dl.Key, tc.bad.Key) {
				t.Errorf("dead-letter key (%d bytes) whole: %v, want %v", len(dl.Key), !tc.keyWhole, tc.keyWhole)
			}
			if !tc.stub {
				if string(dl.Value) != string(tc.bad.Value) {
					t.Errorf("dead letter value %q, want the original", dl.Value)
				}
				return
			}
			if _, ok := hs[source.HeaderTruncated]; !ok {
				t.Errorf("stub without %s: %v", source.HeaderTruncated, hs)
			}
			var stub struct {
				Bytes     int      `json:"original_bytes"`
				SHA256    string   `json:"original_sha256"`
				KeyBytes  int      `json:"original_key_bytes"`
				KeySHA256 string   `json:"original_key_sha256"`
				Cut       []string `json:"cut"`
				ValueHead string   `json:"value_head"`
			}
			if err := json.Unmarshal(dl.Value, &stub); err != nil {
				t.Fatalf("stub %.500q: %v", dl.Value, err)
			}
			vs, ks := sha256.Sum256(tc.bad.Value), sha256.Sum256(tc.bad.Key)
			if stub.Bytes != len(tc.bad.Value) || stub.SHA256 != hex.EncodeToString(vs[:]) || stub.KeyBytes != len(tc.bad.Key) ||
				stub.KeySHA256 != hex.EncodeToString(ks[:]) || len(stub.Cut) == 0 || stub.ValueHead != string(tc.bad.Value) {
				t.Errorf("stub %.500s", dl.Value)
			}
			if tc.name == "2 MiB header" && hs["trace"] != "t1" {
				t.Errorf("the small header that fits was not kept: %v", hs)
			}
		})
	}
}
