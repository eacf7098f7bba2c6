package gpu

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
)

// twinStats counts which way twinStep (overlay_step's host twin) takes its
// steps, when twinCounts points at one (TestOverlayTwinStats).
type twinStats struct {
	steps, delta, saturated int64
	// The first attempt, from the record: the filter clear (a vertex with
	// a delta), the bitmap says the edge lives, the edge dead.
	filterClear, bitmapLive, headDead int64
	// The head read because the side word is not below the record's side
	// threshold, or the vertex has no base edge.
	headSide, headNoBase int64
	// After the head: attempts, and where the step ended (the base side,
	// on attempt 0 the base side the record left undecided; an appended
	// edge; the exact scan); weighted delta-side rejections.
	attempts, headBase, headBandBase, headDelta, scan, rejected int64
	// The attempts' checks of a target their head's filter holds: binary
	// searches of the tombstones (without the bitmaps), bitmap lookups.
	searches, lookups int64
}

var twinCounts *twinStats

// TestOverlayTwinStats walks the bench's delta (TestOverlayBench: R-MAT,
// edge factor 16, undirected, weighted; 10% updates drawn by degree) with
// the host twin and counts which way the steps go, per weighting, with and
// without the dead-edge bitmap:
//
//	WALKSTAGE_OVERLAY_TWIN_STATS=18 go test -run OverlayTwinStats -v ./gpu
func TestOverlayTwinStats(t *testing.T) {
	scale, _ := strconv.Atoi(os.Getenv("WALKSTAGE_OVERLAY_TWIN_STATS"))
	if scale == 0 {
		t.Skip("set WALKSTAGE_OVERLAY_TWIN_STATS=<scale>")
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Name: "stats"})
	if err != nil {
		t.Fatal(err)
	}
	snap, _, _ := benchDelta(t, g)
	var lay deltaLayout
	layoutSnapshot(t, &lay, snap)
	tab := twinAliasTable(g)
	dead := twinBitmaps(g, &lay)
	defer func() { twinCounts = nil }()
	walks := min(g.NumVertices(), 1<<16)
	for _, weighted := range []bool{false, true} {
		recs := vertexRecords(g.Offsets, &lay, weighted)
		at := tab
		if !weighted {
			at = nil
		}
		alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: weighted}
		for _, d := range []*twinDead{nil, dead} {
			var st twinStats
			twinCounts = &st
			for k := range walks {
				s := uint32(uint64(k) * uint64(g.NumVertices()) / uint64(walks))
				twinWalk(g, at, &lay, recs, d, alg, 1, uint64(k), s)
			}
			twinCounts = nil
			pc := func(x int64) float64 { return 100 * float64(x) / float64(st.steps) }
			t.Logf("weighted=%v bitmap=%v: %d steps; at a vertex with a delta %.1f%% (filter full %.1f%%); first attempt from the record: filter clear %.1f%%, bitmap live %.1f%%; head: edge dead %.1f%%, side word %.1f%%, no base edge %.2f%%; after the head: %.2f attempts a head step, base %.1f%% (on attempt 0 %.1f%%), appended %.1f%%, scan %.3f%%, rejections %.1f%% of steps; tombstone searches %.1f%%, bitmap lookups %.1f%% of steps",
				weighted, d != nil, st.steps, pc(st.delta), pc(st.saturated), pc(st.filterClear), pc(st.bitmapLive), pc(st.headDead), pc(st.headSide), pc(st.headNoBase),
				float64(st.attempts)/float64(max(1, st.headDead+st.headSide+st.headNoBase)), pc(st.headBase), pc(st.headBandBase), pc(st.headDelta), pc(st.scan), pc(st.rejected), pc(st.searches), pc(st.lookups))
		}
	}
}

// benchDelta applies the overlay benchmark's delta to a live graph over g
// (R-MAT, undirected, weighted) and publishes it: a tenth of g's edge
// count in records of 64 Ki updates, nine in ten inserts between endpoints
// drawn by degree (a target of a random edge: engagement's preferential
// attachment), one in a hundred of them naming a new vertex, one in ten a
// delete of a base edge. It returns the snapshot, the update count, and
// later, which applies 1% more updates (inserts drawn the same way, the
// same random stream) and publishes them (TestOverlayBench's later
// snapshot); TestOverlayBench and TestOverlayTwinStats walk the same delta.
func benchDelta(t testing.TB, g *graph.Graph) (snap *livegraph.Snapshot, total int64, later func() *livegraph.Snapshot) {
	t.Helper()
	return benchDeltaLabelled(t, g, 0)
}

// benchDeltaLabelled is benchDelta with each insert labelled at random in
// [0, labels) when labels > 0 (g labelled; the same updates otherwise).
func benchDeltaLabelled(t testing.TB, g *graph.Graph, labels int) (snap *livegraph.Snapshot, total int64, later func() *livegraph.Snapshot) {
	t.Helper()
	return benchDeltaShaped(t, g, labels, 0)
}

// benchDeltaShaped is benchDeltaLabelled with each insert timed at random
// in [0, span) when span > 0 (g timed; the same updates otherwise).
func benchDeltaShaped(t testing.TB, g *graph.Graph, labels int, span int64) (snap *livegraph.Snapshot, total int64, later func() *livegraph.Snapshot) {
	t.Helper()
	l, err := livegraph.New(g)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n, E := int64(g.NumVertices()), int64(g.NumEdges())
	next := n
	byDegree := func() int64 { return int64(g.Targets[rng.Int64N(E)]) }
	const record = 1 << 16
	total = E / 10
	ups := make([]livegraph.Update, 0, record)
	for off := int64(0); off*record < total; off++ {
		ups = ups[:0]
		for range min(record, total-off*record) {
			if rng.IntN(10) == 0 {
				s := uint32(byDegree())
				adj := g.Neighbors(s)
				ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
				continue
			}
			s, d := byDegree(), byDegree()
			if rng.IntN(100) == 0 {
				d, next = next, next+1
			}
			u := livegraph.Update{Op: livegraph.Insert, Src: s, Dst: d, Weight: 1 + 4*rng.Float32(), Has: livegraph.HasWeight}
			if labels > 0 {
				u.Label, u.Has = uint8(rng.IntN(labels)), u.Has|livegraph.HasLabel
			}
			if span > 0 {
				u.Time, u.Has = rng.Int64N(span), u.Has|livegraph.HasTime
			}
			ups = append(ups, u)
		}
		if err := l.Apply(0, off, ups); err != nil {
			t.Fatal(err)
		}
	}
	later = func() *livegraph.Snapshot {
		for off := int64(0); off < max(1, total/100/record); off++ {
			ups = ups[:0]
			for range record {
				u := livegraph.Update{Op: livegraph.Insert, Src: byDegree(), Dst: byDegree(), Weight: 1 + 4*rng.Float32(), Has: livegraph.HasWeight}
				if span > 0 {
					u.Time, u.Has = rng.Int64N(span), u.Has|livegraph.HasTime
				}
				ups = append(ups, u)
			}
			if err := l.Apply(0, total/record+1+off, ups); err != nil {
				t.Fatal(err)
			}
		}
		return l.Publish()
	}
	return l.Publish(), total, later
}
