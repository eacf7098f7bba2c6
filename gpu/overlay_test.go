package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// liveSnapshot applies random updates to an R-MAT base over several
// published epochs: inserts between skewed endpoints (some naming new
// vertices, some starting at added ones), deletes of base and inserted
// edges, re-inserts, and one vertex stripped of all its base edges and one
// of all but one (their steps reach the exact scan). walk/cpu's
// randomSnapshot, which its ring tests use, at a given scale.
func liveSnapshot(t testing.TB, scale int, seed uint64, weighted bool) *livegraph.Snapshot {
	t.Helper()
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 6, Seed: seed, Weighted: weighted, Name: "gpu-overlay"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	applyRandomUpdates(t, l, base, seed, weighted, int(base.NumEdges())/40, 6)
	return l.Snapshot()
}

// applyRandomUpdates applies epochs records of perEpoch random updates to
// l (over base) and publishes after each.
func applyRandomUpdates(t testing.TB, l *livegraph.Live, base *graph.Graph, seed uint64, weighted bool, perEpoch, epochs int) {
	t.Helper()
	applyRandomLabelled(t, l, base, seed, weighted, 0, perEpoch, epochs)
}

// applyRandomLabelled is applyRandomUpdates with each insert labelled at
// random in [0, labels) when labels > 0 (the same updates otherwise).
func applyRandomLabelled(t testing.TB, l *livegraph.Live, base *graph.Graph, seed uint64, weighted bool, labels, perEpoch, epochs int) {
	t.Helper()
	applyRandom(t, l, base, seed, weighted, labels, 0, perEpoch, epochs)
}

// applyRandomTimed is applyRandomUpdates with each insert timed at random
// in [0, span), for a timed base.
func applyRandomTimed(t testing.TB, l *livegraph.Live, base *graph.Graph, seed uint64, weighted bool, span int64, perEpoch, epochs int) {
	t.Helper()
	applyRandom(t, l, base, seed, weighted, 0, span, perEpoch, epochs)
}

// applyRandom is applyRandomLabelled with each insert timed at random in
// [0, span) when span > 0.
func applyRandom(t testing.TB, l *livegraph.Live, base *graph.Graph, seed uint64, weighted bool, labels int, span int64, perEpoch, epochs int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 37))
	n := int64(base.NumVertices())
	next := n
	skewed := func() int64 { return int64(float64(n) * rng.Float64() * rng.Float64()) }
	ins := func(s, d int64) livegraph.Update {
		u := livegraph.Update{Op: livegraph.Insert, Src: s, Dst: d}
		if weighted {
			u.Weight, u.Has = float32(1+rng.IntN(8))/2, livegraph.HasWeight
		}
		if labels > 0 {
			u.Label, u.Has = uint8(rng.IntN(labels)), u.Has|livegraph.HasLabel
		}
		if span > 0 {
			u.Time, u.Has = rng.Int64N(span), u.Has|livegraph.HasTime
		}
		return u
	}
	var inserted [][2]int64
	for rec := range epochs {
		var ups []livegraph.Update
		for range perEpoch {
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
		if rec == epochs/2-1 {
			// Vertex 2 gets 100 edges, all but the last deleted in the
			// next epoch with its base edges: a step from it finds its
			// one live edge, an appended one, in the exact scan about
			// half the time.
			for j := range int64(100) {
				ups = append(ups, ins(2, n-1-j))
			}
		}
		if rec == epochs/2 {
			for j := range int64(99) {
				ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: 2, Dst: n - 1 - j})
			}
			for _, d := range base.Neighbors(2) {
				if int64(d) != n-100 {
					ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: 2, Dst: int64(d)})
				}
			}
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
}

// overlayAlgorithms are the walks a snapshot serves on both engines.
var overlayAlgorithms = []walk.Algorithm{
	{Kind: walk.DeepWalk, Length: 40},
	{Kind: walk.DeepWalk, Length: 40, Weighted: true},
	{Kind: walk.PPR, Length: 40, StopProb: 0.15},
	{Kind: walk.PPR, Length: 40, StopProb: 0.15, Weighted: true},
	{Kind: walk.DeepWalk, Length: 40, Stepper: walk.StepperAlias},
	{Kind: walk.DeepWalk, Length: 1, Weighted: true},
	{Kind: walk.PPR, Length: 2, StopProb: 0.5},
}

