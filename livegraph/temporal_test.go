package livegraph

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// timedLive is a timed, weighted base with a delta that touches every case
// of a temporal step on a snapshot: base edges tombstoned, a target deleted
// and inserted again at another time, a second edge to a target the base
// has at another time, an appended edge deleted and inserted again, an
// added vertex with edges of its own, and vertices without a delta. Times
// are in [0, 100), with ties.
func timedLive(t testing.TB) (*Live, *Snapshot) {
	t.Helper()
	r := rand.New(rand.NewPCG(38, 37))
	var edges []graph.Edge
	for v := int64(0); v < 4; v++ {
		for d := int64(4); d < 24; d++ {
			edges = append(edges, graph.Edge{Src: v, Dst: d, Time: r.Int64N(100), Weight: 0.5 + 4*r.Float32()})
		}
	}
	for d := int64(4); d < 24; d++ {
		for k := range int64(3) {
			edges = append(edges, graph.Edge{Src: d, Dst: k, Time: r.Int64N(100), Weight: 1 + float32(k)})
		}
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live-temporal", Weighted: true, Timed: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	ins := func(s, d, tm int64, w float32) Update {
		return Update{Op: Insert, Src: s, Dst: d, Weight: w, Time: tm, Has: HasWeight | HasTime}
	}
	del := func(s, d int64) Update { return Update{Op: Delete, Src: s, Dst: d} }
	recs := [][]Update{
		{del(0, 5), del(0, 6), ins(0, 6, 50, 2), ins(0, 7, 3, 5), ins(0, 7, 97, 1), ins(0, 30, 20, 3), ins(0, 31, 60, 0.5)},
		{ins(1, 9, 40, 2), del(1, 9), ins(1, 9, 61, 2.5), ins(1, 2, 50, 1), ins(1, 3, 50, 4)},
		{ins(30, 0, 30, 1), ins(30, 1, 25, 2), ins(30, 4, 80, 3), ins(31, 2, 70, 1)},
		{del(2, 4), del(2, 5), del(2, 6), del(2, 7), ins(2, 8, 44, 3)},
	}
	for i, rec := range recs {
		if err := l.Apply(0, int64(i), rec); err != nil {
			t.Fatal(err)
		}
	}
	return l, l.Publish()
}

// chiSquareKeyed is stattest.ChiSquare over (target, time) keys.
func chiSquareKeyed(t *testing.T, name string, counts map[[2]int64]int, probs map[[2]int64]float64) {
	t.Helper()
	ids := map[[2]int64]uint32{}
	id := func(k [2]int64) uint32 {
		if i, ok := ids[k]; ok {
			return i
		}
		ids[k] = uint32(len(ids))
		return ids[k]
	}
	c, p := map[uint32]int{}, map[uint32]float64{}
	for k, n := range counts {
		c[id(k)] = n
	}
	for k, q := range probs {
		p[id(k)] = q
	}
	stattest.ChiSquare(t, name, c, p)
}

