package livegraph

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// statsLive is a weighted base with a delta that exercises every case of a
// step: base vertices with no delta, with appended edges, with base and
// appended edges deleted and re-inserted, added vertices (one a dead end),
// and a hub whose edges are nearly all deleted, so that most of its steps
// end in the exact fallback scan.
func statsLive(t testing.TB) (*Live, *Snapshot) {
	t.Helper()
	var edges []graph.Edge
	for i := int64(1); i <= 10; i++ {
		edges = append(edges, graph.Edge{Src: 0, Dst: i, Weight: float32(i)}, graph.Edge{Src: i, Dst: 0, Weight: float32(11 - i)})
		edges = append(edges, graph.Edge{Src: i, Dst: i%10 + 1, Weight: float32(1 + i%3)})
	}
	const hub = 11
	for i := int64(12); i < 212; i++ {
		edges = append(edges, graph.Edge{Src: hub, Dst: i, Weight: 1 + float32(i%5)})
		edges = append(edges, graph.Edge{Src: i, Dst: hub, Weight: 1})
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live-stats", Weighted: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	ins := func(s, d int64, w float32) Update {
		return Update{Op: Insert, Src: s, Dst: d, Weight: w, Has: HasWeight}
	}
	del := func(s, d int64) Update { return Update{Op: Delete, Src: s, Dst: d} }
	recs := [][]Update{
		{ins(0, 3, 20), ins(0, 5, 0.5), ins(0, 212, 4), ins(212, 213, 1), ins(212, 0, 2), ins(212, 212, 3)},
		{del(0, 2), del(0, 3), ins(0, 3, 6), ins(0, 2, 1), del(1, 0), del(1, 2), ins(1, 5, 2)},
		{ins(2, 7, 9), ins(2, 7, 1), del(2, 7), ins(2, 7, 3), ins(4, 214, 1), ins(214, 4, 1)},
		// 213 is an added dead end; vertex 5 loses all its edges and gets none.
		{del(5, 0), del(5, 6)},
	}
	var hubDel []Update
	for i := int64(12); i < 210; i++ {
		hubDel = append(hubDel, del(hub, i))
	}
	recs = append(recs, hubDel, []Update{ins(hub, 0, 1)})
	for i, r := range recs {
		if err := l.Apply(0, int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
	return l, l.Publish()
}

// TestOverlayStepsMatchRebuiltGraph checks, vertex by vertex, that a step
// on base+delta takes each edge with the probability the rebuilt
// (compacted) graph gives it, for uniform and weighted DeepWalk and PPR.
func TestOverlayStepsMatchRebuiltGraph(t *testing.T) {
	_, snap := statsLive(t)
	stepsMatchCompaction(t, snap, 20000)
}

// stepsMatchCompaction is TestOverlayStepsMatchRebuiltGraph's check on
// snap, perVertex first steps from each vertex.
func stepsMatchCompaction(t *testing.T, snap *Snapshot, perVertex int) {
	rebuilt, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt.IDs != nil || rebuilt.NumVertices() != snap.NumVertices() {
		t.Fatal("the test wants the rebuilt graph numbered as the snapshot")
	}
	algs := []walk.Algorithm{
		{Kind: walk.DeepWalk, Length: 1},
		{Kind: walk.DeepWalk, Length: 1, Weighted: true},
		{Kind: walk.PPR, Length: 1, Weighted: true, StopProb: 0.3},
	}
	for _, alg := range algs {
		t.Run(fmt.Sprintf("%s-weighted=%v", alg.Kind, alg.Weighted), func(t *testing.T) {
			e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			var starts []uint32
			for v := range snap.NumVertices() {
				for range perVertex {
					starts = append(starts, uint32(v))
				}
			}
			counts := make([]map[uint32]int, snap.NumVertices())
			for v := range counts {
				counts[v] = map[uint32]int{}
			}
			err = e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 9, Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
				for k := range c.Len() {
					w := c.Walk(k)
					if len(w) == 2 {
						counts[w[0]][w[1]]++
					} else {
						counts[w[0]][graph.NoVertex]++ // stopped
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for v := range snap.NumVertices() {
				stattest.ChiSquare(t, fmt.Sprintf("vertex %d", v), counts[v], stepProbs(rebuilt, alg, uint32(v)))
			}
		})
	}
}

// stepProbs is the probability of each step from v on g (graph.NoVertex:
// the walk ends there).
func stepProbs(g *graph.Graph, alg walk.Algorithm, v uint32) map[uint32]float64 {
	probs := map[uint32]float64{}
	adj := g.Neighbors(v)
	var sum float64
	for i := range adj {
		sum += weightOf(g, alg, uint64(i)+g.Offsets[v])
	}
	stop := 0.0
	if alg.Kind == walk.PPR && len(adj) > 0 {
		stop = alg.StopProb
	}
	if len(adj) == 0 {
		stop = 1
	}
	if stop > 0 {
		probs[graph.NoVertex] = stop
	}
	for i, d := range adj {
		probs[d] += (1 - stop) * weightOf(g, alg, uint64(i)+g.Offsets[v]) / sum
	}
	return probs
}

// TestOverlayLaterStepsMatchRebuiltGraph is TestOverlayStepsMatchRebuiltGraph
// for the steps after a walk's first: per vertex reached by a first step, a
// chi-square of the second steps taken from it against the compacted
// graph's probabilities. The CPU engine's ring draws a later DeepWalk step
// on the fused table before it knows whether the vertex has a delta and
// decides the side a round later (walk/cpu/ringoverlay.go), a path a
// walk's first step does not take.
func TestOverlayLaterStepsMatchRebuiltGraph(t *testing.T) {
	_, snap := statsLive(t)
	rebuilt, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []walk.Algorithm{
		{Kind: walk.DeepWalk, Length: 2},
		{Kind: walk.DeepWalk, Length: 2, Weighted: true},
		{Kind: walk.PPR, Length: 2, Weighted: true, StopProb: 0.3},
	} {
		t.Run(fmt.Sprintf("%s-weighted=%v", alg.Kind, alg.Weighted), func(t *testing.T) {
			e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			e.PrepareTables()
			// Fewer walks from the hub's 200 leaves, which all step to
			// the hub, where nearly every edge is deleted and most steps
			// end in the exact scan: 250 from each still bring it 50,000.
			var starts []uint32
			for v := range snap.NumVertices() {
				n := 50000
				if v >= 12 && v < 212 {
					n = 250
				}
				for range n {
					starts = append(starts, uint32(v))
				}
			}
			counts := make([]map[uint32]int, snap.NumVertices())
			for v := range counts {
				counts[v] = map[uint32]int{}
			}
			err = e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 11, Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
				for k := range c.Len() {
					switch w := c.Walk(k); len(w) {
					case 3:
						counts[w[1]][w[2]]++
					case 2:
						counts[w[1]][graph.NoVertex]++ // stopped after one step
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tested := 0
			for v := range snap.NumVertices() {
				probs := stepProbs(rebuilt, alg, uint32(v))
				n := 0
				for _, c := range counts[v] {
					n += c
				}
				// Enough samples for every outcome's expected count to
				// be 20 or more, where a chi-square holds.
				if len(probs) < 2 || n < 20*2*len(probs) {
					continue
				}
				tested++
				stattest.ChiSquare(t, fmt.Sprintf("vertex %d", v), counts[v], probs)
			}
			t.Logf("%d vertices tested", tested)
			if tested < 10 {
				t.Fatalf("only %d vertices reached often enough to test", tested)
			}
		})
	}
}

// TestOverlayNode2VecMatchesRebuiltGraph checks Node2Vec's second step on
// base+delta, for every (previous, current) pair walked often enough,
// against the exact second-order probabilities of the rebuilt graph: the
// class of a candidate (return, neighbour of the previous vertex, outward)
// must be taken in the snapshot, appended and deleted edges included.
func TestOverlayNode2VecMatchesRebuiltGraph(t *testing.T) {
	l, _ := statsLive(t)
	// Base edges 0->7 and 0->8 deleted for good: 6->7 and 7->8 become
	// outward from 0, where the base alone says neighbour.
	if err := l.Apply(0, 6, []Update{{Op: Delete, Src: 0, Dst: 7}, {Op: Delete, Src: 0, Dst: 8}}); err != nil {
		t.Fatal(err)
	}
	snap := l.Publish()
	rebuilt, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, weighted := range []bool{false, true} {
		t.Run(fmt.Sprintf("weighted=%v", weighted), func(t *testing.T) {
			alg := walk.Algorithm{Kind: walk.Node2Vec, Length: 2, Weighted: weighted, P: 0.25, Q: 4}
			e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			var starts []uint32
			for v := range snap.NumVertices() {
				for range 6000 {
					starts = append(starts, uint32(v))
				}
			}
			type pair struct{ prev, cur uint32 }
			counts := map[pair]map[uint32]int{}
			err = e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 6, Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
				for k := range c.Len() {
					w := c.Walk(k)
					if len(w) < 2 {
						continue
					}
					if !snapshotHasEdge(snap, w[0], w[1]) {
						t.Errorf("walk %v: first step on an edge the snapshot does not hold", w)
					}
					p := pair{w[0], w[1]}
					if counts[p] == nil {
						counts[p] = map[uint32]int{}
					}
					next := uint32(graph.NoVertex)
					if len(w) == 3 {
						next = w[2]
					}
					counts[p][next]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			bias := [3]float64{1 / alg.P, 1, 1 / alg.Q}
			tested, viaDelta := 0, 0
			for p, c := range counts {
				adj := rebuilt.Neighbors(p.cur)
				if len(adj) == 0 {
					if len(c) != 1 || c[graph.NoVertex] == 0 {
						t.Errorf("pair %v: dead end %d stepped on: %v", p, p.cur, c)
					}
					continue
				}
				probs := map[uint32]float64{}
				var sum float64
				deltaClass := false
				for i, x := range adj {
					class := 2
					switch {
					case x == p.prev:
						class = 0
					case rebuiltHasEdge(rebuilt, p.prev, x):
						class = 1
					}
					if class == 1 && !baseHasLiveEdge(snap, p.prev, x) || class == 2 && baseHasEdge(snap.Base(), p.prev, x) {
						deltaClass = true // the delta changed this candidate's class
					}
					w := weightOf(rebuilt, alg, rebuilt.Offsets[p.cur]+uint64(i)) * bias[class]
					probs[x] += w
					sum += w
				}
				n, minExp := 0, math.Inf(1)
				for _, k := range c {
					n += k
				}
				for x := range probs {
					probs[x] /= sum
					minExp = min(minExp, probs[x]*float64(n))
				}
				if minExp < 5 {
					continue // too few walks through this pair for the test
				}
				tested++
				if deltaClass {
					viaDelta++
				}
				stattest.ChiSquare(t, fmt.Sprintf("prev %d cur %d", p.prev, p.cur), c, probs)
			}
			if tested < 20 || viaDelta < 3 {
				t.Fatalf("tested %d pairs, %d whose classes the delta changed: the test checks too little", tested, viaDelta)
			}
		})
	}
}

// rebuiltHasEdge reports whether g has an edge u->v (its targets sorted).
func rebuiltHasEdge(g *graph.Graph, u, v uint32) bool {
	_, ok := slices.BinarySearch(g.Neighbors(u), v)
	return ok
}

// baseHasEdge reports whether base g has an edge u->v; u may be beyond it.
func baseHasEdge(g *graph.Graph, u, v uint32) bool {
	return int(u) < g.NumVertices() && slices.Contains(g.Neighbors(u), v)
}

// baseHasLiveEdge reports whether the snapshot's base holds a live u->v.
func baseHasLiveEdge(s *Snapshot, u, v uint32) bool {
	if !baseHasEdge(s.Base(), u, v) {
		return false
	}
	dv := s.Vertex(u)
	return dv == nil || !dv.BaseDead(v)
}

func weightOf(g *graph.Graph, alg walk.Algorithm, e uint64) float64 {
	if alg.Weighted {
		return float64(g.Weights[e])
	}
	return 1
}

// TestEmptyOverlayWalksAsBase checks that a job on an empty snapshot takes
// the engine's usual path: the same walks as without one.
func TestEmptyOverlayWalksAsBase(t *testing.T) {
	l, _ := statsLive(t)
	empty, err := New(l.Base())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []bool{false, true} {
		alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 30, Weighted: w}
		if !slices.Equal(walkAll(t, l.Base(), empty.Snapshot(), alg, 2), walkAll(t, l.Base(), nil, alg, 2)) {
			t.Fatalf("weighted=%v: walks on an empty snapshot differ from walks on the base", w)
		}
	}
}

// TestOverlayRefusals checks that what does not read a delta yet says so
// instead of walking the base as if nothing changed: other algorithms and
// samplers on the CPU engine, every job on an engine without overlay
// support (ValidateJobs, which the GPU engine calls), a snapshot of another
// graph, and starts beyond the snapshot's vertices.
func TestOverlayRefusals(t *testing.T) {
	l, snap := statsLive(t)
	e, err := cpu.New(l.Base())
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(stattest.Graph(t))
	if err != nil {
		t.Fatal(err)
	}
	dw := walk.Algorithm{Kind: walk.DeepWalk, Length: 5}
	cases := []struct {
		name string
		job  walk.Job
		err  string
	}{
		{"node2vec zprs", walk.Job{Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 5, P: 1, Q: 2, Stepper: walk.StepperZPRS}, Starts: []uint32{0}, Overlay: snap},
			"the zprs sampler does not read a live graph's delta yet (node2vec's rejection sampler does)"},
		{"zprs", walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Stepper: walk.StepperZPRS}, Starts: []uint32{0}, Overlay: snap},
			"the zprs sampler does not read a live graph's delta yet"},
		{"another base", walk.Job{Algorithm: dw, Starts: []uint32{0}, Overlay: other.Snapshot()},
			`snapshot is over graph "stats"`},
		{"start beyond", walk.Job{Algorithm: dw, Starts: []uint32{uint32(snap.NumVertices())}, Overlay: snap},
			fmt.Sprintf("beyond %d vertices", snap.NumVertices())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.Run(context.Background(), []walk.Job{c.job}, func(walk.Chunk) error { return nil })
			if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Run = %v, want an ErrInvalidAlgorithm containing %q", err, c.err)
			}
		})
	}
	if err := walk.CheckOverlay(e, walk.Algorithm{Kind: walk.MetaPath, Length: 3, Schema: []uint8{0}, Stepper: walk.StepperZPRS}); err == nil || !strings.Contains(err.Error(), "the zprs sampler does not read a live graph's delta yet (metapath's auto sampler does)") {
		t.Fatalf("CheckOverlay(metapath zprs) = %v", err)
	}
	if err := walk.CheckOverlay(e, walk.Algorithm{Kind: walk.MetaPath, Length: 3, Schema: []uint8{0}}); err != nil {
		t.Fatalf("CheckOverlay(metapath) = %v", err)
	}
	if err := walk.CheckOverlay(e, walk.Algorithm{Kind: walk.Temporal, Length: 3}); err != nil {
		t.Fatalf("CheckOverlay(temporal) = %v", err)
	}
	if err := walk.CheckOverlay(e, dw); err != nil {
		t.Fatalf("CheckOverlay(deepwalk) = %v", err)
	}
	err = walk.ValidateJobs(l.Base(), []walk.Job{{Algorithm: dw, Starts: []uint32{0}, Overlay: snap}})
	if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), "this engine does not walk a live graph's delta yet") {
		t.Fatalf("ValidateJobs with an overlay = %v", err)
	}
	// Starting on an added vertex is fine.
	added, _ := snap.DenseID(212)
	if err := e.Run(context.Background(), []walk.Job{{Algorithm: dw, Starts: []uint32{added}, Overlay: snap}}, func(walk.Chunk) error { return nil }); err != nil {
		t.Fatalf("walk from an added vertex: %v", err)
	}
}

