package main

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
	if rc := Main(context.Background(), []string{"graph", "generate", "--scale", "12", "--edge-factor", "8", "--weighted", "--out", path}, &out, &errOut); rc != 0 {
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
		if rc := Main(context.Background(), []string{"graph", "info", "--host-memory", c.mem, path}, &out, &errOut); rc != 0 {
			t.Fatalf("graph info: rc %d: %s", rc, errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--host-memory %s: graph info lacks %q:\n%s", c.mem, w, out.String())
			}
		}
	}
}

// walkstage walk under a host memory budget below the graph walks it out
// of core and writes the very bytes the in-memory run writes.
func TestWalkCommandOutOfCoreWritesTheSameWalks(t *testing.T) {
	gp := walkTestGraph(t)
	for _, args := range [][]string{
		{"--weighted", "--walks-per-seed", "3", "--length", "20"},
		{"--algorithm", "ppr", "--stop-probability", "0.2", "--walks-per-seed", "3"},
	} {
		var digests []string
		for _, mem := range []string{"8000", "-1"} {
			dir := t.TempDir()
			out, err := runWalk(t, append([]string{"--graph", gp, "--out", "file://" + dir, "--batch-id", "b", "--engine", "cpu", "--host-memory", mem}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if ooc := strings.Contains(out, "walked out of core"); ooc != (mem != "-1") {
				t.Fatalf("--host-memory %s: out of core %v:\n%s", mem, ooc, out)
			}
			digests = append(digests, dirDigest(t, dir))
		}
		if digests[0] != digests[1] {
			t.Fatalf("%v: the out-of-core run wrote other bytes than the in-memory run", args)
		}
	}
}