// TestOverlayTemporalMatchesRebuiltGraph checks temporal steps on a
// snapshot against the exact probabilities of the rebuilt (compacted)
// graph: first steps from vertices with a delta, an added vertex and one
// without, for every bias, both directions, with a start time and a gap,
// weighted or not; and second steps, whose bound is the first edge's time,
// grouped by (vertex, time). Temporal Node2Vec's second step takes its
// class on the snapshot. Every walk's times must be monotone and on edges
// the snapshot holds.
func TestOverlayTemporalMatchesRebuiltGraph(t *testing.T) {
	_, snap := timedLive(t)
	rebuilt, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	added, _ := snap.DenseID(30)
	starts := []uint32{0, 1, 2, added, 3}
	cases := map[string]walk.Algorithm{
		"uniform":              {Time: walk.TimeParams{Start: 30, HasStart: true}},
		"uniform-gap":          {Time: walk.TimeParams{Start: 20, HasStart: true, MaxGap: 40, HasMaxGap: true}},
		"linear":               {Time: walk.TimeParams{Bias: walk.TimeLinear}},
		"exponential":          {Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 15, Start: 10, HasStart: true}},
		"backward-linear":      {Time: walk.TimeParams{Bias: walk.TimeLinear, Backward: true, Start: 80, HasStart: true}},
		"backward-exponential": {Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 8, Backward: true, MaxGap: 50, HasMaxGap: true, Start: 90, HasStart: true}},
		"node2vec":             {P: 0.25, Q: 4, Time: walk.TimeParams{Bias: walk.TimeLinear}},
		"node2vec-uniform":     {P: 0.5, Q: 2, Time: walk.TimeParams{Start: 10, HasStart: true}},
		"node2vec-exponential": {P: 2, Q: 0.5, Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 15}},
	}
	const perStart = 30_000
	for name, a := range cases {
		for _, weighted := range []bool{false, true} {
			a.Kind, a.Length, a.Weighted = walk.Temporal, 2, weighted
			t.Run(fmt.Sprintf("%s/weighted=%v", name, weighted), func(t *testing.T) {
				var js []uint32
				for _, s := range starts {
					for range perStart {
						js = append(js, s)
					}
				}
				first := map[uint32]map[[2]int64]int{}
				type state struct {
					prev, cur uint32
					t         int64
				}
				second := map[state]map[[2]int64]int{}
				err := e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 11, Starts: js, Overlay: snap, WithTimes: true}}, func(c walk.Chunk) error {
					for k := range c.Len() {
						w, tm := c.Walk(k), c.Times[c.Offsets[k]:c.Offsets[k+1]]
						for i := 1; i < len(w); i++ {
							if !snapshotHasEdge(snap, w[i-1], w[i]) {
								t.Errorf("walk %v: step %d on an edge the snapshot does not hold", w, i)
							}
							if i > 1 && (!a.Time.Backward && tm[i] < tm[i-1] || a.Time.Backward && tm[i] > tm[i-1]) {
								t.Errorf("walk %v times %v: step %d goes against time", w, tm, i)
							}
						}
						if first[w[0]] == nil {
							first[w[0]] = map[[2]int64]int{}
						}
						if len(w) < 2 {
							first[w[0]][[2]int64{-1, 0}]++
							continue
						}
						first[w[0]][[2]int64{int64(w[1]), tm[1]}]++
						s := state{w[0], w[1], tm[1]}
						if second[s] == nil {
							second[s] = map[[2]int64]int{}
						}
						if len(w) == 3 {
							second[s][[2]int64{int64(w[2]), tm[2]}]++
						} else {
							second[s][[2]int64{-1, 0}]++
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range starts {
					probs := stattest.TemporalStep(rebuilt, a, v, a.Time.Bound(), a.Time.HasStart, graph.NoVertex)
					if len(probs) == 0 {
						probs = map[[2]int64]float64{{-1, 0}: 1}
					}
					chiSquareKeyed(t, fmt.Sprintf("first step from %d", v), first[v], probs)
				}
				tested := 0
				for s, c := range second {
					probs := stattest.TemporalStep(rebuilt, a, s.cur, s.t, true, s.prev)
					if len(probs) == 0 {
						probs = map[[2]int64]float64{{-1, 0}: 1}
					}
					n := 0
					for _, k := range c {
						n += k
					}
					if slices.ContainsFunc(mapValues(probs), func(p float64) bool { return p*float64(n) < 5 }) {
						continue // too few walks through this state for the test
					}
					tested++
					chiSquareKeyed(t, fmt.Sprintf("second step from %d at %d after %d", s.cur, s.t, s.prev), c, probs)
				}
				if tested < 10 {
					t.Errorf("only %d second-step states had enough walks", tested)
				}
			})
		}
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var vs []V
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

// TestOverlayTemporalWithoutDeltaIsBase: walks that meet no delta are the
// base's walks, byte for byte (the same draws), and a snapshot that does
// not give its appended edges' times is refused for temporal walks.
func TestOverlayTemporalWithoutDeltaIsBase(t *testing.T) {
	_, snap := timedLive(t)
	e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	// Vertex 3 has no delta, nor do its targets 4..23, whose edges go to
	// 0..2 (with a delta): walks of one step never meet one.
	a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: true, Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 20}}
	starts := make([]uint32, 1000)
	for i := range starts {
		starts[i] = 3
	}
	collect := func(j walk.Job) [][]uint32 {
		out := make([][]uint32, len(j.Starts))
		if err := e.Run(context.Background(), []walk.Job{j}, func(c walk.Chunk) error {
			for k := range c.Len() {
				out[c.WalkIDs[k]] = slices.Clone(c.Walk(k))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	onBase := collect(walk.Job{Algorithm: a, Seed: 5, Starts: starts})
	onSnap := collect(walk.Job{Algorithm: a, Seed: 5, Starts: starts, Overlay: snap})
	if !slices.EqualFunc(onBase, onSnap, slices.Equal) {
		t.Fatal("walks from a vertex without a delta differ from the base's")
	}
	err = e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 5, Starts: starts, Overlay: untimed{snap}}}, func(walk.Chunk) error { return nil })
	if err == nil {
		t.Fatal("a snapshot without its appended edges' times walked temporal walks")
	}
}

// untimed hides a snapshot's DeltaTimes.
type untimed struct{ walk.Overlay }

// cellLive is a timed, weighted base whose vertex 0 has edges in clusters
// of times around the boundaries of the exponential bias's time cells for
// scale 2 (G = walk.ExpCell(2) = 512: cells start at multiples of 512),
// with sparse edges between them, and a delta on vertex 0 that tombstones
// base edges on both sides of each boundary and appends edges there
// (new targets, a base target at another time, an appended edge deleted).
func cellLive(t testing.TB) (*Live, *Snapshot) {
	t.Helper()
	r := rand.New(rand.NewPCG(38, 512))
	var edges []graph.Edge
	d := int64(1)
	add := func(tm int64) {
		edges = append(edges, graph.Edge{Src: 0, Dst: d, Time: tm, Weight: 0.25 + 4*r.Float32()})
		edges = append(edges, graph.Edge{Src: d, Dst: 0, Time: tm, Weight: 1})
		d++
	}
	for _, b := range []int64{512, 1024, 1536} {
		for range 24 {
			add(b - 10 + r.Int64N(20)) // ties too
		}
	}
	for tm := int64(0); tm < 2048; tm += 97 {
		add(tm)
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live-cells", Weighted: true, Timed: true, DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	var ups []Update
	ins := func(dst, tm int64, w float32) {
		ups = append(ups, Update{Op: Insert, Src: 0, Dst: dst, Weight: w, Time: tm, Has: HasWeight | HasTime})
	}
	for i, e := range edges {
		if e.Src == 0 && i%14 == 0 {
			ups = append(ups, Update{Op: Delete, Src: 0, Dst: e.Dst})
		}
	}
	for _, b := range []int64{512, 1024, 1536} {
		for k := range int64(8) {
			ins(d+k, b-7+2*k, 0.5+float32(k))
		}
		ins(2, b+1, 3)     // a base target at another time
		ins(d+100, b-1, 2) // appended, then deleted
		ups = append(ups, Update{Op: Delete, Src: 0, Dst: d + 100})
		d += 8
	}
	if err := l.Apply(0, 0, ups); err != nil {
		t.Fatal(err)
	}
	return l, l.Publish()
}

// TestOverlayTemporalExponentialAcrossCells checks the exponential draw on
// a delta's list where windows span several time cells with mass on both
// sides of a boundary: first steps from vertex 0 (with a delta) bounded
// just before, at and after cell boundaries, forward and backward, with and
// without a gap that cuts the window inside a cell, weighted or not,
// against the rebuilt graph's exact probabilities, by (external target,
// time): the snapshot and the rebuilt graph number added vertices apart.
// Keys too rare for the test (expected count under 5) are pooled into one.
func TestOverlayTemporalExponentialAcrossCells(t *testing.T) {
	_, snap := cellLive(t)
	rebuilt, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	e, err := cpu.New(snap.Base(), cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	if g := walk.ExpCell(2); g != 512 {
		t.Fatalf("ExpCell(2) = %d, the test's clusters assume 512", g)
	}
	type bound struct {
		start, gap int64
		backward   bool
		far        bool // the near end alone: the window's other cells weigh next to nothing
	}
	var bounds []bound
	for _, b := range []int64{512, 1024, 1536} {
		for _, o := range []int64{-9, -3, 0, 4} {
			bounds = append(bounds, bound{start: b + o}, bound{start: b - o, backward: true})
		}
		bounds = append(bounds, bound{start: b - 8, gap: 11}, bound{start: b + 8, gap: 11, backward: true})
	}
	bounds = append(bounds, bound{start: -1, far: true}, bound{start: 5000, backward: true, far: true}) // every cell in the window
	const walks = 40_000
	starts := make([]uint32, walks)
	for _, bd := range bounds {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: weighted, Time: walk.TimeParams{
				Bias: walk.TimeExponential, Scale: 2, Start: bd.start, HasStart: true, Backward: bd.backward,
				MaxGap: bd.gap, HasMaxGap: bd.gap > 0,
			}}
			t.Run(fmt.Sprintf("start=%d/gap=%d/backward=%v/weighted=%v", bd.start, bd.gap, bd.backward, weighted), func(t *testing.T) {
				counts := map[[2]int64]int{}
				err := e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 7, Starts: starts, Overlay: snap, WithTimes: true}}, func(c walk.Chunk) error {
					for k := range c.Len() {
						w, tm := c.Walk(k), c.Times[c.Offsets[k]:c.Offsets[k+1]]
						if len(w) < 2 {
							counts[[2]int64{-1, 0}]++
							continue
						}
						counts[[2]int64{snap.ExternalID(w[1]), tm[1]}]++
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				probs := map[[2]int64]float64{}
				for k, p := range stattest.TemporalStep(rebuilt, a, 0, bd.start, true, graph.NoVertex) {
					probs[[2]int64{rebuilt.ExternalID(uint32(k[0])), k[1]}] = p
				}
				if len(probs) == 0 {
					t.Fatal("empty window: the test's bounds should all have edges")
				}
				pooled, pc := map[[2]int64]float64{}, map[[2]int64]int{}
				rest := [2]int64{-2, 0}
				for k, p := range probs {
					if p*walks < 5 {
						k = rest
					}
					pooled[k] += p
				}
				for k, n := range counts {
					if _, ok := probs[k]; ok && probs[k]*walks < 5 {
						k = rest
					}
					pc[k] += n
				}
				if len(pooled) < 3 && !bd.far {
					t.Fatalf("only %d keys with enough mass: the window should spread over a boundary", len(pooled))
				}
				chiSquareKeyed(t, "first step", pc, pooled)
			})
		}
	}
}

// TestOverlayTemporalExponentialDeterministic: exponential walks on a
// delta are the same walks on one worker and on four, and in a second run:
// the window bounds a job keeps in its lists' records (nx), found by
// whichever walk comes first, change no draw.
func TestOverlayTemporalExponentialDeterministic(t *testing.T) {
	_, snap := timedLive(t)
	starts := make([]uint32, 4000)
	for i := range starts {
		starts[i] = uint32(i % 5)
	}
	for _, backward := range []bool{false, true} {
		a := walk.Algorithm{Kind: walk.Temporal, Length: 12, Weighted: true, Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: 10, Backward: backward}}
		var runs [][][]uint32
		for _, workers := range []int{1, 4, 4} {
			e, err := cpu.New(snap.Base(), cpu.WithWorkers(workers))
			if err != nil {
				t.Fatal(err)
			}
			out := make([][]uint32, len(starts))
			if err := e.Run(context.Background(), []walk.Job{{Algorithm: a, Seed: 3, Starts: starts, Overlay: snap}}, func(c walk.Chunk) error {
				for k := range c.Len() {
					out[c.WalkIDs[k]] = slices.Clone(c.Walk(k))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, out)
		}
		long := 0
		for _, w := range runs[0] {
			if len(w) > 3 {
				long++
			}
		}
		if long < len(starts)/4 {
			t.Fatalf("backward=%v: only %d walks of more than two steps", backward, long)
		}
		for i := 1; i < len(runs); i++ {
			if !slices.EqualFunc(runs[0], runs[i], slices.Equal) {
				t.Errorf("backward=%v: run %d's walks differ from the first's", backward, i)
			}
		}
	}
}
