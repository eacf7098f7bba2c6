package livegraph

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// windowVariants are the timed, densely numbered kinds of base the window
// tests run on (dense, so that vertices the window leaves edgeless stay in
// the offline rebuild, as they stay in a compaction).
var windowVariants = []variant{
	{name: "timed", timed: true},
	{name: "timed-weighted-labelled", timed: true, weighted: true, labelled: true},
}

// floorDiv is the model's segment arithmetic, written apart from window.go.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// evictModel drops the model's edges older than the cut of a window of
// length ms in segments of seg ms at event time now, and returns the
// cutoff: edges at or after it stay.
func (m *model) evictModel(now, length, seg int64) int64 {
	cut := floorDiv(now-length, seg) * seg
	m.edges = slices.DeleteFunc(m.edges, func(e graph.Edge) bool { return e.Time < cut })
	return cut
}

// windowRun applies random records whose insert times move forward, with
// some late ones, to a windowed live graph and to the model (which evicts
// by its own arithmetic after each record), and publishes now and then.
type windowPub struct {
	snap  *Snapshot
	want  *graph.Graph
	cut   int64
	pairs map[[2]uint32]bool // live (src, dst) pairs of the model
}

func windowRun(t *testing.T, v variant, seed uint64) (*Live, []windowPub) {
	t.Helper()
	const length, segs = 40, 4 // ms: segments of 10 ms
	rng := rand.New(rand.NewPCG(seed, uint64(len(v.name))))
	m, base := newModel(t, v, 40, 200, rng) // base times 0..49
	_, now := base.TimeRange()
	l, err := New(base, WithWindow(length*time.Millisecond, segs))
	if err != nil {
		t.Fatal(err)
	}
	cut := m.evictModel(now, length, length/segs)
	var pubs []windowPub
	publish := func() {
		pairs := map[[2]uint32]bool{}
		for _, e := range m.edges {
			pairs[[2]uint32{uint32(e.Src), uint32(e.Dst)}] = true
		}
		pubs = append(pubs, windowPub{l.Publish(), m.build(t, "base"), cut, pairs})
	}
	publish()
	for i := range 400 {
		// The clock moves a millisecond a record; an insert is up to 59
		// ms behind it, so some are older than the window's cut.
		m.clock = func(rng *rand.Rand) int64 { return 50 + int64(i) - rng.Int64N(60) }
		rec := m.randomRecord(rng)
		for _, u := range rec {
			if u.Op == Insert {
				now = max(now, u.Time)
			}
		}
		if err := l.Apply(0, int64(i), rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		cut = m.evictModel(now, length, length/segs)
		if i%25 == 24 {
			publish()
		}
	}
	return l, pubs
}

// TestWindowCompactEqualsRebuild checks eviction by segments against the
// model: every published snapshot — compacted after all the records, so
// after later evictions too — equals the offline build of the model's
// edges at its publication, which holds every edge applied whose time is
// at or after the cut of the window at the largest time seen (late
// inserts included, dropped; base edges included, evicted), and no other;
// and the snapshot reports that cutoff.
func TestWindowCompactEqualsRebuild(t *testing.T) {
	for _, v := range windowVariants {
		t.Run(v.name, func(t *testing.T) {
			l, pubs := windowRun(t, v, 1)
			for k, p := range pubs {
				got, err := Compact(context.Background(), p.snap)
				if err != nil {
					t.Fatal(err)
				}
				if got.Checksum() != p.want.Checksum() || got.NumVertices() != p.want.NumVertices() {
					t.Fatalf("snapshot %d (cut %d): compacted %d vertices %d edges, rebuilt %d vertices %d edges (checksums %x, %x)",
						k, p.cut, got.NumVertices(), got.NumEdges(), p.want.NumVertices(), p.want.NumEdges(), got.Checksum(), p.want.Checksum())
				}
				if _, cut, ok := p.snap.Window(); !ok || cut != p.cut {
					t.Fatalf("snapshot %d: window cutoff %d (ok %v), want %d", k, cut, ok, p.cut)
				}
				if err := deltaInvariants(p.snap); err != nil {
					t.Fatalf("snapshot %d: %v", k, err)
				}
			}
			st := l.Snapshot().Stats()
			if st.Evicted == 0 || st.Late == 0 || st.Evictions < 30 {
				t.Fatalf("the run should evict base and inserted edges, drop late ones and pass segments: %+v", st)
			}
			// Bounded: the delta holds about a window of inserts, not
			// the whole stream.
			if st.DeltaEdges > st.Inserted/4 {
				t.Fatalf("delta holds %d edges of %d inserted", st.DeltaEdges, st.Inserted)
			}
			t.Logf("%+v", st)
		})
	}
}

// deltaInvariants checks what the walkers rely on in every vertex state of
// s (walk.DeltaVertex): MaxWeight bounds every appended weight (the delta
// side's accept draw), tombstones are sorted with Upto within the array,
// and the side arrays match the edges.
func deltaInvariants(s *Snapshot) error {
	for v := range uint32(s.NumVertices()) {
		vs := findState(s.top, v)
		if vs == nil {
			continue
		}
		dv := &vs.view
		for i, e := range dv.Edges() {
			if e.Weight > dv.MaxWeight {
				return fmt.Errorf("vertex %d: appended edge %d weighs %v, above MaxWeight %v", v, i, e.Weight, dv.MaxWeight)
			}
		}
		for i, ts := range dv.Dead() {
			if int(ts.Upto) > len(dv.Edges()) || i > 0 && dv.Dead()[i-1].Target >= ts.Target {
				return fmt.Errorf("vertex %d: tombstones %v over %d appended edges", v, dv.Dead(), len(dv.Edges()))
			}
		}
		if s.base.Timed() && len(vs.times().times) != len(dv.Edges()) {
			return fmt.Errorf("vertex %d: %d times for %d appended edges", v, len(vs.times().times), len(dv.Edges()))
		}
		// MetaPath's overlay step reads Labels[i] as Edges[i]'s label.
		if s.base.Labelled() && len(dv.Labels()) != len(dv.Edges()) || !s.base.Labelled() && dv.Labels() != nil {
			return fmt.Errorf("vertex %d: %d labels for %d appended edges (graph labelled: %v)", v, len(dv.Labels()), len(dv.Edges()), s.base.Labelled())
		}
	}
	return nil
}

// TestWindowWalksNeverTakeEvictedEdge walks every published snapshot —
// after all the records are applied, so across later evictions — from
// every vertex, uniform and weighted, and checks every step: it must be an
// edge the model holds at the snapshot's publication, so never an evicted
// edge, nor a late one.
func TestWindowWalksNeverTakeEvictedEdge(t *testing.T) {
	v := windowVariants[1]
	l, pubs := windowRun(t, v, 2)
	e, err := cpu.New(l.Base(), cpu.WithWorkers(2), cpu.WithChunkSize(16))
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for k, p := range pubs {
		starts := make([]uint32, 0, 4*p.snap.NumVertices())
		for v := range p.snap.NumVertices() {
			for range 4 {
				starts = append(starts, uint32(v))
			}
		}
		for _, weighted := range []bool{false, true} {
			alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 12, Weighted: weighted}
			err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: uint64(k), Starts: starts, Overlay: p.snap}}, func(c walk.Chunk) error {
				for j := range c.Len() {
					w := c.Walk(j)
					for i := 1; i < len(w); i++ {
						if !p.pairs[[2]uint32{w[i-1], w[i]}] {
							return fmt.Errorf("walk %d steps %d -> %d, not an edge of the window at cut %d", c.WalkIDs[j], w[i-1], w[i], p.cut)
						}
						steps++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("snapshot %d, weighted %v: %v", k, weighted, err)
			}
		}
	}
	t.Logf("%d steps checked on %d snapshots", steps, len(pubs))
}

