package stage

// Tracing: one span per request, from its fetch to its acknowledgement,
// child of the producer's span when the record carries W3C trace context;
// its phases (queue, walk, write, commit, publish) as children. The phases
// of a micro-batch overlap (the writer encodes and uploads while the
// engine walks), so they are recorded with the times the stage measures
// anyway, once known, rather than wrapped around code that serves several
// requests at once. The completion event and the dead letter carry the
// context of the span that published them.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
)

// TracerName names the stage's tracer (its instrumentation scope).
const TracerName = "github.com/walkstage/walkstage/stage"

// startRequest starts the span of a delivery at the time it was fetched.
// Without tracing (a no-op tracer) the span is the producer's span
// context itself, so events and dead letters still carry the producer's
// trace.
func (s *Stage) startRequest(d *source.Delivery, batchID string) trace.Span {
	parent := propagation.TraceContext{}.Extract(context.Background(), d.Trace)
	_, sp := s.tracer.Start(parent, "walkstage.request", trace.WithTimestamp(d.Received),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("walkstage.batch_id", batchID)))
	return sp
}

// phase records a finished phase of a request as a child of its span.
func (s *Stage) phase(parent trace.Span, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if !parent.IsRecording() || start.IsZero() || end.Before(start) {
		return
	}
	_, sp := s.tracer.Start(trace.ContextWithSpan(context.Background(), parent), name,
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	sp.End(trace.WithTimestamp(end))
}

// publishSpan starts the span of publishing a request's completion event
// or dead letter; ctx carries it into the record's headers.
func (s *Stage) publishSpan(ctx context.Context, parent trace.Span, name string) (context.Context, trace.Span) {
	return s.tracer.Start(trace.ContextWithSpan(ctx, parent), name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "send")))
}

// endRequest ends a request's span with its outcome.
func endRequest(sp trace.Span, status message.Status, reason string) {
	sp.SetAttributes(attribute.String("walkstage.status", string(status)))
	if status != message.StatusSucceeded {
		sp.SetAttributes(attribute.String("walkstage.reason", reason))
		sp.SetStatus(codes.Error, reason)
	}
	sp.End()
}
