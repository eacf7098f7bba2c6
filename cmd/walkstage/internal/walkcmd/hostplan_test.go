package walkcmd

import (
	"strings"
	"testing"
)

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
