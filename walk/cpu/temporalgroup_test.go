package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// The grouped steps (the engine's: walkTemporalExpGroup and
// walkTemporalNextGroup on the records with nx; and walkTemporalGroup, the
// records without nx, searched windows, what graphs of 2^32 edges or more
// walk) walk exactly the walks that walkTemporal takes one at a time on
// the graph's own arrays, for every bias and direction,
// with and without a gap, weighted or not, on timed R-MAT graphs whose hubs
// have windows of hundreds of edges: with cells narrower than the times'
// span (scales 0.5 to 50) and with every time in one cell (scales 2^12 and
// 2^14: G = 2^20 and 2^22 hold all of [0, 2^20)).
func TestTemporalGroupMatchesOneWalk(t *testing.T) {
	g := timedRMAT(t, graph.RMATOptions{Scale: 12, EdgeFactor: 16, Seed: 11, Undirected: true, Weighted: true, TimeSpan: 1 << 20})
	cases := temporalCases()
	cases["exponential-one-cell"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 1 << 14}
	cases["exponential-one-cell-gap"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 1 << 14, MaxGap: 60000, HasMaxGap: true}
	cases["backward-exp-one-cell"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 1 << 12, Backward: true}
	cases["exponential-wide"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 3000}
	cases["linear-start"] = walk.TimeParams{Bias: walk.TimeLinear, Start: 1 << 19, HasStart: true}
	cases["backward-linear-gap"] = walk.TimeParams{Bias: walk.TimeLinear, Backward: true, MaxGap: 1 << 16, HasMaxGap: true}
	cases["backward-uniform-start-gap"] = walk.TimeParams{Backward: true, Start: 1 << 19, HasStart: true, MaxGap: 1 << 17, HasMaxGap: true}
	// walkTemporalExpGroup searches only a first step bounded by a start.
	cases["exponential-start"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 3000, Start: 1 << 19, HasStart: true}
	cases["backward-exp-one-cell-start-gap"] = walk.TimeParams{Bias: walk.TimeExponential, Scale: 1 << 14, Backward: true,
		Start: 1 << 19, HasStart: true, MaxGap: 1 << 17, HasMaxGap: true}
	for name, tp := range cases {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 30, Weighted: weighted, Time: tp}
			e, err := New(g, WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			starts := make([]uint32, g.NumVertices())
			for i := range starts {
				starts[i] = uint32(i)
			}
			const seed = 5
			walks, times := timedWalks(t, e, walk.Job{Algorithm: a, Seed: seed, Starts: starts, WithTimes: true})
			// Without output times a step reads no time where it needs
			// none (walkTemporalExpGroup): the same walks.
			plain, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: seed, Starts: starts})
			s := newStepper(g, a, seed, nil)
			var cumw []float64
			if weighted && tp.Bias != walk.TimeExponential {
				cumw = e.windowWeights()
			}
			var exp *expTable
			if tp.Bias == walk.TimeExponential {
				exp = e.expTable(a)
			}
			s.tmp = temporalGraph(g, a, cumw, nil, exp, e.coarseIndex())
			// walkTemporalGroup, which graphs of 2^32 edges or more walk
			// (records without nx, searched windows): the same walks.
			sg := newStepper(g, a, seed, nil)
			var rec []timeRec
			if tp.Bias != walk.TimeExponential {
				rec = e.timeRecords()
			}
			sg.tmp = temporalGraph(g, a, cumw, rec, exp, e.coarseIndex())
			sg.tmp.expNext = false
			stride := a.Length + 1
			gw := make([]uint32, len(starts)*stride)
			gt := make([]int64, len(starts)*stride)
			gl := make([]uint32, len(starts))
			sg.walkTemporalUnit(starts, 0, gw, gt, gl)
			out := make([]uint32, a.Length+1)
			ot := make([]int64, a.Length+1)
			for id, v := range starts {
				n := s.walkTemporal(uint64(id), v, out, ot)
				if !slices.Equal(walks[id], out[:n]) || !slices.Equal(times[id], ot[:n]) || !slices.Equal(plain[id], out[:n]) {
					t.Fatalf("%s weighted=%v walk %d: grouped %v %v (without times %v), one at a time %v %v", name, weighted, id, walks[id], times[id], plain[id], out[:n], ot[:n])
				}
				row := gw[id*stride : id*stride+int(gl[id])]
				if trow := gt[id*stride : id*stride+int(gl[id])]; !slices.Equal(row, out[:n]) || !slices.Equal(trow, ot[:n]) {
					t.Fatalf("%s weighted=%v walk %d: walkTemporalGroup %v %v, one at a time %v %v", name, weighted, id, row, trow, out[:n], ot[:n])
				}
			}
			runtime.KeepAlive(e) // its records live outside the Go heap until e is collected
		}
	}
}

