package livegraph

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// A compaction gives what graph.FromEdges gives for the base's edges in
// CSR order followed by the inserts (the stable order by target), with
// many equal targets among base edges and inserts (their order kept), on
// the paths that copy an untouched vertex's base edges and merge a
// vertex's sorted inserts into its base edges: dense ids, and external
// ids with added vertices numbered between the base's (every vertex has a
// self-loop no update deletes, as an id-mapped offline build drops
// edgeless vertices). One vertex gets many inserts to few targets, so that
// an unstable sort of them shows. Labelled.
func TestCompactMergesInserts(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "dense", true: "mapped"}[mapped], func(t *testing.T) { testCompactMerges(t, mapped) })
	}
}

func testCompactMerges(t *testing.T, mapped bool) {
	const n = 300
	rng := rand.New(rand.NewPCG(5, 6))
	id := func(v int) int64 {
		if mapped {
			return 1000 + 7*int64(v)
		}
		return int64(v)
	}
	var edges []graph.Edge // the model: base edges in CSR order, then inserts
	for v := range n {
		var ts []int
		for range rng.IntN(9) {
			ts = append(ts, rng.IntN(n/10)) // equal targets
		}
		if mapped {
			ts = append(ts, v)
		}
		slices.Sort(ts)
		for _, tg := range ts {
			edges = append(edges, graph.Edge{Src: id(v), Dst: id(tg), Weight: float32(1 + rng.IntN(4)), Label: uint8(rng.IntN(3))})
		}
	}
	opts := graph.BuildOptions{Name: "merge", Weighted: true, Labelled: true, SelfLoops: true, Duplicates: graph.DupKeepAll}
	if !mapped {
		opts.DenseIDs, opts.NumVertices = true, n
	}
	base, err := graph.FromEdges(edges, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(n)
	for i := range 60 {
		var rec []Update
		for k := range 8 {
			s := id(rng.IntN(n))
			if k < 3 {
				s = id(1) // a vertex with many inserts to equal targets
			}
			d := id(rng.IntN(n / 10))
			switch r := rng.IntN(10); {
			case r < 6:
				if rng.IntN(20) == 0 {
					if d, next = next, next+1; mapped {
						d = 1000 + 7*rng.Int64N(n) + 3 // between the base's ids
					}
					rec = append(rec, Update{Op: Insert, Src: d, Dst: d, Has: HasWeight, Weight: 1})
					edges = append(edges, graph.Edge{Src: d, Dst: d, Weight: 1})
				}
				w, lb := float32(1+rng.IntN(4)), uint8(rng.IntN(5))
				rec = append(rec, Update{Op: Insert, Src: s, Dst: d, Weight: w, Label: lb, Has: HasWeight | HasLabel})
				edges = append(edges, graph.Edge{Src: s, Dst: d, Weight: w, Label: lb})
			case s != d:
				rec = append(rec, Update{Op: Delete, Src: s, Dst: d})
				edges = slices.DeleteFunc(edges, func(e graph.Edge) bool { return e.Src == s && e.Dst == d })
			}
		}
		if err := l.Apply(0, int64(i), rec); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Compact(context.Background(), l.Publish())
	if err != nil {
		t.Fatal(err)
	}
	if !mapped {
		opts.NumVertices = int(next)
	}
	want, err := graph.FromEdges(edges, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumVertices() != want.NumVertices() || !slices.Equal(got.Offsets, want.Offsets) || !slices.Equal(got.Targets, want.Targets) ||
		!slices.Equal(got.Weights, want.Weights) || !slices.Equal(got.Labels, want.Labels) || got.NumLabels != want.NumLabels || !slices.Equal(got.IDs, want.IDs) {
		for v := range min(got.NumVertices(), want.NumVertices()) {
			a, b := got.Offsets[v], want.Offsets[v]
			if a != b || !slices.Equal(got.Targets[a:got.Offsets[v+1]], want.Targets[b:want.Offsets[v+1]]) ||
				!slices.Equal(got.Weights[a:got.Offsets[v+1]], want.Weights[b:want.Offsets[v+1]]) {
				t.Fatalf("vertex %d: compacted %v %v, rebuilt %v %v", v, got.Targets[a:got.Offsets[v+1]], got.Weights[a:got.Offsets[v+1]],
					want.Targets[b:want.Offsets[v+1]], want.Weights[b:want.Offsets[v+1]])
			}
		}
		t.Fatalf("compacted %d vertices %d edges %d labels, rebuilt %d vertices %d edges %d labels", got.NumVertices(), got.NumEdges(), got.NumLabels,
			want.NumVertices(), want.NumEdges(), want.NumLabels)
	}
}
