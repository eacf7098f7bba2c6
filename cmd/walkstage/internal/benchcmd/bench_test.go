package benchcmd

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestBenchPrintsEveryAlgorithm runs the bench on a tiny generated graph:
// one row per requested algorithm, each with walks and a positive step count.
func TestBenchPrintsEveryAlgorithm(t *testing.T) {
	var out, errOut bytes.Buffer
	algos := []string{"deepwalk", "deepwalk-weighted", "deepwalk-zprs", "node2vec", "metapath", "metapath-zprs", "ppr"}
	code := walkstage(context.Background(), []string{"bench", "--scale", "8", "--length", "10",
		"--algorithms", strings.Join(algos, ",")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 12 {
			rows[f[0]] = f
		}
	}
	for _, a := range algos {
		f, ok := rows[a]
		if !ok {
			t.Fatalf("no row for %s in:\n%s", a, out.String())
		}
		walks, _ := strconv.Atoi(f[2])
		steps, _ := strconv.Atoi(f[3])
		if walks != 256 || steps <= 0 || steps > walks*10 {
			t.Errorf("%s: %d walks, %d steps (want 256 walks, 1..2560 steps)", a, walks, steps)
		}
	}
	if !strings.Contains(rows["metapath"][1], "label") || rows["metapath-zprs"][1] != "zprs" {
		t.Errorf("metapath samplers: %q and %q", rows["metapath"][1], rows["metapath-zprs"][1])
	}
	if code := walkstage(context.Background(), []string{"bench", "--scale", "4", "--algorithms", "nope"}, &out, &errOut); code == 0 {
		t.Error("an unknown algorithm must fail")
	}
}

func TestBenchVisits(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := walkstage(context.Background(), []string{"bench", "--scale", "8", "--algorithms", "visits", "--visits-queries", "20",
		"--visits-steps", "2000", "--visits-top-k", "5"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "visits: 20 queries") || !strings.Contains(out.String(), "queries/s") {
		t.Errorf("output:\n%s", out.String())
	}
}