// TestWindowStepsMatchRebuiltGraph: on a snapshot after many evictions
// (states rewritten, prefixes dropped with the largest weight kept as the
// envelope), a step takes each edge with the probability the compacted
// graph gives it, vertex by vertex (chi-square), uniform and weighted.
func TestWindowStepsMatchRebuiltGraph(t *testing.T) {
	_, pubs := windowRun(t, windowVariants[1], 3)
	for _, k := range []int{len(pubs) / 2, len(pubs) - 1} {
		t.Run(fmt.Sprint("snapshot-", k), func(t *testing.T) { stepsMatchCompaction(t, pubs[k].snap, 8000) })
	}
}

// TestWindowResumesOverCompaction builds a live graph over the compaction
// of a windowed snapshot with ResumeOptions, as a rebase or a recovery
// does, and applies the records after the snapshot to both: after every
// record, their snapshots compact to the same graph and report the same
// window. The last record before the snapshot inserts the newest edge and
// deletes it, so the compaction's own newest edge is older than the event
// time: resumed without it, the new graph's cut would start a segment or
// more behind.
func TestWindowResumesOverCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	m, base := newModel(t, windowVariants[1], 40, 200, rng)
	l, err := New(base, WithWindow(40*time.Millisecond, 4))
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]Update
	for i := range 260 {
		m.clock = func(rng *rand.Rand) int64 { return 50 + int64(i) - rng.Int64N(60) }
		recs = append(recs, m.randomRecord(rng))
	}
	const split = 200
	recs[split-1] = append(recs[split-1], Update{Op: Insert, Src: 1, Dst: 2, Time: 50 + split + 25, Has: HasTime}, Update{Op: Delete, Src: 1, Dst: 2})
	for i, r := range recs[:split] {
		if err := l.Apply(0, int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
	s := l.Publish()
	g, err := Compact(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(g, l.ResumeOptions(s)...)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs[split:] {
		for _, x := range []*Live{l, r} {
			if err := x.Apply(0, int64(split+i), rec); err != nil {
				t.Fatal(err)
			}
		}
		a, b := l.Publish(), r.Publish()
		ga, err := Compact(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := Compact(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		na, ca, _ := a.Window()
		nb, cb, _ := b.Window()
		if ga.Checksum() != gb.Checksum() || na != nb || ca != cb {
			t.Fatalf("record %d: live graph %d edges, window (%d, %d); resumed %d edges, window (%d, %d)",
				split+i, ga.NumEdges(), na, ca, gb.NumEdges(), nb, cb)
		}
	}
}

// TestWindowEvictsBySegments follows one small graph through the window's
// rule: a window of 30 ms in 3 segments of 10; the base's edges at 0, 10,
// 20 and 25 ms. An edge goes when the segment it is in falls wholly out
// of the window, so at event time 45 the cut is 10 (the segment of 15): the
// edge at 0 is gone, the one at 10 stays though it is 35 ms old. A
// snapshot published before an eviction keeps what it had.
func TestWindowEvictsBySegments(t *testing.T) {
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1, Time: 0}, {Src: 0, Dst: 2, Time: 10}, {Src: 0, Dst: 1, Time: 20}, {Src: 1, Dst: 2, Time: 25}},
		graph.BuildOptions{Name: "w", DenseIDs: true, Timed: true, Duplicates: graph.DupKeepAll})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base, WithWindow(30*time.Millisecond, 3))
	if err != nil {
		t.Fatal(err)
	}
	ins := func(s, d, tm int64) Update { return Update{Op: Insert, Src: s, Dst: d, Time: tm, Has: HasTime} }
	edges := func(s *Snapshot) []string {
		g, err := Compact(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for u := range g.NumVertices() {
			for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
				out = append(out, fmt.Sprintf("%d>%d@%d", u, g.Targets[e], g.EdgeTime(e)))
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(s *Snapshot, now, cut int64, want string) {
		t.Helper()
		if got := strings.Join(edges(s), " "); got != want {
			t.Fatalf("snapshot %d: edges %q, want %q", s.Epoch(), got, want)
		}
		if n, c, ok := s.Window(); !ok || n != now || c != cut {
			t.Fatalf("snapshot %d: window (%d, %d, %v), want (%d, %d)", s.Epoch(), n, c, ok, now, cut)
		}
	}
	s0 := l.Snapshot()
	check(s0, 25, -10, "0>1@0 0>1@20 0>2@10 1>2@25")
	// 2->0 at 44: the cut is the segment of 14, 10. The base edge 0>1@0
	// goes; its twin 0>1@20 is kept (appended again with its time).
	if err := l.Apply(0, 0, []Update{ins(2, 0, 44)}); err != nil {
		t.Fatal(err)
	}
	s1 := l.Publish()
	check(s1, 44, 10, "0>1@20 0>2@10 1>2@25 2>0@44")
	// A late insert (time 5, below the cut) adds its vertex 3 and no edge;
	// an insert at 59 moves the cut to 20: 0>2@10 goes.
	if err := l.Apply(0, 1, []Update{ins(3, 0, 5), ins(1, 0, 59)}); err != nil {
		t.Fatal(err)
	}
	s2 := l.Publish()
	check(s2, 59, 20, "0>1@20 1>0@59 1>2@25 2>0@44")
	if s2.NumVertices() != 4 {
		t.Fatalf("the late insert's vertex: %d vertices, want 4", s2.NumVertices())
	}
	// 89: the cut is 50, everything but 1>0@59 goes, appended or base.
	if err := l.Apply(0, 2, []Update{ins(3, 3, 89)}); err != nil {
		t.Fatal(err)
	}
	s3 := l.Publish()
	check(s3, 89, 50, "1>0@59 3>3@89")
	// The snapshots published before keep what they had.
	check(s0, 25, -10, "0>1@0 0>1@20 0>2@10 1>2@25")
	check(s1, 44, 10, "0>1@20 0>2@10 1>2@25 2>0@44")
	check(s2, 59, 20, "0>1@20 1>0@59 1>2@25 2>0@44")
	if !snapshotHasEdge(s1, 0, 2) || snapshotHasEdge(s2, 0, 2) {
		t.Fatal("0 -> 2 should be an edge of snapshot 1 and not of snapshot 2")
	}
	st := s3.Stats()
	// Evicted: 0>1@0, 0>2@10, then 0>1@20 (appended again), 1>2@25 and
	// 2>0@44; four moves of the cut (at New, to -10); tombstones on 0's
	// base targets 1 and 2 and 1's 2.
	if st.Evicted != 5 || st.Late != 1 || st.Evictions != 4 || st.DeltaEdges != 2 || st.Tombstones != 3 {
		t.Fatalf("stats %+v, want evicted 5, late 1, 4 evictions, 2 delta edges, 3 tombstones", st)
	}
}

// TestWindowAtStart: a base spanning more than the window loses its old
// edges before the first snapshot, and WithEventTime resumes a later event
// time; a window is refused on a graph without edge times, and below 1 ms.
func TestWindowAtStart(t *testing.T) {
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1, Time: 0}, {Src: 1, Dst: 0, Time: 100}},
		graph.BuildOptions{Name: "w", DenseIDs: true, Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts []Option
		live int64
		now  int64
	}{
		{[]Option{WithWindow(50*time.Millisecond, 1)}, 1, 100},
		{[]Option{WithWindow(500*time.Millisecond, 1)}, 2, 100},
		{[]Option{WithWindow(500*time.Millisecond, 1), WithEventTime(1000)}, 0, 1000},
		{nil, 2, 0},
	} {
		l, err := New(base, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Compact(context.Background(), l.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		now, _, _ := l.Snapshot().Window()
		if g.NumEdges() != tc.live || now != tc.now {
			t.Errorf("%d options: %d edges at event time %d, want %d at %d", len(tc.opts), g.NumEdges(), now, tc.live, tc.now)
		}
	}
	untimed, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{Name: "u", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		g    *graph.Graph
		opt  Option
		want string
	}{
		{untimed, WithWindow(time.Hour, 0), "needs edge times"},
		{base, WithWindow(time.Microsecond, 0), "at least 1ms"},
		{base, WithWindow(-time.Hour, 0), "at least 1ms"},
		{base, WithWindow(time.Hour, -1), "window segments"},
		{base, WithEventTime(5), "without a window"},
	} {
		if _, err := New(tc.g, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want an error with %q", err, tc.want)
		}
	}
}
