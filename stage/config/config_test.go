package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigDefaults(t *testing.T) {
	c, err := Load([]string{"WALKSTAGE_BROKERS=a:9092,b:9092", "WALKSTAGE_GRAPH=/g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers) != 2 || c.InputTopic != "walkstage-requests" || c.MicroBatchMaxWait != 5*time.Millisecond ||
		c.Engine != "auto" || c.UnknownVertices != "reject" || c.CPUFusedTableBytes != -1 || c.CPULabelTables != "lazy" ||
		c.OutputWalkEncoding != "delta_binary_packed" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestLoadConfigReportsEveryBadVariable(t *testing.T) {
	_, err := Load([]string{
		"WALKSTAGE_ENGINE=tpu",
		"WALKSTAGE_MAX_SEEDS=notanumber",
		"WALKSTAGE_QUEUE_DEPTH=0",
		"WALKSTAGE_SASL_MECHANISM=scram-sha-256",
		"WALKSTAGE_UNKNOWN_VERTICES=ignore",
		"WALKSTAGE_LOG_LEVEL=loud",
		"WALKSTAGE_SHUTDOWN_TIMEOUT=soon",
		"WALKSTAGE_CPU_FUSED_TABLE_BYTES=-2",
		"WALKSTAGE_CPU_LABEL_TABLES=sometimes",
		"WALKSTAGE_GPU_BATCH_SLOTS=9",
		"WALKSTAGE_OUTPUT_WALK_ENCODING=plain",
	})
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want *Error, got %v", err)
	}
	msg := err.Error()
	for _, name := range []string{"BROKERS", "GRAPH", "OUTPUT_URL", "ENGINE", "MAX_SEEDS", "QUEUE_DEPTH",
		"SASL_USERNAME", "SASL_PASSWORD", "UNKNOWN_VERTICES", "LOG_LEVEL", "SHUTDOWN_TIMEOUT",
		"CPU_FUSED_TABLE_BYTES", "CPU_LABEL_TABLES", "GPU_BATCH_SLOTS", "OUTPUT_WALK_ENCODING"} {
		if !strings.Contains(msg, "WALKSTAGE_"+name) {
			t.Errorf("error does not name WALKSTAGE_%s:\n%s", name, msg)
		}
	}
}

// TestEmptyMetricsAddrDisablesTheServer: the documented way to run without
// the HTTP server. env fills a variable set to "" with its default, so this
// once listened on :9090 anyway, and two such stages at once collided.
func TestEmptyMetricsAddrDisablesTheServer(t *testing.T) {
	c, err := Load([]string{"WALKSTAGE_BROKERS=kafka:9092", "WALKSTAGE_GRAPH=g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/w",
		"WALKSTAGE_METRICS_ADDR="})
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddr != "" {
		t.Fatalf("METRICS_ADDR= gave %q", c.MetricsAddr)
	}
	c, err = Load([]string{"WALKSTAGE_BROKERS=kafka:9092", "WALKSTAGE_GRAPH=g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/w"})
	if err != nil || c.MetricsAddr != "127.0.0.1:9090" {
		t.Fatalf("unset METRICS_ADDR gave %q, %v", c.MetricsAddr, err)
	}
}

// A partition mode engines.ParsePartition does not know is a bad
// configuration, named by its variable.
func TestLoadConfigRejectsUnknownPartition(t *testing.T) {
	if _, err := Load([]string{"WALKSTAGE_BROKERS=kafka:9092", "WALKSTAGE_GRAPH=g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/w",
		"WALKSTAGE_GPU_PARTITION=maybe"}); err == nil || !strings.Contains(err.Error(), "GPU_PARTITION") {
		t.Fatalf("WALKSTAGE_GPU_PARTITION=maybe: %v", err)
	}
}

func TestGraphFollowSettingsValidated(t *testing.T) {
	base := []string{"WALKSTAGE_BROKERS=k:9092", "WALKSTAGE_GRAPH=s3://g/social/CURRENT", "WALKSTAGE_OUTPUT_URL=file:///tmp/w"}
	for env, want := range map[string]string{
		"WALKSTAGE_GRAPH_SWAP=sideways":       "GRAPH_SWAP",
		"WALKSTAGE_GRAPH_POLL_INTERVAL=1ms":   "GRAPH_POLL_INTERVAL",
		"WALKSTAGE_GRAPH_VERSION_WAIT=-1s":    "GRAPH_VERSION_WAIT",
		"WALKSTAGE_GRAPH_POLL_INTERVAL=0":     "",
		"WALKSTAGE_GRAPH_SWAP=drain":          "",
		"WALKSTAGE_GRAPH_VERSION_WAIT=0":      "",
		"WALKSTAGE_GRAPH_POLL_INTERVAL=100ms": "",
		"WALKSTAGE_GRAPH_VERSION_WAIT=1h":     "",
		"WALKSTAGE_GRAPH_SWAP=overlap":        "",
		"WALKSTAGE_GRAPH_POLL_INTERVAL=-5s":   "GRAPH_POLL_INTERVAL",
	} {
		_, err := Load(append(base, env))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v", env, err)
		}
	}
}

// The live graph's settings are checked, and the combinations it cannot
// serve yet (following a catalog pointer) refused by name; the gpu engine
// serves it (an engine that cannot, the out-of-core one or a GPU engine
// without the whole graph on its device, is refused when it is built).
func TestEdgeSettingsValidated(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // "" = valid
	}{
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges"}, ""},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_ENGINE=cpu", "WALKSTAGE_EDGE_PUBLISH_INTERVAL=10ms", "WALKSTAGE_EDGE_OFFSETS_WAIT=0"}, ""},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_ENGINE=gpu"}, ""},    // the gpu engine walks the snapshots too
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_ENGINE=hybrid"}, ""}, // both engines walk the snapshots
		{[]string{"WALKSTAGE_ENGINE=gpu"}, ""},                                  // off: nothing to refuse
		{[]string{"WALKSTAGE_ENGINE=hybrid"}, ""},
		{[]string{"WALKSTAGE_ENGINE=both"}, `ENGINE: "both" is not auto, cpu, gpu or hybrid`},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_GRAPH=s3://g/social/CURRENT"}, "does not follow new graph versions yet"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_GRAPH=s3://g/social/CURRENT", "WALKSTAGE_GRAPH_POLL_INTERVAL=0"}, ""},
		{[]string{"WALKSTAGE_EDGE_TOPIC=walkstage-requests"}, "EDGE_TOPIC"},
		{[]string{"WALKSTAGE_EDGE_PUBLISH_INTERVAL=0"}, "EDGE_PUBLISH_INTERVAL"},
		{[]string{"WALKSTAGE_EDGE_OFFSETS_WAIT=-1s"}, "EDGE_OFFSETS_WAIT"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_COMPACT_RATIO=0", "WALKSTAGE_EDGE_COMPACT_MIN=1", "WALKSTAGE_EDGE_CATALOG=s3://g/social-live?region=x"}, ""},
		{[]string{"WALKSTAGE_EDGE_COMPACT_RATIO=-0.1"}, "EDGE_COMPACT_RATIO"},
		{[]string{"WALKSTAGE_EDGE_COMPACT_RATIO=NaN"}, "EDGE_COMPACT_RATIO"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_APPLY_SHARE=1"}, ""},
		{[]string{"WALKSTAGE_EDGE_APPLY_SHARE=0"}, "EDGE_APPLY_SHARE"},
		{[]string{"WALKSTAGE_EDGE_APPLY_SHARE=1.5"}, "EDGE_APPLY_SHARE"},
		{[]string{"WALKSTAGE_EDGE_APPLY_SHARE=NaN"}, "EDGE_APPLY_SHARE"},
		{[]string{"WALKSTAGE_EDGE_SNAPSHOT_HOLD=-1s"}, "EDGE_SNAPSHOT_HOLD"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_SNAPSHOT_HOLD=0"}, ""},
		{[]string{"WALKSTAGE_EDGE_COMPACT_MIN=0"}, "EDGE_COMPACT_MIN"},
		{[]string{"WALKSTAGE_EDGE_CATALOG=s3://g/live"}, "EDGE_TOPIC is not"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_CATALOG=live"}, "not a catalog URL"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=48h"}, ""},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW="}, ""}, // empty: off
		{[]string{"WALKSTAGE_EDGE_WINDOW=48h"}, "EDGE_WINDOW: 48h0m0s is set without EDGE_TOPIC"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=0"}, `EDGE_WINDOW: "0" is no window`},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=0s"}, `EDGE_WINDOW: "0s" is no window`},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=-1h"}, "EDGE_WINDOW: -1h0m0s is negative"},
		{[]string{"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=10us"}, "EDGE_WINDOW: 10µs: use at least 1ms"},
	} {
		env := append([]string{"WALKSTAGE_BROKERS=k:9092", "WALKSTAGE_GRAPH=g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/w"}, tc.env...)
		_, err := Load(env)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v", tc.env, err)
		}
	}
}
