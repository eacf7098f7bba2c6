package gpu

import (
	"context"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
)

// timedSnapshot is liveSnapshot on a timed R-MAT base (times in [0,
// 20000), inserts timed in the same span): a delta over most vertices with
// deletes, re-inserts at other times, stripped and added vertices.
func timedSnapshot(t testing.TB, scale int, seed uint64, weighted bool) (*livegraph.Live, *livegraph.Snapshot) {
	t.Helper()
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 8, Seed: seed,
		Undirected: true, Weighted: weighted, TimeSpan: 20000, Name: "gpu-overlay-timed"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	applyRandomTimed(t, l, base, seed, weighted, 20000, int(base.NumEdges())/40, 6)
	return l, l.Snapshot()
}

// TestTimedListsAreTheCompactedTimeOrder: every vertex with a delta gets a
// list, every other none, and each list is the vertex's time order in the
// snapshot's compaction (livegraph.Compact, whose time order walks on the
// rebuilt graph follow): the same (time, target, weight) sequence, targets
// compared by external id (Compact numbers added vertices its own way).
func TestTimedListsAreTheCompactedTimeOrder(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		_, snap := timedSnapshot(t, 8, 3, weighted)
		l, err := buildTimedLists(snap, snap.DeltaIndex(), walk.TimedBaseOf(snap.Base()), weighted)
		if err != nil {
			t.Fatal(err)
		}
		g, err := livegraph.Compact(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.index) != snap.NumVertices() || len(l.off) != snap.DeltaIndex().Len()+1 {
			t.Fatalf("weighted=%v: %d index entries and %d lists for %d vertices and %d deltas", weighted, len(l.index), len(l.off)-1,
				snap.NumVertices(), snap.DeltaIndex().Len())
		}
		lists, long := 0, 0
		for v := range uint32(snap.NumVertices()) {
			j := l.index[v]
			if (j != 0) != (snap.Vertex(v) != nil) {
				t.Fatalf("weighted=%v: vertex %d: list %d, delta %v", weighted, v, j, snap.Vertex(v) != nil)
			}
			if j == 0 {
				continue
			}
			lists++
			a, b := l.off[j-1], l.off[j]
			cv, ok := g.DenseID(snap.ExternalID(v))
			if !ok {
				t.Fatalf("vertex %d (external %d) is not in the compaction", v, snap.ExternalID(v))
			}
			ca, cb := g.Offsets[cv], g.Offsets[cv+1]
			if cb-ca != b-a {
				t.Fatalf("weighted=%v: vertex %d: %d listed edges, the compaction has %d", weighted, v, b-a, cb-ca)
			}
			long = max(long, int(b-a))
			for i := uint64(0); i < b-a; i++ {
				k, ck := a+i, ca+i
				e := ca + uint64(g.ByTime[ck])
				if l.byTime[k] != uint32(i) || l.times[k] != g.Times[ck] || snap.ExternalID(l.targets[k]) != g.ExternalID(g.Targets[e]) ||
					weighted && l.weights[k] != g.Weights[e] {
					t.Fatalf("weighted=%v: vertex %d position %d: list (%d, %d) differs from the compaction's (%d, %d)", weighted, v, i,
						l.times[k], snap.ExternalID(l.targets[k]), g.Times[ck], g.ExternalID(g.Targets[e]))
				}
			}
		}
		if lists == 0 || long < 20 {
			t.Fatalf("weighted=%v: %d lists, the longest %d: nothing tested", weighted, lists, long)
		}
	}
}