// walksByID runs job on e and returns its walks by walk id.
func walksByID(t testing.TB, e walk.Engine, job walk.Job) map[uint64][]uint32 {
	t.Helper()
	out := map[uint64][]uint32{}
	err := e.Run(context.Background(), []walk.Job{job}, func(c walk.Chunk) error {
		for k, id := range c.WalkIDs {
			out[id] = slices.Clone(c.Vertices[c.Offsets[k]:c.Offsets[k+1]])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", e.Name(), err)
	}
	return out
}

// TestDeltaLayoutHoldsSnapshot: the layout the engine copies to the device
// gives every vertex the delta the snapshot has: its appended edges,
// tombstones, weights and liveness, found through the marks and ranks.
// Scale 17 has 2,048 words: two spans of the layout's passes, on several
// goroutines; the layout of the first snapshot is reused for the second
// (whole: a new base), and so on.
func TestDeltaLayoutHoldsSnapshot(t *testing.T) {
	var l deltaLayout
	for _, scale := range []int{9, 17, 9} {
		snap := liveSnapshot(t, scale, uint64(scale), true)
		pl := layoutSnapshot(t, &l, snap)
		if !pl.whole {
			t.Fatalf("scale %d: a snapshot of another base laid out as a patch: %+v", scale, pl)
		}
		checkLayout(t, &l, snap)
	}
}

// layoutSnapshot lays snap out into l and commits it, as ensureDelta does
// once the copy succeeded.
func layoutSnapshot(t testing.TB, l *deltaLayout, snap *livegraph.Snapshot) deltaPlan {
	t.Helper()
	pl, err := l.prepare(walk.IndexOf(snap), snap.NumVertices())
	if err != nil {
		t.Fatal(err)
	}
	l.commit(pl)
	return pl
}

// checkLayout checks that l's current snapshot is snap, vertex by vertex.
func checkLayout(t testing.TB, l *deltaLayout, snap *livegraph.Snapshot) {
	t.Helper()
	withDelta := 0
	items := l.items()
	for v := range uint32(snap.NumVertices()) {
		dv := snap.Vertex(v)
		h, ok := l.lookup(v)
		if (dv == nil) == ok {
			t.Fatalf("vertex %d: delta %v, in the layout %v", v, dv != nil, ok)
		}
		if dv == nil {
			continue
		}
		withDelta++
		nd := h.ndLive &^ liveBit
		if uint64(h.pos)+uint64(h.n)+uint64(nd) > uint64(len(items)) {
			t.Fatalf("vertex %d: head %+v past the %d items used", v, h, len(items))
		}
		edges := make([]walk.DeltaEdge, h.n)
		for i, it := range items[h.pos : h.pos+h.n] {
			edges[i] = walk.DeltaEdge{Target: it.a, Weight: math.Float32frombits(it.b)}
		}
		dead := make([]walk.Tombstone, nd)
		var dbits uint64
		for i, it := range items[h.pos+h.n : h.pos+h.n+nd] {
			dead[i] = walk.Tombstone{Target: it.a, Upto: it.b}
			dbits |= walk.DeadBit(it.a)
		}
		if !slices.Equal(edges, dv.Edges()) || !slices.Equal(dead, dv.Dead()) || h.deadBits != dbits ||
			h.baseWeight != dv.BaseWeight || h.maxWeight != dv.MaxWeight || (h.ndLive&liveBit != 0) != (dv.Live > 0) {
			t.Fatalf("vertex %d: layout head %+v does not hold its delta %+v", v, h, *dv)
		}
	}
	if withDelta == 0 {
		t.Fatalf("no vertex with a delta")
	}
}

// TestDeltaLayoutIncremental walks a live graph through a sequence of
// snapshots the way the engine copies them: each laid out over the last
// (a patch of the vertices written since the resident level, items only
// for those written since the last snapshot), and checks after every one
// that each vertex reads its delta of that snapshot, that the twin of the
// kernels walks as the CPU engine does on it, and that a plan left
// uncommitted (a copy that failed) changed nothing the last snapshot
// reads. The stream mixes small epochs (patches), one large one (more than
// half the vertices: whole), and a hub written in every epoch, whose
// re-laid items use up the room a whole copy leaves (whole again). The
// live graph folds its own index's patch meanwhile, which must not force
// a whole copy.
func TestDeltaLayoutIncremental(t *testing.T) {
	for _, weighted := range []bool{true, false} {
		t.Run(fmt.Sprintf("weighted=%v", weighted), func(t *testing.T) {
			base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 6, Seed: 11, Weighted: weighted, Name: "gpu-overlay-inc"})
			if err != nil {
				t.Fatal(err)
			}
			lg, err := livegraph.New(base)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := cpu.New(base)
			if err != nil {
				t.Fatal(err)
			}
			var tab []twinAlias
			if weighted {
				tab = twinAliasTable(base)
			}
			applyRandomUpdates(t, lg, base, 1, weighted, 600, 2)
			var l deltaLayout
			var patches, wholes, folds int
			var patchBytes, wholeBytes int64
			for epoch := range 40 {
				prev := lg.Snapshot()
				idx := walk.IndexOf(prev) // keeps the live graph making indexes
				if idx.Pending() == 0 {
					folds++
				}
				switch {
				case epoch == 25:
					applyRandomUpdates(t, lg, base, uint64(100+epoch), weighted, 3000, 1)
				default:
					applyRandomUpdates(t, lg, base, uint64(100+epoch), weighted, 30, 1)
				}
				// The hub: 16 more edges an epoch, all laid out again
				// each time it is written.
				hub := make([]livegraph.Update, 16)
				for j := range hub {
					hub[j] = livegraph.Update{Op: livegraph.Insert, Src: 3, Dst: int64(j + epoch)}
				}
				if err := lg.Apply(1, int64(epoch), hub); err != nil {
					t.Fatal(err)
				}
				snap := lg.Publish()
				if epoch%7 == 3 {
					// A copy that fails: the plan is dropped, and the
					// snapshot copied last is as it was.
					if _, err := l.prepare(walk.IndexOf(snap), snap.NumVertices()); err != nil {
						t.Fatal(err)
					}
					if l.valid {
						checkLayout(t, &l, prev)
					}
				}
				pl := layoutSnapshot(t, &l, snap)
				if pl.whole {
					wholes++
					wholeBytes += l.bytes(pl)
				} else {
					patches++
					patchBytes += l.bytes(pl)
				}
				checkLayout(t, &l, snap)
				if epoch%5 == 0 || epoch == 25 {
					checkTwin(t, ref, tab, &l, snap, weighted)
				}
			}
			// The first, the large epoch and the hub's use of the room.
			if patches < 30 || wholes < 3 || folds == 0 {
				t.Fatalf("%d patches, %d whole copies, %d folds of the live graph's index: want most patches and some of each", patches, wholes, folds)
			}
			if patchBytes/int64(patches) >= wholeBytes/int64(wholes)/2 {
				t.Fatalf("a patch copies %d bytes on average, a whole copy %d", patchBytes/int64(patches), wholeBytes/int64(wholes))
			}
			t.Logf("%d patches, %d bytes each on average; %d whole copies, %d bytes each", patches, patchBytes/int64(patches), wholes, wholeBytes/int64(wholes))
		})
	}
}

