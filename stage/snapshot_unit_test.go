package stage

import (
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
)

// A request the engine pays to move snapshots for keeps the held one while
// it is young, of the same base, and holds the request's edge_offsets and
// seeds; otherwise it takes the newest, which becomes the held one. Other
// requests, and a hold of 0, always take the newest.
func TestSnapshotForHoldsTheEnginesSnapshot(t *testing.T) {
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 1, Dst: 2}, {Src: 2, Dst: 0}}, graph.BuildOptions{Name: "held", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(off int64, src, dst int64) *livegraph.Snapshot {
		if err := l.Apply(0, off, []livegraph.Update{{Op: livegraph.Insert, Src: src, Dst: dst}}); err != nil {
			t.Fatal(err)
		}
		return l.Publish()
	}
	s1 := publish(0, 0, 2)
	s2 := publish(1, 2, 3) // adds vertex 3
	if s2.NumVertices() != s1.NumVertices()+1 {
		t.Fatalf("vertices %d then %d", s1.NumVertices(), s2.NumVertices())
	}
	walks := func(starts ...uint32) *batch { return &batch{req: &message.Request{Starts: starts}} }
	t0 := time.Unix(1000, 0)
	const hold = 2 * time.Second
	var h heldSnapshot
	steps := []struct {
		name   string
		b      *batch
		newest *livegraph.Snapshot
		holds  bool
		hold   time.Duration
		at     time.Duration
		want   *livegraph.Snapshot
	}{
		{"an algorithm the engine does not hold", walks(0), s1, false, hold, 0, s1},
		{"none held yet: the newest, held from now", walks(0), s1, true, hold, 0, s1},
		{"a newer snapshot published: the held one", walks(1), s2, true, hold, time.Second, s1},
		{"not for an algorithm the engine does not hold", walks(1), s2, false, hold, time.Second, s2},
		{"nor with a hold of 0", walks(1), s2, true, 0, time.Second, s2},
		{"a seed the held one lacks: the newest", walks(3), s2, true, hold, time.Second, s2},
		{"which is held from then", walks(0), s2, true, hold, time.Second + 10*time.Millisecond, s2},
	}
	for _, st := range steps {
		if got := h.snapshotFor(st.b, st.newest, st.holds, st.hold, t0.Add(st.at)); got != st.want {
			t.Fatalf("%s: epoch %d, want %d", st.name, got.Epoch(), st.want.Epoch())
		}
	}
	s3 := publish(2, 1, 0)
	s4 := publish(3, 0, 1)
	h = heldSnapshot{}
	for _, st := range []struct {
		name   string
		b      *batch
		newest *livegraph.Snapshot
		at     time.Duration
		want   *livegraph.Snapshot
	}{
		{"held", walks(0), s1, 0, s1},
		{"read-your-writes beyond it: the newest, held from now", &batch{req: &message.Request{Starts: []uint32{0}, EdgeOffsets: map[int32]int64{0: 3}}}, s3, time.Second, s3},
		{"visits: the newest", &batch{req: &message.Request{Visits: &message.VisitSpec{}}}, s4, time.Second, s4},
		{"read-your-writes it holds: the held one", &batch{req: &message.Request{Starts: []uint32{0}, EdgeOffsets: map[int32]int64{0: 2}}}, s4, 2 * time.Second, s3},
		{"older than the hold: the newest", walks(0), s4, 3 * time.Second, s4},
		{"seeds left to the snapshot: the newest", &batch{req: &message.Request{Unresolved: true}}, s4, 3 * time.Second, s4},
	} {
		if got := h.snapshotFor(st.b, st.newest, true, hold, t0.Add(st.at)); got != st.want {
			t.Fatalf("%s: epoch %d, want %d", st.name, got.Epoch(), st.want.Epoch())
		}
	}
}
