package source

// W3C trace context through the topics: a request's traceparent and
// tracestate headers come out with its delivery, and the stage's context
// goes into its completion event and dead letter, so a request can be
// followed from its producer to its outputs (issue 39). The stage's spans
// are the stage's business; here only the headers are read and written.

import (
	"context"
	"strings"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"
)

// traceKeys are the W3C trace context headers, in their canonical (lower)
// case.
var traceKeys = [...]string{"traceparent", "tracestate"}

// maxTraceValue bounds a trace header taken from a record: a traceparent
// is 55 bytes and a tracestate at most 32 members of 256; anything longer
// is not trace context and is ignored.
const maxTraceValue = 8 << 10

// traceOf returns the record's trace context headers (nil when it has
// none), keyed in lower case as propagation.MapCarrier expects.
func traceOf(hs []kafka.Header) propagation.MapCarrier {
	var out propagation.MapCarrier
	for _, h := range hs {
		for _, k := range traceKeys {
			if strings.EqualFold(h.Key, k) && len(h.Value) <= maxTraceValue {
				if out == nil {
					out = propagation.MapCarrier{}
				}
				out[k] = string(h.Value)
			}
		}
	}
	return out
}

// withTrace returns hs with the trace context of ctx (its span, or the
// remote parent it carries) in place of any trace headers hs has; hs as it
// is when ctx carries none.
func withTrace(ctx context.Context, hs []kafka.Header) []kafka.Header {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return hs
	}
	out := make([]kafka.Header, 0, len(hs)+len(c))
	for _, h := range hs {
		if !isTraceKey(h.Key) {
			out = append(out, h)
		}
	}
	for _, k := range traceKeys {
		if v, ok := c[k]; ok {
			out = append(out, kafka.Header{Key: k, Value: []byte(v)})
		}
	}
	return out
}

func isTraceKey(k string) bool {
	for _, t := range traceKeys {
		if strings.EqualFold(k, t) {
			return true
		}
	}
	return false
}
