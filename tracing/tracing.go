// Package tracing sets up OpenTelemetry tracing for walkstage from the
// standard OTEL_* variables: spans are exported over OTLP/HTTP (protobuf)
// when an OTLP endpoint is set, and not made at all otherwise. The stage
// (stage/trace.go) makes the spans; this package only builds the provider.
//
// Read from the environment given (walkstage run's, so that tests and
// embedders can pass their own): OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER
// (otlp or none), OTEL_EXPORTER_OTLP_ENDPOINT (the collector's base URL,
// /v1/traces appended) or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full
// URL), OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL
// (http/protobuf only), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. TLS certificates,
// compression and timeouts the exporter reads from the process environment
// itself (OTEL_EXPORTER_OTLP_CERTIFICATE, ..._COMPRESSION, ..._TIMEOUT),
// as do the batch processor's OTEL_BSP_* settings.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider is the tracer provider and its shutdown, which flushes the
// spans not yet exported.
type Provider struct {
	trace.TracerProvider
	// Enabled says whether spans are exported.
	Enabled bool
	// Endpoint is where they go (empty when not enabled).
	Endpoint string
	shutdown func(context.Context) error
}

// Shutdown exports what is buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	if err := p.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shut down: %w", err)
	}
	return nil
}

// FromEnv builds the provider that environ (KEY=value entries) asks for:
// a no-op one unless an OTLP endpoint is set and tracing is not disabled.
// version is the service.version resource attribute.
func FromEnv(ctx context.Context, environ []string, version string) (*Provider, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "OTEL_") {
			env[k] = v
		}
	}
	get := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(env[k]); v != "" {
				return v
			}
		}
		return ""
	}
	off := &Provider{TracerProvider: noop.NewTracerProvider()}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return off, nil
	}
	switch exp := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return off, nil
	case "", "otlp":
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: walkstage exports spans over OTLP only (otlp or none)", exp)
	}
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		base := get("OTEL_EXPORTER_OTLP_ENDPOINT")
		if base == "" {
			return off, nil
		}
		endpoint = strings.TrimRight(base, "/") + "/v1/traces"
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: OTLP endpoint %q is not an http(s) URL", endpoint)
	}
	if p := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("tracing: OTLP protocol %q: walkstage exports http/protobuf only", p)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if h := get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); h != "" {
		headers, err := pairs(h)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP headers: %w", err)
		}
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	sampler, err := samplerOf(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "walkstage"), attribute.String("service.version", version)}
	if ra := get("OTEL_RESOURCE_ATTRIBUTES"); ra != "" {
		m, err := pairs(ra)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		for k, v := range m {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	if n := get("OTEL_SERVICE_NAME"); n != "" {
		attrs = append(attrs, attribute.String("service.name", n)) // the last of a key wins
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(dedupe(attrs)...)))
	return &Provider{TracerProvider: tp, Enabled: true, Endpoint: endpoint, shutdown: tp.Shutdown}, nil
}

// pairs parses the W3C baggage-like "k1=v1,k2=v2" lists of the OTEL_*
// variables (values URL-encoded).
func pairs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		dv, err := url.QueryUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out[strings.TrimSpace(k)] = dv
	}
	return out, nil
}

// samplerOf is the sampler OTEL_TRACES_SAMPLER names (the specification's
// values; the default follows the producer's decision and samples roots).
func samplerOf(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q is not a ratio in [0, 1]", arg)
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(strings.ToLower(name), "parentbased") {
			return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

// dedupe keeps the last value of each key.
func dedupe(attrs []attribute.KeyValue) []attribute.KeyValue {
	last := map[attribute.Key]int{}
	for i, a := range attrs {
		last[a.Key] = i
	}
	var out []attribute.KeyValue
	for i, a := range attrs {
		if last[a.Key] == i {
			out = append(out, a)
		}
	}
	return out
}
