//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// timedRMAT is a timed R-MAT graph (scale 12, undirected, weighted) whose
// times, uniform in [0, 20000), tie often at the hubs.
func timedRMAT(t testing.TB) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 16, Seed: 38,
		Undirected: true, Weighted: true, Name: "timed-rmat12", TimeSpan: 20000})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// timedWalk is one walk and its times (nil without WithTimes).
type timedWalk struct {
	v []uint32
	t []int64
}

// collectTimed runs jobs and returns each walk with its times by (tag, walk
// id), failing on a walk emitted twice or never, or times that are not
// parallel to the vertices.
func collectTimed(t *testing.T, e walk.Engine, jobs []walk.Job) map[int][]timedWalk {
	t.Helper()
	out := map[int][]timedWalk{}
	with := map[int]bool{}
	for _, j := range jobs {
		out[j.Tag] = make([]timedWalk, len(j.Starts))
		with[j.Tag] = j.WithTimes
	}
	err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
		if with[c.Tag] != (c.Times != nil) || c.Times != nil && len(c.Times) != len(c.Vertices) {
			return fmt.Errorf("job %d: %d times for %d vertices (with_times %v)", c.Tag, len(c.Times), len(c.Vertices), with[c.Tag])
		}
		for k := 0; k < c.Len(); k++ {
			id := c.WalkIDs[k]
			if out[c.Tag][id].v != nil {
				return fmt.Errorf("job %d walk %d emitted twice", c.Tag, id)
			}
			w := timedWalk{v: append([]uint32(nil), c.Walk(k)...)}
			if c.Times != nil {
				w.t = append([]int64(nil), c.Times[c.Offsets[k]:c.Offsets[k+1]]...)
			}
			out[c.Tag][id] = w
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s run: %v", e.Name(), err)
	}
	for tag, ws := range out {
		for id, w := range ws {
			if w.v == nil {
				t.Fatalf("%s: job %d walk %d never emitted", e.Name(), tag, id)
			}
		}
	}
	return out
}

// checkTimeRespecting fails unless walk w's steps are edges of g at the
// times w.t gives, each at or after (backward: at or before) the one
// before, within the maximum gap, the first bounded by the start time.
func checkTimeRespecting(t *testing.T, g *graph.Graph, tp walk.TimeParams, w timedWalk) {
	t.Helper()
	if w.t[0] != tp.Bound() {
		t.Fatalf("walk %v: first time %d, want the bound %d", w.v, w.t[0], tp.Bound())
	}
	for i := 1; i < len(w.v); i++ {
		u, v, prev, at := w.v[i-1], w.v[i], w.t[i-1], w.t[i]
		found := false
		for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
			if g.Targets[e] == v && g.EdgeTime(e) == at {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("walk %v times %v: step %d %d->%d at %d is no edge of the graph", w.v, w.t, i, u, v, at)
		}
		if tp.Backward && at > prev || !tp.Backward && at < prev {
			t.Fatalf("walk %v times %v: step %d goes back in time (%d after %d)", w.v, w.t, i, at, prev)
		}
		if tp.HasMaxGap && (i > 1 || tp.HasStart) {
			if d := at - prev; d > tp.MaxGap || -d > tp.MaxGap {
				t.Fatalf("walk %v times %v: step %d is %d from the last, past the gap %d", w.v, w.t, i, d, tp.MaxGap)
			}
		}
	}
}