// TestWalksBesideApplier walks snapshots while an applier goroutine keeps
// inserting, deleting and publishing: under -race this checks that walkers
// and the applier share no memory one writes while the other reads, and
// every walk must stay on edges its snapshot holds.
func TestWalksBesideApplier(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	m, base := newModel(t, variants[1], 80, 600, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	e, err := cpu.New(base, cpu.WithWorkers(2), cpu.WithChunkSize(16))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([][]Update, 3000)
	for i := range recs {
		recs[i] = m.randomRecord(rng)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, r := range recs {
			if err := l.Apply(0, int64(i), r); err != nil {
				t.Error(err)
				return
			}
			if i%3 == 0 {
				l.Publish()
			}
		}
		l.Publish()
	}()
	for round := 0; ; round++ {
		snap := l.Snapshot()
		starts := make([]uint32, snap.NumVertices())
		for i := range starts {
			starts[i] = uint32(i)
		}
		alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 10, Weighted: round%2 == 0}
		err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: uint64(round), Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
			for k := range c.Len() {
				w := c.Walk(k)
				for i := 1; i < len(w); i++ {
					if !snapshotHasEdge(snap, w[i-1], w[i]) {
						return fmt.Errorf("walk %d steps %d -> %d, not a live edge of snapshot %d", c.WalkIDs[k], w[i-1], w[i], snap.Epoch())
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			if snap == l.Snapshot() {
				t.Logf("%d rounds of walks beside the applier", round+1)
				return
			}
		default:
		}
	}
}

// snapshotHasEdge reports whether u -> v is a live edge of s.
func snapshotHasEdge(s *Snapshot, u, v uint32) bool {
	dv := s.Vertex(u)
	b := s.Base()
	if int(u) < b.NumVertices() && b.HasEdge(u, v) && (dv == nil || !dv.BaseDead(v)) {
		return true
	}
	if dv != nil {
		for i, e := range dv.Edges() {
			if e.Target == v && !dv.DeltaDead(i) {
				return true
			}
		}
	}
	return false
}
