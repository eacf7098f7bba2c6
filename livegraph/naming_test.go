package livegraph

import (
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// Naming names a snapshot's vertices, added ones after the base's, for
// the sink; an earlier snapshot's view keeps its own length after later
// snapshots grew the shared table, and a snapshot without added vertices
// is named by the base itself.
func TestSnapshotNaming(t *testing.T) {
	base, err := graph.FromEdges([]graph.Edge{{Src: 30, Dst: 10}, {Src: 10, Dst: 20}}, graph.BuildOptions{Name: "ids"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if g := l.Snapshot().Naming(); g != base {
		t.Fatalf("a snapshot without added vertices is named by %p, not the base %p", g, base)
	}
	baseIDs := []int64{base.ExternalID(0), base.ExternalID(1), base.ExternalID(2)}
	if err := l.Apply(0, 0, []Update{{Op: Insert, Src: 10, Dst: 99}}); err != nil {
		t.Fatal(err)
	}
	s1 := l.Publish()
	if err := l.Apply(0, 1, []Update{{Op: Insert, Src: 99, Dst: 77}, {Op: Delete, Src: 10, Dst: 20}}); err != nil {
		t.Fatal(err)
	}
	s2 := l.Publish()
	n2 := s2.Naming()
	n1 := s1.Naming() // built after the table grew for s2
	for _, tc := range []struct {
		g    *graph.Graph
		want []int64
	}{
		{n1, append(slices.Clone(baseIDs), 99)},
		{n2, append(slices.Clone(baseIDs), 99, 77)},
	} {
		if tc.g.NumVertices() != len(tc.want) || !slices.Equal(tc.g.IDs, tc.want) || tc.g.Name != base.Name || tc.g.Version != base.Version {
			t.Errorf("naming %s %s, %d vertices, ids %v; want %d vertices, ids %v", tc.g.Name, tc.g.Version, tc.g.NumVertices(), tc.g.IDs, len(tc.want), tc.want)
		}
		for v, ext := range tc.want {
			if got := tc.g.ExternalID(uint32(v)); got != ext {
				t.Errorf("vertex %d is named %d, want %d", v, got, ext)
			}
		}
	}
	if d := n2.Degree(4); d != 0 {
		t.Errorf("added vertex has %d base edges in the naming graph, want 0 (its edges are in the delta)", d)
	}
}
