package stage

import (
	"net"
	"testing"

	"github.com/walkstage/walkstage/stage/config"
)

// TestMetricsAddrDefaultsToLoopback: a stage started on a host without
// WALKSTAGE_METRICS_ADDR answers /metrics, /healthz and /readyz on
// loopback only; the images and the chart set :9090 themselves (deploy/
// checks both).
func TestMetricsAddrDefaultsToLoopback(t *testing.T) {
	c, err := config.Load([]string{"WALKSTAGE_BROKERS=kafka:9092", "WALKSTAGE_GRAPH=g.wsg", "WALKSTAGE_OUTPUT_URL=file:///tmp/w"})
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(c.MetricsAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || port != "9090" {
		t.Fatalf("default WALKSTAGE_METRICS_ADDR %q: want a loopback address, port 9090", c.MetricsAddr)
	}
}
