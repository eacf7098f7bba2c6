package livegraph

import (
	"context"
	"fmt"
	"math"
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

// exactTemporal is the distribution of a temporal step from v bounded by
// bound (unbounded when !bounded) on g, by (target, time) key, computed on
// g's edges directly: the window's edges sorted by (time, target) from the
// near end, weighed as walk/timeparams.go says, times Node2Vec's factor
// against prev when the algorithm has one and prev is a vertex.
func exactTemporal(g *graph.Graph, a walk.Algorithm, v uint32, bound int64, bounded bool, prev uint32) map[[2]int64]float64 {
	type edge struct {
		tgt uint32
		t   int64
		w   float64
	}
	tp := a.Time
	var win []edge
	for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
		tt := g.EdgeTime(e)
		ok := !bounded || !tp.Backward && tt >= bound || tp.Backward && tt <= bound
		if ok && bounded && tp.HasMaxGap {
			ok = max(tt-bound, bound-tt) <= tp.MaxGap
		}
		if ok {
			win = append(win, edge{g.Targets[e], tt, float64(g.Weights[e])})
		}
	}
	slices.SortFunc(win, func(p, q edge) int {
		if p.t != q.t {
			return int(p.t - q.t)
		}
		return int(p.tgt) - int(q.tgt)
	})
	if tp.Backward {
		slices.Reverse(win)
	}
	probs := map[[2]int64]float64{}
	var sum float64
	for p, x := range win {
		b := 1.0
		switch tp.Bias {
		case walk.TimeLinear:
			b = float64(len(win) - p)
		case walk.TimeExponential:
			b = math.Exp(-math.Abs(float64(x.t-win[0].t)) / tp.Scale)
		}
		if a.Weighted {
			b *= x.w
		}
		if a.P != 0 && prev != graph.NoVertex {
			switch {
			case x.tgt == prev:
				b /= a.P
			case !rebuiltHasEdge(g, prev, x.tgt):
				b /= a.Q
			}
		}
		probs[[2]int64{int64(x.tgt), x.t}] += b
		sum += b
	}
	for k := range probs {
		probs[k] /= sum
	}
	return probs
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
					probs := exactTemporal(rebuilt, a, v, a.Time.Bound(), a.Time.HasStart, graph.NoVertex)
					if len(probs) == 0 {
						probs = map[[2]int64]float64{{-1, 0}: 1}
					}
					chiSquareKeyed(t, fmt.Sprintf("first step from %d", v), first[v], probs)
				}
				tested := 0
				for s, c := range second {
					probs := exactTemporal(rebuilt, a, s.cur, s.t, true, s.prev)
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
