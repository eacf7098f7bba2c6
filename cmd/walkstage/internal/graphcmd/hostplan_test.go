package graphcmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// graph info --host-memory prints the out-of-core plan, that the graph
// fits, or why no plan holds its largest vertex.
func TestGraphInfoHostPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.wsg")
	var out, errOut bytes.Buffer
	if rc := walkstage(context.Background(), []string{"graph", "generate", "--scale", "12", "--edge-factor", "8", "--weighted", "--out", path}, &out, &errOut); rc != 0 {
		t.Fatalf("graph generate: rc %d: %s", rc, errOut.String())
	}
	for _, c := range []struct {
		mem  string
		want []string
	}{
		{"1000000000", []string{"host plan:", "in memory"}},
		{"200000", []string{"host plan:", "out of core", "partitions of at most", "part 0:", "vertices [0, "}},
		{"20000", []string{"host plan:", "does not fit one partition", "WALKSTAGE_HOST_MEMORY_LIMIT"}},
	} {
		out.Reset()
		if rc := walkstage(context.Background(), []string{"graph", "info", "--host-memory", c.mem, path}, &out, &errOut); rc != 0 {
			t.Fatalf("graph info: rc %d: %s", rc, errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--host-memory %s: graph info lacks %q:\n%s", c.mem, w, out.String())
			}
		}
	}
}