// checkTwin walks every algorithm the twin takes from every vertex of
// snap on l (the snapshot copied last) and compares with the CPU engine.
func checkTwin(t testing.TB, ref walk.Engine, tab []twinAlias, l *deltaLayout, snap *livegraph.Snapshot, weighted bool) {
	t.Helper()
	g := snap.Base()
	starts := make([]uint32, 0, snap.NumVertices())
	for v := range uint32(snap.NumVertices()) {
		starts = append(starts, v)
	}
	for _, alg := range overlayAlgorithms {
		if alg.Weighted && !weighted {
			continue
		}
		job := walk.Job{Algorithm: alg, Seed: 17, Starts: starts, FirstWalk: 3, Overlay: snap}
		want := walksByID(t, ref, job)
		at := tab
		if !alg.Weighted {
			at = nil
		}
		recs, dead := vertexRecords(g.Offsets, l, alg.Weighted), twinBitmaps(g, l)
		for k, s := range starts {
			id := job.FirstWalk + uint64(k)
			for _, d := range []*twinDead{nil, dead} {
				if got := twinWalk(g, at, l, recs, d, alg, job.Seed, id, s); !slices.Equal(got, want[id]) {
					t.Fatalf("%s walk %d from %d (dead-edge bitmap %v):\ntwin %v\ncpu  %v", alg, id, s, d != nil, got, want[id])
				}
			}
		}
	}
}

