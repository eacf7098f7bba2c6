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

// randomSnapshot applies random updates to an R-MAT base: inserts between
// skewed endpoints (some naming new vertices, a few re-inserting deleted
// edges), deletes of base and inserted edges, and one vertex stripped of
// all its edges and one of all but one (their steps end in the exact
// scan), over several published epochs.
func randomSnapshot(t *testing.T, seed uint64, weighted bool) *livegraph.Snapshot {
	t.Helper()
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 9, EdgeFactor: 6, Seed: seed, Weighted: weighted, Name: "ring-overlay"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 37))
	n := int64(base.NumVertices())
	next := n
	skewed := func() int64 { return int64(float64(n) * rng.Float64() * rng.Float64()) }
	ins := func(s, d int64) livegraph.Update {
		u := livegraph.Update{Op: livegraph.Insert, Src: s, Dst: d}
		if weighted {
			u.Weight, u.Has = float32(1+rng.IntN(8))/2, livegraph.HasWeight
		}
		return u
	}
	var inserted [][2]int64
	for rec := range 6 {
		var ups []livegraph.Update
		for range int(base.NumEdges()) / 40 {
			switch r := rng.IntN(20); {
			case r < 12:
				s, d := skewed(), skewed()
				if rng.IntN(30) == 0 {
					d, next = next, next+1
				}
				if rng.IntN(40) == 0 && next > n {
					s = n + rng.Int64N(next-n)
				}
				ups = append(ups, ins(s, d))
				inserted = append(inserted, [2]int64{s, d})
			case r < 16:
				s := uint32(skewed())
				if adj := base.Neighbors(s); len(adj) > 0 {
					ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
				}
			case r < 18 && len(inserted) > 0:
				e := inserted[rng.IntN(len(inserted))]
				ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: e[0], Dst: e[1]})
				if rng.IntN(2) == 0 {
					ups = append(ups, ins(e[0], e[1]))
				}
			default:
				ups = append(ups, ins(skewed(), skewed()))
			}
		}
		if rec == 3 {
			// Vertex 0 (the R-MAT hub) loses every base edge, vertex 1
			// all but its last.
			for _, v := range []uint32{0, 1} {
				adj := base.Neighbors(v)
				if v == 1 && len(adj) > 0 {
					adj = adj[:len(adj)-1]
				}
				for _, d := range adj {
					ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: int64(v), Dst: int64(d)})
				}
			}
		}
		if err := l.Apply(0, int64(rec), ups); err != nil {
			t.Fatal(err)
		}
		l.Publish()
	}
	return l.Snapshot()
}

// overlayWalks runs job on e and returns its walks by walk id.
func overlayWalks(t *testing.T, e *Engine, job walk.Job) map[uint64][]uint32 {
	t.Helper()
	out := map[uint64][]uint32{}
	err := e.Run(context.Background(), []walk.Job{job}, func(c walk.Chunk) error {
		for k, id := range c.WalkIDs {
			out[id] = slices.Clone(c.Vertices[c.Offsets[k]:c.Offsets[k+1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRingOverlayWalksEqualUnitPath checks that the ring walker on a live
// graph's snapshot (walkRingOverlay) serves, walk by walk, the walks of
// the per-unit overlay path (walkOverlayUnit, whose steps are overlayStep's
// and are chi-square tested in livegraph): on random snapshots of weighted
// and unweighted graphs, with the fused table and without, for DeepWalk
// and PPR, uniform and weighted, from every vertex, added ones included.
func TestRingOverlayWalksEqualUnitPath(t *testing.T) {
	algs := []walk.Algorithm{
		{Kind: walk.DeepWalk, Length: 40},
		{Kind: walk.DeepWalk, Length: 40, Weighted: true},
		{Kind: walk.PPR, Length: 40, StopProb: 0.15},
		{Kind: walk.PPR, Length: 40, StopProb: 0.15, Weighted: true},
		{Kind: walk.DeepWalk, Length: 1, Weighted: true},
		{Kind: walk.PPR, Length: 2, StopProb: 0.5},
	}
	for _, seed := range []uint64{1, 2, 3} {
		for _, weighted := range []bool{true, false} {
			snap := randomSnapshot(t, seed, weighted)
			if st := snap.Stats(); st.Added == 0 || st.Tombstones == 0 {
				t.Fatalf("seed %d: the snapshot wants added vertices and deletes: %+v", seed, st)
			}
			starts := make([]uint32, 0, 2*snap.NumVertices())
			for v := range uint32(snap.NumVertices()) {
				starts = append(starts, v, v)
			}
			for _, fusedLimit := range []int64{DefaultFusedTableLimit(), 0} {
				for _, alg := range algs {
					if alg.Weighted && !weighted {
						continue
					}
					name := fmt.Sprintf("seed%d/weighted=%v/fused=%v/%s-%d-w%v", seed, weighted, fusedLimit > 0, alg.Kind, alg.Length, alg.Weighted)
					t.Run(name, func(t *testing.T) {
						mk := func(slow bool) *Engine {
							e, err := New(snap.Base(), WithWorkers(2), WithChunkSize(300), WithFusedTableLimit(fusedLimit))
							if err != nil {
								t.Fatal(err)
							}
							e.overlaySlow = slow
							return e
						}
						job := walk.Job{Algorithm: alg, Seed: seed*1000 + 7, FirstWalk: 1 << 33, Starts: starts, Overlay: snap}
						fast, slow := overlayWalks(t, mk(false), job), overlayWalks(t, mk(true), job)
						if len(fast) != len(starts) || len(slow) != len(starts) {
							t.Fatalf("walks: %d on the ring, %d on the unit path, want %d", len(fast), len(slow), len(starts))
						}
						bad := 0
						for id, w := range slow {
							if !slices.Equal(fast[id], w) {
								if bad < 3 {
									t.Errorf("walk %d from %d: ring %v, unit path %v", id, w[0], fast[id], w)
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
		}
	}
}
