package stage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/source"
)

// TestStageEndToEnd runs two stage replicas in one consumer group against
// kfake (4 partitions, over TCP) and gofakes3: every valid batch completes
// in effect exactly once (same objects in every event, the manifest matches
// the bucket, nothing redelivered after the replicas stop), and each kind
// of bad request gets its documented rejection and dead letter.
func TestStageEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 4)
	outURL, bucket := startS3(t)
	gpath, g := testGraph(t, 10)
	environ := stageEnviron(brokers, gpath, outURL, "WALKSTAGE_MAX_SEEDS=500", "WALKSTAGE_MAX_MESSAGE_BYTES=65536",
		"WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=10ms")

	rt1, stop1 := runStage(t, environ)
	rt2, stop2 := runStage(t, environ)

	// Valid batches of every algorithm, several per partition.
	algos := []map[string]any{
		{"algorithm": "deepwalk", "length": 20},
		{"algorithm": "deepwalk", "weighted": true, "length": 15, "walks_per_seed": 2},
		{"algorithm": "ppr", "stop_probability": 0.2, "length": 30},
		{"algorithm": "node2vec", "p": 0.5, "q": 2, "length": 10},
		{"algorithm": "metapath", "schema": []int{0, 1, 2}, "length": 12},
	}
	var msgs []kafka.Message
	want := map[string]int{} // batch id -> walks
	for i := range 30 {
		id := fmt.Sprintf("ok-%02d", i)
		body := map[string]any{}
		for k, v := range algos[i%len(algos)] {
			body[k] = v
		}
		n := 50 + 13*i
		body["seed_range"] = map[string]int{"first": i * 7, "count": n}
		msgs = append(msgs, request(id, body))
		wps := 1
		if w, ok := body["walks_per_seed"].(int); ok {
			wps = w
		}
		want[id] = n * wps
	}
	// Each documented rejection.
	nv := g.NumVertices()
	rejects := map[string]message.Reason{
		"bad-json":      message.ReasonMalformed,
		"bad-algo":      message.ReasonInvalidParameters,
		"bad-params":    message.ReasonInvalidParameters,
		"bad-oversized": message.ReasonTooLarge,
		"bad-bytes":     message.ReasonTooLarge,
		"bad-vertices":  message.ReasonUnknownVertices,
		"bad-field":     message.ReasonMalformed,
		// Temporal walks on a graph without edge times, and bad time
		// parameters (issue 38).
		"bad-temporal":   message.ReasonInvalidParameters,
		"bad-time-bias":  message.ReasonInvalidParameters,
		"bad-time-scale": message.ReasonInvalidParameters,
	}
	msgs = append(msgs,
		kafka.Message{Key: []byte("bad-json"), Value: []byte(`{"version":1,"batch_id":"bad-json",`)},
		request("bad-algo", map[string]any{"algorithm": "pagerank", "seeds": []int{1}}),
		request("bad-params", map[string]any{"algorithm": "ppr", "stop_probability": 1.5, "seeds": []int{1}}),
		request("bad-oversized", map[string]any{"algorithm": "deepwalk", "seed_range": map[string]int{"first": 0, "count": 501}}),
		kafka.Message{Key: []byte("bad-bytes"), Value: []byte(`{"version":1,"batch_id":"bad-bytes"` + strings.Repeat(" ", 70000) + `}`)},
		request("bad-vertices", map[string]any{"algorithm": "deepwalk", "seeds": []int{1, nv + 5, -3}}),
		request("bad-field", map[string]any{"algorithm": "deepwalk", "seeds": []int{1}, "walk_length": 5}),
		request("bad-temporal", map[string]any{"algorithm": "temporal", "with_times": true, "seeds": []int{1}}),
		request("bad-time-bias", map[string]any{"algorithm": "temporal", "time_bias": "quadratic", "seeds": []int{1}}),
		request("bad-time-scale", map[string]any{"algorithm": "temporal", "time_bias": "exponential", "time_scale": -1, "seeds": []int{1}}),
	)
	produce(t, brokers, "in", msgs...)

	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == len(want)+len(rejects) })
	if err != nil {
		var missing []string
		for id := range want {
			if events[id] == nil {
				missing = append(missing, id)
			}
		}
		for id := range rejects {
			if events[id] == nil {
				missing = append(missing, id)
			}
		}
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("waiting for events (%d of %d, missing %v): %v", len(events), len(want)+len(rejects), missing, err)
	}

	for id, walks := range want {
		evs := events[id]
		first := evs[0]
		if first.Status != message.StatusSucceeded {
			t.Errorf("%s: %s %s", id, first.Status, first.Error)
			continue
		}
		for _, ev := range evs[1:] { // redeliveries after a rebalance report the same objects
			if !slices.Equal(ev.Objects, first.Objects) || ev.Manifest != first.Manifest {
				t.Errorf("%s: events disagree: %v vs %v", id, ev.Objects, first.Objects)
			}
		}
		if first.Walks != int64(walks) || first.Steps <= 0 || first.Engine != "cpu" || first.Graph != "rmat" ||
			first.GraphVersion != g.Version || len(first.Objects) == 0 || !strings.HasSuffix(first.Manifest, "/_SUCCESS") {
			t.Errorf("%s: event %+v", id, first)
		}
		// The bucket holds exactly the manifest's parts and the manifest.
		key := strings.TrimPrefix(first.Manifest, "s3://walks/")
		man, err := output.ReadManifest(ctx, bucket, key)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if man.Walks != int64(walks) || man.Steps != first.Steps {
			t.Errorf("%s: manifest walks %d steps %d, event %d %d", id, man.Walks, man.Steps, first.Walks, first.Steps)
		}
		dir := strings.TrimSuffix(key, "_SUCCESS")
		wantKeys := []string{key}
		for _, f := range man.Files {
			wantKeys = append(wantKeys, f.Key)
		}
		slices.Sort(wantKeys)
		if got := listKeys(t, bucket, dir); !slices.Equal(got, wantKeys) {
			t.Errorf("%s: bucket has %v, manifest names %v", id, got, wantKeys)
		}
	}
	for id, reason := range rejects {
		evs := events[id]
		if len(evs) == 0 || evs[0].Status != message.StatusRejected || evs[0].Reason != string(reason) || evs[0].Error == "" {
			t.Errorf("%s: want rejected/%s, got %+v", id, reason, evs)
		}
	}
	// Dead letters: the original message, unchanged, with the error header.
	byKey := map[string]kafka.Message{}
	for _, m := range msgs {
		byKey[string(m.Key)] = m
	}
	dlq := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "dlq-observer", Topic: "dlq", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer dlq.Close()
	seen := map[string]bool{}
	for len(seen) < len(rejects) {
		m, err := dlq.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("dead letters (%d of %d): %v", len(seen), len(rejects), err)
		}
		orig, ok := byKey[string(m.Key)]
		if !ok || string(m.Value) != string(orig.Value) {
			t.Errorf("dead letter %q does not match the original message", m.Key)
		}
		hs := map[string]string{}
		for _, h := range m.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs[source.HeaderError] == "" || hs[source.HeaderReason] != string(rejects[string(m.Key)]) {
			t.Errorf("dead letter %q headers %v", m.Key, hs)
		}
		seen[string(m.Key)] = true
	}

	// Health and metrics of a running replica.
	addr, _ := rt1.Listen()
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": `walkstage_batches_total{status="rejected"}`} {
		var code int
		var body []byte
		for range 20 { // readiness follows the reader's statistics, sampled periodically
			resp, err := http.Get("http://" + addr.String() + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if code = resp.StatusCode; code == 200 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	_ = rt2
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}

	// Every offset was committed: a new member of the group gets nothing.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "stage", Topic: "in", MaxWait: 100 * time.Millisecond,
		SessionTimeout: 6 * time.Second})
	defer r.Close()
	rctx, rcancel := context.WithTimeout(ctx, 8*time.Second)
	defer rcancel()
	if m, err := r.FetchMessage(rctx); err == nil {
		t.Errorf("message %q at %d/%d was never committed", m.Key, m.Partition, m.Offset)
	}
}