// TestOverlayTwinMatchesCPU checks the kernels' step on a snapshot without
// a device: twinWalk is kernels/overlay.cuh's overlay_step transcribed
// line for line onto the flat layout the engine uploads, and its walks must
// be the CPU engine's, walk by walk, on snapshots with inserts, deletes and
// added vertices (the cuda test TestOverlayWalksMatchCPU checks the kernel
// itself the same way).
func TestOverlayTwinMatchesCPU(t *testing.T) {
	for _, weighted := range []bool{true, false} {
		snap := liveSnapshot(t, 9, 3, weighted)
		if st := snap.Stats(); st.Added == 0 || st.Tombstones == 0 {
			t.Fatalf("the snapshot wants added vertices and deletes: %+v", st)
		}
		g := snap.Base()
		ref, err := cpu.New(g)
		if err != nil {
			t.Fatal(err)
		}
		var l deltaLayout
		layoutSnapshot(t, &l, snap)
		var tab []twinAlias
		if weighted {
			tab = twinAliasTable(g)
		}
		starts := make([]uint32, 0, 2*snap.NumVertices())
		for v := range uint32(snap.NumVertices()) {
			starts = append(starts, v, v)
		}
		for range 200 {
			starts = append(starts, 0, 1, 2) // the stripped vertices: exact scans
		}
		for _, alg := range overlayAlgorithms {
			if alg.Weighted && !weighted {
				continue
			}
			t.Run(fmt.Sprintf("weighted=%v/%s", weighted, alg), func(t *testing.T) {
				job := walk.Job{Algorithm: alg, Seed: 99, Starts: starts, FirstWalk: 5, Overlay: snap}
				want := walksByID(t, ref, job)
				at := tab
				if !alg.Weighted {
					at = nil
				}
				recs, dead := vertexRecords(g.Offsets, &l, alg.Weighted), twinBitmaps(g, &l)
				for k, s := range starts {
					id := job.FirstWalk + uint64(k)
					for _, d := range []*twinDead{nil, dead} {
						if got := twinWalk(g, at, &l, recs, d, alg, job.Seed, id, s); !slices.Equal(got, want[id]) {
							t.Fatalf("walk %d from %d (dead-edge bitmap %v):\ntwin %v\ncpu  %v", id, s, d != nil, got, want[id])
						}
					}
				}
			})
		}
	}
}

// twinAlias is a packed alias entry (ws::AliasEntry).
type twinAlias struct {
	prob             float32
	keep, alt, alias uint32
}

func twinAliasTable(g *graph.Graph) []twinAlias {
	prob, alias := walk.BuildAlias(g)
	tab := make([]twinAlias, len(prob))
	for v := range g.NumVertices() {
		a, b := g.Offsets[v], g.Offsets[v+1]
		for e := a; e < b; e++ {
			tab[e] = twinAlias{prob: prob[e], keep: g.Targets[e], alt: g.Targets[a+uint64(alias[e])], alias: alias[e]}
		}
	}
	return tab
}

func twinPick(g *graph.Graph, tab []twinAlias, a uint64, deg, x, y uint32) uint32 {
	col := uint64(walk.Bounded(x, deg))
	if tab == nil {
		return g.Targets[a+col]
	}
	if e := tab[a+col]; walk.Unit24(y) < e.prob {
		return e.keep
	}
	return tab[a+col].alt
}

// twinPickEdge is pick_static_edge: the target and the base edge taken.
func twinPickEdge(g *graph.Graph, tab []twinAlias, a uint64, deg, x, y uint32) (uint32, uint64) {
	col := a + uint64(walk.Bounded(x, deg))
	if tab == nil {
		return g.Targets[col], col
	}
	if e := tab[col]; walk.Unit24(y) < e.prob {
		return e.keep, col
	}
	return tab[col].alt, a + uint64(tab[col].alias)
}