// The searches in the sums pick, from any guess, the position of the
// specification (walk/temporalexp.go), found here by a scan: forward the
// last k of [lo, hi) past lo with R[k].s > r (lo where none is), backward
// the first k of [lo, hi-1) with R[k].s > r (hi-1 where none is). The guess
// only decides where the search starts: the bracket around it
// (bracketForward), or the gallop where the answer lies outside.
func TestExpPickAnyGuess(t *testing.T) {
	scanF := func(R []timeRec, lo, hi uint64, base, u float64) (uint64, bool) {
		m := R[lo].s - base
		if !(m > 0) {
			return 0, false
		}
		r := base + float64(u*m)
		k := lo
		for j := lo + 1; j < hi; j++ {
			if R[j].s > r {
				k = j
			}
		}
		return k, true
	}
	scanB := func(B []timeRec, lo, hi uint64, base, u float64) (uint64, bool) {
		m := B[hi-1].s - base
		if !(m > 0) {
			return 0, false
		}
		r := base + float64(u*m)
		for j := lo; j < hi-1; j++ {
			if B[j].s > r {
				return j, true
			}
		}
		return hi - 1, true
	}
	r := rand.New(rand.NewPCG(38, 2))
	for range 300 {
		n := 1 + r.IntN(300)
		R := make([]timeRec, n)
		var sum float64
		for i := n - 1; i >= 0; i-- { // forward: suffix sums
			if r.IntN(5) > 0 { // some zero weights: runs of equal sums
				sum += r.ExpFloat64()
			}
			R[i].s = sum
		}
		B := make([]timeRec, n)
		sum = 0
		for i := range B { // backward: prefix sums
			if r.IntN(5) > 0 {
				sum += r.ExpFloat64()
			}
			B[i].s = sum
		}
		lo := uint64(r.IntN(n))
		hi := lo + 1 + uint64(r.IntN(n-int(lo)))
		var fb, bb float64
		if hi < uint64(n) {
			fb = R[hi].s
		}
		if lo > 0 {
			bb = B[lo-1].s
		}
		for range 20 {
			u := r.Float64()
			wantF, okF := scanF(R, lo, hi, fb, u)
			wantB, okB := scanB(B, lo, hi, bb, u)
			for g := lo; g < hi; g++ {
				if got, ok := expPickForward(R, lo, hi, fb, u, g); ok != okF || got != wantF {
					t.Fatalf("forward [%d, %d) u=%v from %d: %d %v, the scan %d %v", lo, hi, u, g, got, ok, wantF, okF)
				}
				if got, ok := expPickBackward(B, lo, hi, bb, u, g); ok != okB || got != wantB {
					t.Fatalf("backward [%d, %d) u=%v from %d: %d %v, the scan %d %v", lo, hi, u, g, got, ok, wantB, okB)
				}
			}
		}
	}
}

// walkTemporalExpGroup's check of a forward one-cell guess: where it holds
// (expGuessHolds), the count among the guess's neighbours
// (expCountForward) is the specification's position, for every guess of
// every window of random suffix sums with runs of equal sums; where it
// fails, the drawn position lies past the side it failed on, and the new
// guess (expRefineForward) is in the window on that side.
func TestExpCheckedGuess(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 3))
	for range 300 {
		n := 1 + r.IntN(300)
		R := make([]timeRec, n)
		var sum float64
		for i := n - 1; i >= 0; i-- {
			if r.IntN(5) > 0 {
				sum += r.ExpFloat64() * math.Exp(-float64(n-i)/40)
			}
			R[i].s = sum
		}
		lo := uint64(r.IntN(n))
		hi := lo + 1 + uint64(r.IntN(n-int(lo)))
		var base float64
		if hi < uint64(n) {
			base = R[hi].s
		}
		dens := []float64{0.3, 3, 40, math.Inf(1)}[r.IntN(4)]
		for range 20 {
			u := r.Float64()
			m := R[lo].s - base
			if !(m > 0) {
				continue
			}
			x := base + float64(u*m)
			want := lo // the last position past lo whose sum exceeds x
			for j := lo + 1; j < hi; j++ {
				if R[j].s > x {
					want = j
				}
			}
			for g := lo; g < hi; g++ {
				wl, wh := expGuessSpan(lo, hi, g)
				if wl > g || g > wh || wl < lo || wh >= hi || wh-wl > 8 {
					t.Fatalf("[%d, %d) guess %d: span [%d, %d]", lo, hi, g, wl, wh)
				}
				if expGuessHolds(R, lo, hi, wl, wh, x) {
					if got := expCountForward(R, wl, wh, x); got != want {
						t.Fatalf("[%d, %d) u=%v guess %d: counted %d, the scan %d", lo, hi, u, g, got, want)
					}
					continue
				}
				g2 := expRefineForward(R, lo, hi, wl, wh, x, dens)
				if past := R[wh].s > x && wh < hi-1; past && (want < wh || g2 <= wh || g2 >= hi) || !past && (want >= wl || g2 >= wl || g2 < lo) {
					t.Fatalf("[%d, %d) u=%v guess %d, span [%d, %d]: drawn %d, new guess %d", lo, hi, u, g, wl, wh, want, g2)
				}
			}
		}
	}
}

// The guess's table look-ups stay within their stated errors of the
// functions over their domains (ln: absolute 0.004 on (0, 1]; e^x:
// relative 0.3% on (-40, 0]), at the intervals' ends where the error of a
// look-up is largest.
func TestExpGuessTables(t *testing.T) {
	for _, c := range []struct {
		name      string
		lo, hi    float64
		got, want func(float64) float64
		tol       float64
		relative  bool
	}{
		{"log", 1e-300, 1, tableLog, math.Log, 0.004, false},
		{"exp", -40, 0, tableExp, math.Exp, 0.003, true},
	} {
		r := rand.New(rand.NewPCG(38, 4))
		xs := []float64{c.lo, c.hi, math.Nextafter(c.hi, c.lo), 0.5, -0.5, 1 - 1.0/256, -math.Ln2 / 256}
		for range 200000 {
			xs = append(xs, c.lo+r.Float64()*(c.hi-c.lo))
		}
		for _, x := range xs {
			if x < c.lo || x > c.hi || c.name == "log" && x <= 0 {
				continue
			}
			got, want := c.got(x), c.want(x)
			err := math.Abs(got - want)
			if c.relative {
				err /= want
			}
			if !(err <= c.tol) {
				t.Fatalf("%s(%v) = %v, want %v (error %v over %v)", c.name, x, got, want, err, c.tol)
			}
		}
	}
}
