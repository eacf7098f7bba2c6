package source

import (
	"context"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A record's trace headers come out of any case, oversized ones are not
// trace context, and a record written with a context carrying a span gets
// that span's traceparent instead of the producer's (other headers kept);
// without one, the headers stay as they are.
func TestTraceHeaders(t *testing.T) {
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hs := []kafka.Header{{Key: "TraceParent", Value: []byte(producer)}, {Key: "tracestate", Value: []byte(strings.Repeat("x", maxTraceValue+1))},
		{Key: "app", Value: []byte("1")}}
	got := traceOf(hs)
	if got["traceparent"] != producer || len(got) != 1 {
		t.Fatalf("traceOf = %v", got)
	}
	if traceOf([]kafka.Header{{Key: "app"}}) != nil {
		t.Error("a record without trace headers has trace context")
	}
	if out := withTrace(context.Background(), hs); len(out) != len(hs) {
		t.Errorf("no span in ctx: headers %v changed", out)
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), got)
	sc := trace.SpanContextFromContext(ctx)
	child := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled})
	out := withTrace(trace.ContextWithSpanContext(context.Background(), child), hs)
	var tp []string
	app := false
	for _, h := range out {
		if strings.EqualFold(h.Key, "traceparent") {
			tp = append(tp, string(h.Value))
		}
		app = app || h.Key == "app"
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
	if len(tp) != 1 || tp[0] != want || !app {
		t.Errorf("headers %v: want one traceparent %s and the app header", out, want)
	}
}
