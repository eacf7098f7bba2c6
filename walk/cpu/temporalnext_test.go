package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Every record's nx (the exponential bias's and the uniform and linear
// biases', timeNextRecords) is the window bound a step bounded by its time finds in
// its target's time order (lowerTime forward, upperTime backward), on
// undirected graphs (whose reverse edges serve, fillNextTwins) and on
// directed ones and multigraphs whose reverse edges are missing or at other
// times (the search decides), with runs of equal times.
func TestExpRecsNext(t *testing.T) {
	graphs := map[string]*graph.Graph{
		"rmat-undirected": timedRMAT(t, graph.RMATOptions{Scale: 11, EdgeFactor: 16, Seed: 3, Undirected: true, TimeSpan: 200}),
		"rmat-directed":   timedRMAT(t, graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 4, TimeSpan: 1 << 20}),
	}
	r := rand.New(rand.NewPCG(38, 7))
	for _, undirected := range []bool{false, true} {
		// A multigraph: pairs repeated at several times, some reversed
		// edges at their own times.
		var edges []graph.Edge
		for range 3000 {
			s, d := int64(r.IntN(300)), int64(r.IntN(300))
			if r.IntN(4) == 0 {
				s, d = int64(r.IntN(5)), int64(r.IntN(300)) // hubs
			}
			for range 1 + r.IntN(3) {
				edges = append(edges, graph.Edge{Src: s, Dst: d, Time: int64(r.IntN(40))})
			}
			if r.IntN(3) == 0 {
				edges = append(edges, graph.Edge{Src: d, Dst: s, Time: int64(r.IntN(40))})
			}
		}
		g, err := graph.FromEdges(edges, graph.BuildOptions{Timed: true, Undirected: undirected, Duplicates: graph.DupKeepAll, DenseIDs: true, NumVertices: 300})
		if err != nil {
			t.Fatal(err)
		}
		name := "multi-directed"
		if undirected {
			name = "multi-undirected"
		}
		graphs[name] = g
	}
	for name, g := range graphs {
		for _, back := range []bool{false, true} {
			e, err := New(g, WithWorkers(3))
			if err != nil {
				t.Fatal(err)
			}
			a := walk.Algorithm{Kind: walk.Temporal, Length: 10, Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 5, Backward: back}}
			tab := e.expTable(a)
			if !tab.next {
				t.Fatalf("%s: no nx", name)
			}
			off := g.Offsets
			// The uniform and linear biases' records: the same nx, and the
			// targets in time order.
			ul := e.timeNextRecords(back)
			for u := range g.NumVertices() {
				for k := off[u]; k < off[u+1]; k++ {
					rc := tab.rec[k]
					if ul[k].nx != rc.nx || ul[k].tgt != g.Targets[off[u]+uint64(g.ByTime[k])] {
						t.Fatalf("%s backward=%v: uniform record %d: %+v, want nx %d target %d", name, back, k, ul[k], rc.nx, g.Targets[off[u]+uint64(g.ByTime[k])])
					}
					v := rc.tgt
					want := lowerTime(g.Times, off[v], off[v+1], g.Times[k])
					if back {
						want = upperTime(g.Times, off[v], off[v+1], g.Times[k])
					}
					if uint64(rc.nx) != want {
						t.Fatalf("%s backward=%v: record %d (%d -> %d at %d): nx %d, want %d", name, back, k, u, v, g.Times[k], rc.nx, want)
					}
				}
				dens := math.Inf(1)
				if a, b := off[u], off[u+1]; b-a > 1 && g.Times[b-1] > g.Times[a] {
					dens = float64(b-a-1) / ((float64(g.Times[b-1]) - float64(g.Times[a])) / 5)
				}
				if got := tab.verts[u]; uint64(got.a) != off[u] || uint64(got.b) != off[u+1] || got.dens != dens {
					t.Fatalf("%s backward=%v: vertex %d: %+v, want [%d, %d) density %g", name, back, u, got, off[u], off[u+1], dens)
				}
			}
			runtime.KeepAlive(e)
		}
	}
}
