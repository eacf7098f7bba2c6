package tracing

import (
	"context"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		enabled bool
		url     string
		err     string
	}{
		{name: "nothing set: off"},
		{name: "base endpoint", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318/"}, enabled: true, url: "http://collector:4318/v1/traces"},
		{name: "traces endpoint wins", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://b/otlp/traces"},
			enabled: true, url: "https://b/otlp/traces"},
		{name: "disabled", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_SDK_DISABLED=true"}},
		{name: "exporter none", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_TRACES_EXPORTER=none"}},
		{name: "other exporter", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_TRACES_EXPORTER=zipkin"}, err: "OTLP only"},
		{name: "grpc", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, err: "http/protobuf only"},
		{name: "not a URL", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318"}, err: "not an http(s) URL"},
		{name: "ratio sampler", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.25"},
			enabled: true, url: "http://a:4318/v1/traces"},
		{name: "bad ratio", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=2"}, err: "not a ratio"},
		{name: "unknown sampler", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_TRACES_SAMPLER=sometimes"}, err: "is not one of"},
		{name: "bad headers", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_EXPORTER_OTLP_HEADERS=novalue"}, err: "not key=value"},
		{name: "headers and resource", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:4318", "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20x",
			"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod"}, enabled: true, url: "http://a:4318/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := FromEnv(context.Background(), tc.env, "test")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled != tc.enabled || p.Endpoint != tc.url {
				t.Errorf("enabled %v endpoint %q, want %v %q", p.Enabled, p.Endpoint, tc.enabled, tc.url)
			}
		})
	}
}