// TestTemporalWalksMatchCPU: for every time bias, weighted and not, forward
// and backward, with a start time and a maximum gap, the GPU's temporal
// walks equal the CPU engine's vertex for vertex, and with with_times their
// times too; every walk is checked to be time-respecting on the graph.
func TestTemporalWalksMatchCPU(t *testing.T) {
	g := timedRMAT(t)
	reps := 4
	if small() {
		reps = 1
	}
	starts := allStarts(g, reps)
	_, hub := g.MaxDegree()
	hubStarts := make([]uint32, 3000)
	for i := range hubStarts {
		hubStarts[i] = hub
	}
	tm := func(b walk.TimeBias, scale float64) walk.TimeParams { return walk.TimeParams{Bias: b, Scale: scale} }
	with := func(tp walk.TimeParams, f func(*walk.TimeParams)) walk.TimeParams { f(&tp); return tp }
	type tcase struct {
		name     string
		tp       walk.TimeParams
		weighted bool
		p, q     float64 // temporal Node2Vec when p != 0
	}
	var cases []tcase
	for _, w := range []bool{false, true} {
		for _, b := range []struct {
			name string
			tp   walk.TimeParams
		}{
			{"uniform", tm(walk.TimeUniform, 0)},
			{"linear", tm(walk.TimeLinear, 0)},
			// Scales from a fraction of the gap between a hub's edges to
			// the whole span: windows over many time cells (G = 768, and
			// G = 1 at 0.002), and in one.
			{"exp-s3", tm(walk.TimeExponential, 3)},
			{"exp-s0.002-back", with(tm(walk.TimeExponential, 0.002), func(p *walk.TimeParams) { p.Backward = true })},
			{"exp-s3-back-gap", with(tm(walk.TimeExponential, 3), func(p *walk.TimeParams) {
				p.Backward, p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = true, 18000, true, 2000, true
			})},
			{"exp-s250", tm(walk.TimeExponential, 250)},
			{"exp-s1e5", tm(walk.TimeExponential, 1e5)},
			{"exp-s250-back", with(tm(walk.TimeExponential, 250), func(p *walk.TimeParams) { p.Backward = true })},
			{"linear-back-start-gap", with(tm(walk.TimeLinear, 0), func(p *walk.TimeParams) {
				p.Backward, p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = true, 15000, true, 3000, true
			})},
			{"uniform-start-gap", with(tm(walk.TimeUniform, 0), func(p *walk.TimeParams) {
				p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = 2000, true, 1500, true
			})},
			{"exp-s40-start-gap", with(tm(walk.TimeExponential, 40), func(p *walk.TimeParams) {
				p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = 5000, true, 400, true
			})},
		} {
			name := b.name
			if w {
				name += "-weighted"
			}
			cases = append(cases, tcase{name, b.tp, w, 0, 0})
		}
		// Temporal Node2Vec: the ZPRS over the window from the second
		// step (temporal_n2v_step), for each bias, returns likelier and
		// not, a gap, backward.
		for _, b := range []struct {
			name string
			tp   walk.TimeParams
			p, q float64
		}{
			{"n2v-uniform", tm(walk.TimeUniform, 0), 0.5, 2},
			{"n2v-linear", tm(walk.TimeLinear, 0), 4, 0.25},
			{"n2v-exp-s250", tm(walk.TimeExponential, 250), 0.5, 2},
			{"n2v-exp-s3-back-gap", with(tm(walk.TimeExponential, 3), func(p *walk.TimeParams) {
				p.Backward, p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = true, 18000, true, 2000, true
			}), 2, 1},
		} {
			name := b.name
			if w {
				name += "-weighted"
			}
			cases = append(cases, tcase{name, b.tp, w, b.p, b.q})
		}
	}
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct{ batch, slots int }{{0, 2}, {2777, 3}} {
		e := newEngine(t, g, WithMaxBatchWalks(run.batch), WithChunkWalks(1000), WithBatchSlots(run.slots))
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/batch=%d/slots=%d", c.name, run.batch, run.slots), func(t *testing.T) {
				alg := walk.Algorithm{Kind: walk.Temporal, Length: 40, Weighted: c.weighted, Time: c.tp, P: c.p, Q: c.q}
				jobs := []walk.Job{
					{Tag: 1, Algorithm: alg, Seed: 42, Starts: starts},
					{Tag: 2, Algorithm: alg, Seed: 1<<40 + 7, Starts: hubStarts, WithTimes: true},
					{Tag: 3, Algorithm: alg, Seed: 9, Starts: starts[:len(starts)/4], WithTimes: true},
				}
				want := collectTimed(t, ref, jobs)
				got := collectTimed(t, e, jobs)
				var steps, dead int
				for tag := range want {
					for id := range want[tag] {
						gw, cw := got[tag][id], want[tag][id]
						if !equal(gw.v, cw.v) || len(gw.t) != len(cw.t) {
							t.Fatalf("job %d walk %d differs:\ngpu %v %v\ncpu %v %v", tag, id, gw.v, gw.t, cw.v, cw.t)
						}
						for i := range gw.t {
							if gw.t[i] != cw.t[i] {
								t.Fatalf("job %d walk %d: times differ:\ngpu %v\ncpu %v", tag, id, gw.t, cw.t)
							}
						}
						if gw.t != nil {
							checkTimeRespecting(t, g, c.tp, gw)
						}
						steps += len(gw.v) - 1
						if len(gw.v) < alg.Length+1 {
							dead++
						}
					}
				}
				if steps == 0 {
					t.Fatal("no walk took a step")
				}
				t.Logf("%d steps, %d walks ended before the length", steps, dead)
			})
		}
	}
}

// TestTemporalNeedsWholeGraph: an engine holding part of the graph in host
// memory refuses temporal jobs with an error that says why, and still
// walks the others.
func TestTemporalNeedsWholeGraph(t *testing.T) {
	g := timedRMAT(t)
	e := newEngine(t, g, WithDeviceFraction(0.5))
	if e.placed == nil {
		t.Skip("the device fraction left the whole graph on the device")
	}
	alg := walk.Algorithm{Kind: walk.Temporal, Length: 10, Time: walk.TimeParams{Bias: walk.TimeUniform}}
	err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 1, Starts: []uint32{0, 1}}}, func(walk.Chunk) error { return nil })
	if !errors.Is(err, errTemporalPlaced) {
		t.Fatalf("temporal run on a placed graph: %v, want errTemporalPlaced", err)
	}
	dw := walk.Algorithm{Kind: walk.DeepWalk, Length: 10}
	if err := e.Run(context.Background(), []walk.Job{{Algorithm: dw, Seed: 1, Starts: []uint32{0, 1}}}, func(walk.Chunk) error { return nil }); err != nil {
		t.Fatalf("deepwalk after the refused temporal run: %v", err)
	}
}