// twinTomb is find_tombstone: upto+1, or 0 when t has none.
func twinTomb(dead []deltaItem, t uint32) uint64 {
	lo, hi := 0, len(dead)
	for lo < hi {
		m := (lo + hi) >> 1
		if dead[m].a < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(dead) && dead[lo].a == t {
		return uint64(dead[lo].b) + 1
	}
	return 0
}

// twinDead are the dead-edge and dead-item bitmaps (deadEdges, deadItems)
// the kernels with them (_6e) read.
type twinDead struct{ edges, items []uint32 }

func twinBitmaps(g *graph.Graph, l *deltaLayout) *twinDead {
	return &twinDead{deadEdges(g.Offsets, g.Targets, l), deadItems(l)}
}

func twinWalk(g *graph.Graph, tab []twinAlias, l *deltaLayout, recs []uint64, dead *twinDead, alg walk.Algorithm, seed, id uint64, start uint32) []uint32 {
	out := []uint32{start}
	cur := start
	for step := uint32(0); step < uint32(alg.Length); step++ {
		next, ok := twinStep(g, tab, l, recs, dead, alg, seed, id, step, cur)
		if !ok {
			break
		}
		out = append(out, next)
		cur = next
	}
	return out
}

// twinStep is overlay_step: recs are vertexRecords' for the walk's
// weighting, dead the bitmaps (nil: the kernels without them).
func twinStep(g *graph.Graph, tab []twinAlias, l *deltaLayout, recs []uint64, dead *twinDead, alg walk.Algorithm, seed, id uint64, step, cur uint32) (uint32, bool) {
	draw := func(d uint32) (uint32, uint32, uint32, uint32) {
		return walk.Philox(uint32(id), uint32(id>>32), step, d, uint32(seed), uint32(seed>>32))
	}
	ppr := alg.Kind == walk.PPR
	stop := walk.Threshold(alg.StopProb)
	if !ppr {
		stop = 0
	}
	if int(cur) >= len(recs)-1 {
		return 0, false
	}
	r := recs[cur]
	a, b := r&recOffsetMask, recs[cur+1]&recOffsetMask
	deg := uint32(b - a)
	has := r>>recDeltaShift&1 != 0
	first := uint32(0)
	x, y, z, _ := draw(0)
	if ppr {
		if uint64(x) < stop {
			return 0, false
		}
		if has {
			first = 1
			x, y, z, _ = draw(1)
		} else {
			x, y, z = y, z, 0
		}
	}
	st := twinCounts
	if st != nil {
		st.steps++
		if has {
			st.delta++
			if r>>recFilterShift == recFilterAll {
				st.saturated++
			}
		}
	}
	if deg != 0 && uint64(z>>24) < r>>recSideShift&511 {
		t, e := twinPickEdge(g, tab, a, deg, x, y)
		if r>>recFilterShift>>recFilterBit(t)&1 == 0 {
			if st != nil && has {
				st.filterClear++
			}
			return t, true
		}
		if dead != nil && dead.edges[e>>5]>>(e&31)&1 == 0 {
			if st != nil {
				st.bitmapLive++
			}
			return t, true
		}
		if st != nil {
			st.headDead++
		}
	} else if st != nil && has {
		if deg == 0 {
			st.headNoBase++
		} else {
			st.headSide++
		}
	}
	if !has {
		return 0, false
	}
	h, ok := l.lookup(cur)
	if !ok {
		panic(fmt.Sprintf("vertex %d: its record says it has a delta, the layout holds none", cur))
	}
	if h.ndLive&liveBit == 0 {
		return 0, false
	}
	nd := h.ndLive &^ liveBit
	items := l.items()
	de := items[h.pos : h.pos+h.n]
	tomb := items[h.pos+h.n : h.pos+h.n+nd]
	baseDead := func(t uint32) bool { return h.deadBits&deadBit(t) != 0 && twinTomb(tomb, t) != 0 }
	deltaDead := func(i, t uint32) bool {
		if h.deadBits&deadBit(t) == 0 {
			return false
		}
		u := twinTomb(tomb, t)
		return u != 0 && uint64(i) < u-1
	}
	// The attempts' checks: with the bitmaps a target the head's filter
	// holds is looked up there (the edge's bit, the item's), not searched.
	attemptBaseDead := func(t uint32, e uint64) bool {
		if dead == nil {
			return baseDead(t)
		}
		if st != nil && h.deadBits&deadBit(t) != 0 {
			st.lookups++
		}
		return h.deadBits&deadBit(t) != 0 && dead.edges[e>>5]>>(e&31)&1 != 0
	}
	attemptDeltaDead := func(i, t uint32) bool {
		if dead == nil {
			if st != nil && h.deadBits&deadBit(t) != 0 {
				st.searches++
			}
			return deltaDead(i, t)
		}
		if st != nil && h.deadBits&deadBit(t) != 0 {
			st.lookups++
		}
		k := h.pos + i
		return h.deadBits&deadBit(t) != 0 && dead.items[k>>5]>>(k&31)&1 != 0
	}
	weighted := alg.Weighted
	var wb, wd float64
	if weighted {
		wb, wd = h.baseWeight, float64(h.n)*float64(h.maxWeight)
	} else {
		wb, wd = float64(deg), float64(h.n)
	}
	total := wb + wd
	for att := range uint32(walk.MaxRejections) {
		x, y, z, w := draw(first + att)
		if st != nil {
			st.attempts++
		}
		if baseSide(z, total, wb) {
			if deg == 0 {
				continue
			}
			if st != nil && dead == nil && h.deadBits&deadBit(twinPick(g, tab, a, deg, x, y)) != 0 {
				st.searches++
			}
			if t, e := twinPickEdge(g, tab, a, deg, x, y); !attemptBaseDead(t, e) {
				if st != nil {
					st.headBase++
					if att == 0 {
						st.headBandBase++
					}
				}
				return t, true
			}
			continue
		}
		if h.n == 0 {
			continue
		}
		i := walk.Bounded(w, h.n)
		e := de[i]
		if weighted && walk.Unit24(y)*h.maxWeight >= math.Float32frombits(e.b) {
			if st != nil {
				st.rejected++
			}
			continue
		}
		if !attemptDeltaDead(i, e.a) {
			if st != nil {
				st.headDelta++
			}
			return e.a, true
		}
	}
	if st != nil {
		st.scan++
	}
	// overlay_scan.
	wt := func(base bool, i uint64) float64 {
		switch {
		case !weighted:
			return 1
		case base:
			return float64(g.Weights[i])
		default:
			return float64(math.Float32frombits(de[i].b))
		}
	}
	var sum float64
	for e := a; e < b; e++ {
		if !baseDead(g.Targets[e]) {
			sum += wt(true, e)
		}
	}
	for i := range de {
		if !deltaDead(uint32(i), de[i].a) {
			sum += wt(false, uint64(i))
		}
	}
	x, y, _, _ = draw(first + walk.FallbackDraw)
	u := (float64(x) + float64(y)*0x1p-32) * 0x1p-32 * sum
	last, found := uint32(0), false
	for e := a; e < b; e++ {
		t := g.Targets[e]
		if baseDead(t) {
			continue
		}
		if u -= wt(true, e); u < 0 {
			return t, true
		}
		last, found = t, true
	}
	for i := range de {
		t := de[i].a
		if deltaDead(uint32(i), t) {
			continue
		}
		if u -= wt(false, uint64(i)); u < 0 {
			return t, true
		}
		last, found = t, true
	}
	return last, found
}

// BenchmarkDeltaLayout measures the host's side of a snapshot's copy to
// the device, without a device:
//
//	go test -run X -bench DeltaLayout -benchtime 20x ./gpu
//
// R-MAT scale 18, edge factor 16, undirected; a delta of 10% of its edges
// (inserts, a tenth deletes of a base edge; endpoints drawn by degree, as
// engagement attaches, or uniformly, as scripts/stage-load.sh draws them),
// then per iteration one record of 4,096 more updates and a snapshot,
// laid out as the engine does (patch: over the last, whole: from scratch).
// copy-B/op is what goes to the device.
func BenchmarkDeltaLayout(b *testing.B) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 18, EdgeFactor: 16, Seed: 1, Undirected: true, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	E := int64(g.NumEdges())
	rng := rand.New(rand.NewPCG(1, 2))
	var byDegree func() int64
	record := func(n int) []livegraph.Update {
		ups := make([]livegraph.Update, 0, n)
		for range n {
			if rng.IntN(10) == 0 {
				s := uint32(byDegree())
				adj := g.Neighbors(s)
				ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
				continue
			}
			ups = append(ups, livegraph.Update{Op: livegraph.Insert, Src: byDegree(), Dst: byDegree()})
		}
		return ups
	}
	for _, c := range []struct{ draw, mode string }{{"degree", "patch"}, {"degree", "whole"}, {"uniform", "patch"}, {"uniform", "whole"}} {
		mode := c.mode
		byDegree = func() int64 { return int64(g.Targets[rng.Int64N(E)]) }
		if c.draw == "uniform" {
			byDegree = func() int64 {
				for {
					if v := rng.Int64N(int64(g.NumVertices())); g.Degree(uint32(v)) > 0 {
						return v
					}
				}
			}
		}
		b.Run(c.draw+"/"+mode, func(b *testing.B) {
			l, err := livegraph.New(g)
			if err != nil {
				b.Fatal(err)
			}
			off := int64(0)
			for range E / 10 / (1 << 16) {
				if err := l.Apply(0, off, record(1<<16)); err != nil {
					b.Fatal(err)
				}
				off++
			}
			var lay deltaLayout
			snap := l.Publish()
			layoutSnapshot(b, &lay, snap)
			var bytes int64
			var wholes int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := l.Apply(0, off, record(4096)); err != nil {
					b.Fatal(err)
				}
				off++
				snap = l.Publish()
				x := walk.IndexOf(snap)
				if mode == "whole" {
					lay.valid = false
				}
				b.StartTimer()
				pl, err := lay.prepare(x, snap.NumVertices())
				if err != nil {
					b.Fatal(err)
				}
				lay.commit(pl)
				bytes += lay.bytes(pl)
				if pl.whole {
					wholes++
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "copy-B/op")
			b.ReportMetric(float64(wholes)/float64(b.N), "whole/op")
			b.ReportMetric(float64(walk.IndexOf(snap).Len()), "vertices-with-delta")
		})
	}
}

