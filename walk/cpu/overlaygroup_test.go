package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
)

// TestOverlayGroupWalksEqualOneAtATime checks that Node2Vec and MetaPath
// on a snapshot, walked a group at a time with the deltas from the flat
// index (walkOverlayOneByOne), are the walks of each walk's steps taken
// one walk after another with the deltas from the snapshot's tree, walk
// by walk: on a labelled graph with inserts (new vertices among them),
// deletes and re-inserts, uniform and weighted, from every vertex twice,
// in units that end inside a group.
func TestOverlayGroupWalksEqualOneAtATime(t *testing.T) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 9, EdgeFactor: 6, Seed: 4, Weighted: true, Labels: 3, Name: "overlay-group"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 41))
	n := int64(base.NumVertices())
	var ups []livegraph.Update
	for range 1500 {
		s, d := rng.Int64N(n), rng.Int64N(n+20)
		ups = append(ups, livegraph.Update{Op: livegraph.Insert, Src: s, Dst: d, Weight: float32(1 + rng.IntN(4)), Label: uint8(rng.IntN(3)), Has: livegraph.HasWeight | livegraph.HasLabel})
	}
	for range 400 {
		s := uint32(rng.Int64N(n))
		if adj := base.Neighbors(s); len(adj) > 0 {
			ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
		}
	}
	if err := l.Apply(0, 0, ups); err != nil {
		t.Fatal(err)
	}
	snap := l.Publish()
	if st := snap.Stats(); st.Added == 0 || st.Tombstones == 0 {
		t.Fatalf("the snapshot wants added vertices and deletes: %+v", st)
	}
	starts := make([]uint32, 0, 2*snap.NumVertices())
	for v := range uint32(snap.NumVertices()) {
		starts = append(starts, v, v)
	}
	for _, alg := range []walk.Algorithm{
		{Kind: walk.Node2Vec, Length: 12, P: 0.5, Q: 2},
		{Kind: walk.Node2Vec, Length: 12, P: 2, Q: 0.25, Weighted: true},
		{Kind: walk.MetaPath, Length: 12, Schema: []uint8{0, 1, 2}},
		{Kind: walk.MetaPath, Length: 12, Schema: []uint8{2, 0}, Weighted: true},
	} {
		t.Run(fmt.Sprintf("%s-w%v", alg.Kind, alg.Weighted), func(t *testing.T) {
			e, err := New(base, WithWorkers(2), WithChunkSize(300))
			if err != nil {
				t.Fatal(err)
			}
			job := walk.Job{Algorithm: alg, Seed: 77, FirstWalk: 1 << 20, Starts: starts, Overlay: snap}
			got := overlayWalks(t, e, job)
			steppers, _, _ := e.plan([]walk.Job{job})
			st := steppers[0]
			if st.ovIdx == nil {
				t.Fatal("the job has no flat index: the group path is not taken")
			}
			bad := 0
			for k, start := range starts {
				id := job.FirstWalk + uint64(k)
				want := []uint32{start}
				prev, cur := uint32(graph.NoVertex), start
				for step := uint32(0); step < uint32(alg.Length); step++ {
					var next uint32
					var ok bool
					if alg.Kind == walk.MetaPath {
						next, ok = st.overlayMetaPathStep(id, step, cur, snap.Vertex(cur))
					} else {
						next, ok = st.overlayNode2VecStep(id, step, prev, cur, snap.Vertex(cur))
					}
					if !ok {
						break
					}
					want = append(want, next)
					prev, cur = cur, next
				}
				if !slices.Equal(got[id], want) {
					if bad < 3 {
						t.Errorf("walk %d from %d: %v, one at a time %v", id, start, got[id], want)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d walks differ", bad, len(starts))
			}
		})
	}
}
