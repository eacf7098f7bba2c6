package benchcmd

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
)

// The sampling cases run in waves of about --sample-wave-edges edges (as
// the stage samples, so that memory does not grow with the case) and draw
// the edges one call draws; the row says how many waves ran.
func TestBenchSamplesInWaves(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 3, Undirected: true, Name: "rmat10"})
	if err != nil {
		t.Fatal(err)
	}
	waves := regexp.MustCompile(`\((\d+) waves\)`)
	for _, p := range []graphsample.SampleParams{
		{Kind: graphsample.Snowball, Depth: 2, MaxVertices: 100},
		{Kind: graphsample.NeighborSampling, Fanouts: []int{5, 3}},
	} {
		var edges []int64
		for _, budget := range []int64{0, 2000} {
			var out bytes.Buffer
			row, err := benchSample(ctx, nil, p.Kind.String(), p, g, sampleBench{seeds: 500, waveEdges: budget}, 1, 1, &out)
			if err != nil {
				t.Fatal(err)
			}
			m := waves.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("%s: no wave count in %q", p.Kind, out.String())
			}
			n, _ := strconv.Atoi(m[1])
			if (budget == 0) != (n == 1) || row.Instances != 500 {
				t.Errorf("%s, budget %d: %d waves, %d instances", p.Kind, budget, n, row.Instances)
			}
			edges = append(edges, row.Edges)
		}
		if edges[0] != edges[1] || edges[0] == 0 {
			t.Errorf("%s: %d edges in one call, %d in waves", p.Kind, edges[0], edges[1])
		}
	}
}