// TestVertexRecords checks the host twin of the vertex records on a
// snapshot with inserts, deletes and added vertices: each record's offset
// is the base's, a vertex without a delta always takes the base side with
// an empty filter, and a vertex with one has the largest side threshold
// that keeps every side word below it on the base side and a filter that
// holds each of its tombstones' targets.
func TestVertexRecords(t *testing.T) {
	for _, weighted := range []bool{true, false} {
		snap := liveSnapshot(t, 9, 3, weighted)
		g := snap.Base()
		var l deltaLayout
		layoutSnapshot(t, &l, snap)
		nv := g.NumVertices()
		recs := vertexRecords(g.Offsets, &l, weighted)
		if len(recs) != recordCount(len(l.words()), nv)+1 || len(recs) < snap.NumVertices()+1 {
			t.Fatalf("%d records for %d vertices (%d in the base)", len(recs), snap.NumVertices(), nv)
		}
		items := l.items()
		var delta, decided int
		for v, r := range recs {
			if a := g.Offsets[min(v, nv)]; r&recOffsetMask != a {
				t.Fatalf("vertex %d: offset %d, the base's %d", v, r&recOffsetMask, a)
			}
			if v == len(recs)-1 {
				if r != r&recOffsetMask {
					t.Fatalf("the end record %#x holds more than an offset", r)
				}
				continue
			}
			s, filter := r>>recSideShift&511, r>>recFilterShift
			h, has := l.lookup(uint32(v))
			if has != (r>>recDeltaShift&1 != 0) {
				t.Fatalf("vertex %d: record %#x, delta in the layout %v", v, r, has)
			}
			if !has {
				if s != recSideAll || filter != 0 {
					t.Fatalf("vertex %d without a delta: side %d, filter %#x", v, s, filter)
				}
				continue
			}
			delta++
			if h.ndLive&liveBit == 0 {
				if s != 0 || filter != recFilterAll {
					t.Fatalf("vertex %d without a live edge: side %d, filter %#x", v, s, filter)
				}
				continue
			}
			var wb, wd float64
			if weighted {
				wb, wd = h.baseWeight, float64(float64(h.n)*float64(h.maxWeight))
			} else {
				wb, wd = float64(recs[v+1]&recOffsetMask-r&recOffsetMask), float64(h.n)
			}
			total := wb + wd
			if s > recSideAll || s > 0 && !baseSide(uint32(s<<24-1), total, wb) || s < recSideAll && baseSide(uint32((s+1)<<24-1), total, wb) {
				t.Fatalf("vertex %d: side %d for base %v of %v", v, s, wb, total)
			}
			if s > 0 {
				decided++
			}
			nd := h.ndLive &^ liveBit
			for _, it := range items[h.pos+h.n : h.pos+h.n+nd] {
				if filter>>recFilterBit(it.a)&1 == 0 {
					t.Fatalf("vertex %d: filter %#x lacks tombstone target %d", v, filter, it.a)
				}
			}
		}
		if delta == 0 || decided == 0 {
			t.Fatalf("weighted=%v: %d records with a delta, %d with a side threshold", weighted, delta, decided)
		}
	}
}
