package stage

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/internal/s3fault"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/source"
)

// A batch whose _SUCCESS key the store keeps refusing creates without
// being readable, whatever the sink's recovery does (issue 32: versitygw
// killed mid-put), is given up after a bounded number of attempts: a
// failed event and a dead letter with reason manifest_unresolvable, and
// the partition moves on. Before, the stage retried it for good and the
// request behind it was never reached.
func TestManifestUnresolvableDeadLettered(t *testing.T) {
	brokers := startKafka(t, 1)
	direct, bucket := startS3(t)
	du, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	q := du.Query()
	proxy, err := s3fault.New(s3fault.Config{Target: q.Get("endpoint"), Seed: 32})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	q.Set("endpoint", srv.URL)
	du.RawQuery = q.Encode()

	graphPath, _ := testGraph(t, 8)
	l, err := output.BatchLayout("walks", output.KindWalks, "rmat", "deepwalk", "stuck")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Phantom("walks", l.SuccessKey(), s3fault.Sticky)
	runStage(t, stageEnviron(brokers, graphPath, du.String(), "WALKSTAGE_STORE_TIMEOUT=300ms",
		"WALKSTAGE_RETRY_BACKOFF_MIN=10ms", "WALKSTAGE_RETRY_BACKOFF_MAX=50ms"))
	msgs := []kafka.Message{
		request("stuck", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": []int{1, 2, 3}}),
		request("after", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": []int{1, 2, 3}}),
	}
	produce(t, brokers, "in", msgs...)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(got map[string][]message.Event) bool { return len(got["stuck"]) > 0 && len(got["after"]) > 0 })
	if err != nil {
		t.Fatalf("events %v: %v", events, err)
	}
	ev := events["stuck"][0]
	if ev.Status != message.StatusFailed || ev.Reason != string(reasonManifestUnresolvable) || ev.Error == "" {
		t.Fatalf("stuck batch: %+v, want failed/%s", ev, reasonManifestUnresolvable)
	}
	if ev := events["after"][0]; ev.Status != message.StatusSucceeded {
		t.Fatalf("the request after it: %+v", ev)
	}
	if proxy.Injected("phantom") == 0 {
		t.Fatal("the phantom was never met")
	}

	dlq := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "dlq-observer", Topic: "dlq", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer dlq.Close()
	m, err := dlq.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	hs := map[string]string{}
	for _, h := range m.Headers {
		hs[h.Key] = string(h.Value)
	}
	if string(m.Key) != "stuck" || string(m.Value) != string(msgs[0].Value) || hs[source.HeaderReason] != string(reasonManifestUnresolvable) {
		t.Fatalf("dead letter %q headers %v", m.Key, hs)
	}
	// The output of the request after it is whole; nothing is listed for
	// the stuck batch's manifest.
	if _, err := sink.Lookup(ctx, bucket, "walks", "after", ""); err != nil && !sink.IsRequestError(err) {
		t.Fatalf("lookup: %v", err)
	}
}
