package livegraph

import (
	"context"
	"fmt"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// labelledLive is a weighted, labelled base (labels 0..2, or 0..16 with
// many, which leaves the graph without label tables) with a delta whose
// inserts carry labels: parallel edges to one target under two labels,
// inserts under a label the vertex's base lacks, deletes and re-inserts
// under another label, a label's base segment wholly deleted (a dead end
// for that label only), added vertices, and a hub whose edges are nearly
// all deleted.
func labelledLive(t testing.TB, many bool) (*Live, *Snapshot) {
	t.Helper()
	e := func(s, d int64, w float32, l uint8) graph.Edge {
		return graph.Edge{Src: s, Dst: d, Weight: w, Label: l}
	}
	var edges []graph.Edge
	for i := int64(1); i <= 10; i++ {
		edges = append(edges, e(0, i, float32(i), uint8(i%3)), e(i, 0, float32(11-i), uint8(i%2)))
		edges = append(edges, e(i, i%10+1, float32(1+i%3), uint8((i+1)%3)))
	}
	// Vertex 0 reaches 4 under labels 1 and 2 (a parallel edge).
	edges = append(edges, e(0, 4, 7, 2))
	const hub = 11
	for i := int64(12); i < 72; i++ {
		edges = append(edges, e(hub, i, 1+float32(i%5), uint8(i%3)), e(i, hub, 1, uint8(i%3)))
	}
	if many {
		edges = append(edges, e(hub, 0, 1, 16))
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live-labels", Weighted: true, Labelled: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	ins := func(s, d int64, w float32, lb uint8) Update {
		return Update{Op: Insert, Src: s, Dst: d, Weight: w, Label: lb, Has: HasWeight | HasLabel}
	}
	del := func(s, d int64) Update { return Update{Op: Delete, Src: s, Dst: d} }
	recs := [][]Update{
		// 0 gains 3 under label 1 (its base 0->3 is label 0), 5 under 0,
		// and added vertex 72; 72 has edges under every label.
		{ins(0, 3, 20, 1), ins(0, 5, 0.5, 0), ins(0, 72, 4, 2), ins(72, 73, 1, 0), ins(72, 0, 2, 1), ins(72, 72, 3, 1), ins(72, 1, 5, 2)},
		// 0->2 (label 2) and 0->3 deleted, 0->3 back under label 2 and
		// 0->2 under label 0; 1 loses every base edge and gains one.
		{del(0, 2), del(0, 3), ins(0, 3, 6, 2), ins(0, 2, 1, 0), del(1, 0), del(1, 2), ins(1, 5, 2, 1)},
		// 2->7 twice, deleted, then once more under label 1; 4 reaches
		// added vertex 74, whose only edge is label 0.
		{ins(2, 7, 9, 0), ins(2, 7, 1, 2), del(2, 7), ins(2, 7, 3, 1), ins(4, 74, 1, 2), ins(74, 4, 1, 0)},
		// 6's base edges are 6->0 (label 0) and 6->7 (label 1): deleting
		// 6->7 leaves label 1 a dead end at 6; 73 is an added dead end.
		{del(6, 7), ins(6, 8, 2, 0)},
	}
	var hubDel []Update
	for i := int64(12); i < 70; i++ {
		hubDel = append(hubDel, del(hub, i))
	}
	recs = append(recs, hubDel, []Update{ins(hub, 0, 1, 1), ins(hub, 3, 2, 0)})
	for i, r := range recs {
		if err := l.Apply(0, int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
	return l, l.Publish()
}

// TestOverlayMetaPathMatchesRebuiltGraph checks MetaPath's steps on
// base+delta, vertex by vertex, against the rebuilt graph's: step i may
// only take live edges labelled Schema[i % len], appended ones by the label
// their insert carried, in proportion to their weights (or uniformly), and
// ends where no such edge is left. Each schema of two labels checks the
// first steps against its first label and the second steps against its
// second, with label tables and without (17 labels).
func TestOverlayMetaPathMatchesRebuiltGraph(t *testing.T) {
	for _, many := range []bool{false, true} {
		_, snap := labelledLive(t, many)
		rebuilt, err := Compact(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		if rebuilt.IDs != nil || rebuilt.NumVertices() != snap.NumVertices() || rebuilt.Labels == nil {
			t.Fatal("the test wants the rebuilt graph labelled and numbered as the snapshot")
		}
		for _, weighted := range []bool{false, true} {
			for _, schema := range [][]uint8{{0, 1}, {1, 2}, {2, 0}} {
				alg := walk.Algorithm{Kind: walk.MetaPath, Length: 2, Weighted: weighted, Schema: schema}
				t.Run(fmt.Sprintf("tables=%v/weighted=%v/schema=%v", !many, weighted, schema), func(t *testing.T) {
					if got := walk.UsesLabelTables(alg, snap.Base()); got == many {
						t.Fatalf("UsesLabelTables = %v", got)
					}
					metaPathStepsMatch(t, snap, rebuilt, alg)
				})
			}
		}
	}
}

// metaPathStepsMatch walks alg (two steps) from every vertex of snap and
// compares each vertex's first steps, and the second steps from each
// vertex reached often enough, with rebuilt's probabilities.
func metaPathStepsMatch(t *testing.T, snap *Snapshot, rebuilt *graph.Graph, alg walk.Algorithm) {
	e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	var starts []uint32
	for v := range snap.NumVertices() {
		n := 6000
		if v >= 12 && v < 72 {
			n = 300 // the hub's leaves: they all step to the hub
		}
		for range n {
			starts = append(starts, uint32(v))
		}
	}
	first := make([]map[uint32]int, snap.NumVertices())
	second := make([]map[uint32]int, snap.NumVertices())
	for v := range first {
		first[v], second[v] = map[uint32]int{}, map[uint32]int{}
	}
	err = e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 13, Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
		for k := range c.Len() {
			switch w := c.Walk(k); len(w) {
			case 1:
				first[w[0]][graph.NoVertex]++
			case 2:
				first[w[0]][w[1]]++
				second[w[1]][graph.NoVertex]++
			case 3:
				first[w[0]][w[1]]++
				second[w[1]][w[2]]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for v := range snap.NumVertices() {
		stattest.ChiSquare(t, fmt.Sprintf("vertex %d, first step (label %d)", v, alg.Schema[0]), first[v], labelStepProbs(rebuilt, alg, uint32(v), alg.Schema[0]))
		probs := labelStepProbs(rebuilt, alg, uint32(v), alg.Schema[1])
		n := 0
		for _, c := range second[v] {
			n += c
		}
		if n < 20*len(probs) {
			continue
		}
		tested++
		stattest.ChiSquare(t, fmt.Sprintf("vertex %d, second step (label %d)", v, alg.Schema[1]), second[v], probs)
	}
	if tested < 5 {
		t.Fatalf("only %d vertices reached often enough to test their second steps", tested)
	}
}

// labelStepProbs is the probability of each step from v on g along an
// edge labelled want (graph.NoVertex: there is none, the walk ends).
func labelStepProbs(g *graph.Graph, alg walk.Algorithm, v uint32, want uint8) map[uint32]float64 {
	probs := map[uint32]float64{}
	var sum float64
	for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
		if g.Labels[e] == want {
			w := weightOf(g, alg, e)
			probs[g.Targets[e]] += w
			sum += w
		}
	}
	if sum == 0 {
		return map[uint32]float64{graph.NoVertex: 1}
	}
	for x := range probs {
		probs[x] /= sum
	}
	return probs
}
