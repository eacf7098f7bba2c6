package livegraph

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestHasAppendedMatchesScan: a snapshot's HasAppended answers as a scan
// of the vertex's appended edges does, for every vertex with a delta and
// every target, over snapshots where a few hubs take hundreds of inserts
// of the same few targets, deletes of them and inserts again (so a
// target's older copies are dead and its newest live, or the other way
// round), beside short deltas that are scanned. A sorted copy that kept a
// target's oldest copy, or one made for another snapshot, would answer
// otherwise.
func TestHasAppendedMatchesScan(t *testing.T) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 8, EdgeFactor: 6, Seed: 3, Name: "appended"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	n := int64(base.NumVertices())
	hubs := []int64{0, 1, 2, 3}
	var long, allDead, liveAfterDead int
	for round := range 8 {
		var ups []Update
		for range 500 {
			src, dst := hubs[rng.IntN(len(hubs))], rng.Int64N(48)
			op := Insert
			if rng.IntN(4) == 0 {
				op = Delete
			}
			ups = append(ups, Update{Op: op, Src: src, Dst: dst})
		}
		for range 200 {
			ups = append(ups, Update{Op: Insert, Src: rng.Int64N(n), Dst: rng.Int64N(n)})
		}
		if err := l.Apply(0, int64(round), ups); err != nil {
			t.Fatal(err)
		}
		snap := l.Publish()
		idx := snap.DeltaIndex()
		for v := range uint32(snap.NumVertices()) {
			k := idx.Rank(v)
			if k < 0 {
				continue
			}
			d := idx.At(k)
			e := d.Edges()
			if len(e) > walk.AppendedScan {
				long++
			}
			for x := range uint32(snap.NumVertices()) {
				want, any := false, false
				for i := range e {
					if e[i].Target != x {
						continue
					}
					live := !d.DeltaDead(i)
					if any && live && !want {
						liveAfterDead++
					}
					want = want || live
					any = true
				}
				if any && !want {
					allDead++
				}
				if got := idx.HasAppended(k, x); got != want {
					t.Fatalf("round %d: vertex %d (%d appended edges), target %d: HasAppended %v, the scan %v", round, v, len(e), x, got, want)
				}
			}
		}
	}
	if long == 0 || liveAfterDead == 0 || allDead == 0 {
		t.Fatalf("the snapshots want long deltas (%d), targets copied again after a delete (%d) and targets with every copy dead (%d)", long, liveAfterDead, allDead)
	}
	t.Logf("%d long deltas checked, %d targets live again after a delete, %d with every copy dead", long, liveAfterDead, allDead)
}
