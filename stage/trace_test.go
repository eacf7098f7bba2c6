package stage

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: what a collector answers at
// /v1/traces, decoding the exported protobuf for the test to look at.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string // service.name of each resource seen
	// countOnly keeps no spans, only their number (n), as a collector
	// in another process holds none in the stage's heap: the benchmarks'
	// receiver.
	countOnly bool
	n         int
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range ex.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			if r.countOnly {
				r.n += len(ss.Spans)
				continue
			}
			r.spans = append(r.spans, ss.Spans...)
		}
		if r.countOnly {
			continue
		}
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.svc = append(r.svc, a.GetValue().GetStringValue())
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// readWithHeaders reads n records of topic from its start.
func readWithHeaders(t *testing.T, ctx context.Context, brokers []string, topic string, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, GroupID: "reader-" + topic,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: %v (have %d of %d)", topic, err, len(out), n)
		}
		out = append(out, m)
	}
	return out
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

// TestTracesFollowARequest: with an OTLP endpoint set, `walkstage run`
// (Main) exports one span tree per request to an in-process OTLP/HTTP
// receiver: a request span, child of the producer's span named by the
// record's traceparent header, with its phases as children; a rejected
// message gets a request span with an error status and its publish and
// dead-letter spans. The completion event and the dead letter carry the
// trace context of the stage's span that published them (same trace id as
// the producer's).
func TestTracesFollowARequest(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	brokers := startKafka(t, 1)
	gpath, _ := testGraph(t, 10)
	env := stageEnviron(brokers, gpath, "file://"+t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_SERVICE_NAME=walkstage-test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, env, io.Discard, "test") }()
	defer func() {
		cancel()
		<-done
	}()

	const (
		goodTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		goodSpan  = "00f067aa0ba902b7"
		badTrace  = "0af7651916cd43dd8448eb211c80319c"
		badSpan   = "b7ad6b7169203331"
	)
	good := requestRaw("traced", `{"version":1,"batch_id":"traced","algorithm":"deepwalk","length":10,"seed_range":{"first":0,"count":200}}`)
	good.Headers = []kafka.Header{{Key: "traceparent", Value: []byte("00-" + goodTrace + "-" + goodSpan + "-01")}}
	bad := requestRaw("traced-bad", `{"version":1,"batch_id":"traced-bad","algorithm":"nope"}`)
	bad.Headers = []kafka.Header{{Key: "traceparent", Value: []byte("00-" + badTrace + "-" + badSpan + "-01")}}
	produce(t, brokers, "in", good, bad)

	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	events := readWithHeaders(t, rctx, brokers, "out", 2)
	dlq := readWithHeaders(t, rctx, brokers, "dlq", 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stage: %v", err)
	}
	done <- nil // for the deferred wait

	recv.mu.Lock()
	defer recv.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	// The request span of each trace, and its children by name.
	tree := func(traceID, producerSpan string) (*tracepb.Span, map[string]*tracepb.Span) {
		var root *tracepb.Span
		kids := map[string]*tracepb.Span{}
		for _, s := range recv.spans {
			if hex.EncodeToString(s.TraceId) != traceID {
				continue
			}
			if s.Name == "walkstage.request" {
				if hex.EncodeToString(s.ParentSpanId) != producerSpan {
					t.Errorf("request span's parent is %x, want the producer's %s", s.ParentSpanId, producerSpan)
				}
				root = s
			}
		}
		if root == nil {
			t.Fatalf("trace %s: no walkstage.request span among %d spans", traceID, len(recv.spans))
		}
		for _, s := range recv.spans {
			if bytes.Equal(s.ParentSpanId, root.SpanId) {
				kids[s.Name] = s
			}
		}
		return root, kids
	}
	root, kids := tree(goodTrace, goodSpan)
	for _, name := range []string{"walkstage.queue", "walkstage.walk", "walkstage.write", "walkstage.commit", "walkstage.publish"} {
		s, ok := kids[name]
		if !ok {
			t.Errorf("request span has no child %s (children: %v)", name, keys(kids))
			continue
		}
		if s.StartTimeUnixNano < root.StartTimeUnixNano || s.EndTimeUnixNano > root.EndTimeUnixNano {
			t.Errorf("%s [%d, %d] lies outside the request span [%d, %d]", name, s.StartTimeUnixNano, s.EndTimeUnixNano,
				root.StartTimeUnixNano, root.EndTimeUnixNano)
		}
	}
	if root.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("a succeeded request's span has an error status: %v", root.Status)
	}
	badRoot, badKids := tree(badTrace, badSpan)
	if badRoot.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the rejection's span status is %v, want an error", badRoot.Status)
	}
	for _, name := range []string{"walkstage.publish", "walkstage.dead_letter"} {
		if _, ok := badKids[name]; !ok {
			t.Errorf("rejection span has no child %s (children: %v)", name, keys(badKids))
		}
	}
	if len(recv.svc) == 0 || recv.svc[0] != "walkstage-test" {
		t.Errorf("service.name %v, want walkstage-test (OTEL_SERVICE_NAME)", recv.svc)
	}

	// The records the stage wrote carry its spans' context.
	check := func(what string, m kafka.Message, traceID string) {
		tp := header(m, "traceparent")
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Errorf("%s: traceparent %q, want trace %s", what, tp, traceID)
			return
		}
		if s, ok := byID[parts[2]]; !ok || !strings.HasPrefix(s.Name, "walkstage.") {
			t.Errorf("%s: traceparent names span %s, not one the stage exported", what, parts[2])
		}
	}
	for _, ev := range events {
		switch string(ev.Key) {
		case "traced":
			check("completion event", ev, goodTrace)
		case "traced-bad":
			check("rejection event", ev, badTrace)
		}
	}
	check("dead letter", dlq[0], badTrace)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