// TestTemporalExpSumsMatchCPU: temporal_exp_build's cell sums equal
// walk.ExpSums bit for bit, for each direction and weighting and for cells
// from one time unit (every time its own cell) to wider than the span, and
// a run with another scale replaces the table.
func TestTemporalExpSumsMatchCPU(t *testing.T) {
	g := timedRMAT(t)
	e := newEngine(t, g)
	for _, c := range []struct {
		scale              float64
		backward, weighted bool
	}{{3, false, false}, {250, false, true}, {250, true, false}, {0.002, true, true}, {1e5, false, true}} {
		alg := walk.Algorithm{Kind: walk.Temporal, Length: 2, Weighted: c.weighted,
			Time: walk.TimeParams{Bias: walk.TimeExponential, Scale: c.scale, Backward: c.backward}}
		if err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 1, Starts: []uint32{0, 1, 2}}}, func(walk.Chunk) error { return nil }); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, g.NumEdges())
		if err := e.dev.do(func() error {
			return cu.MemcpyDtoH(unsafe.Pointer(&got[0]), e.tmp.dExp, g.NumEdges()*8)
		}); err != nil {
			t.Fatal(err)
		}
		want := walk.ExpSums(g, c.scale, c.backward, c.weighted)
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%+v: sums[%d] gpu %v (%#x), cpu %v (%#x)", c, i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
			}
		}
	}
}

// TestTemporalNextMatchesSearch: temporal_next_build's records hold, for
// every position k of the time order and each direction, k's target w,
// the window bound a step bounded by k's time has in w's time order
// (forward the first time >= it, backward the first > it), which the steps
// after the first read in place of their search, and w's range of the time
// order; after an exponential run, temporal_next_cells's flag says whether
// the positions from that bound to w's far end lie in one time cell of the
// run's scale, and another scale rewrites the flags.
func TestTemporalNextMatchesSearch(t *testing.T) {
	g := timedRMAT(t)
	e := newEngine(t, g)
	type rec struct{ target, nx, a, b uint32 }
	for _, c := range []struct {
		backward bool
		scale    float64 // exponential when > 0
	}{{false, 0}, {true, 0}, {false, 3}, {false, 250}, {true, 0.002}, {true, 40}, {false, 0}} {
		tp := walk.TimeParams{Bias: walk.TimeUniform, Backward: c.backward}
		if c.scale > 0 {
			tp.Bias, tp.Scale = walk.TimeExponential, c.scale
		}
		alg := walk.Algorithm{Kind: walk.Temporal, Length: 2, Time: tp}
		if err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 1, Starts: []uint32{0, 1, 2}}}, func(walk.Chunk) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if !e.tmp.nextBuilt || e.tmp.nextBack != c.backward {
			t.Fatalf("%+v: no next table for the run's direction", c)
		}
		got := make([]rec, g.NumEdges())
		if err := e.dev.do(func() error {
			return cu.MemcpyDtoH(unsafe.Pointer(&got[0]), e.tmp.dNext, g.NumEdges()*16)
		}); err != nil {
			t.Fatal(err)
		}
		G := walk.ExpCell(c.scale)
		ones := 0
		for v := range g.NumVertices() {
			a := g.Offsets[v]
			for k := a; k < g.Offsets[v+1]; k++ {
				w := g.Targets[a+uint64(g.ByTime[k])]
				wa, wb := g.Offsets[w], g.Offsets[w+1]
				tk := g.Times[k]
				nx := wa + uint64(sort.Search(int(wb-wa), func(i int) bool {
					if c.backward {
						return g.Times[wa+uint64(i)] > tk
					}
					return g.Times[wa+uint64(i)] >= tk
				}))
				r := got[k]
				if r.target != w || uint64(r.nx&(1<<31-1)) != nx || uint64(r.a) != wa || uint64(r.b) != wb {
					t.Fatalf("%+v: next[%d] (vertex %d -> %d, time %d) = %+v, want target %d, bound %d, range [%d, %d)",
						c, k, v, w, tk, r, w, nx, wa, wb)
				}
				if c.scale == 0 {
					continue
				}
				lo, hi := nx, wb
				if c.backward {
					lo, hi = wa, nx
				}
				one := lo < hi && walk.TimeKey(g.Times[lo])/G == walk.TimeKey(g.Times[hi-1])/G
				if one != (r.nx>>31 == 1) {
					t.Fatalf("%+v: next[%d] one-cell flag %v, want %v (window bound %d of [%d, %d))", c, k, !one, one, nx, wa, wb)
				}
				if one {
					ones++
				}
			}
		}
		if c.scale > 0 {
			t.Logf("%+v: %d of %d records in one cell", c, ones, g.NumEdges())
		}
	}
}
