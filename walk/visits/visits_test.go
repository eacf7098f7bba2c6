package visits

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// bruteVisits computes a query's result straight from the definition in
// visits.go: walks fetched one job per block from the engine, consumed
// interleaved by a plain loop into a map, sorted in full.
func bruteVisits(t *testing.T, e walk.Engine, g *graph.Graph, p VisitParams, q int, vq VisitQuery) VisitResult {
	t.Helper()
	blocks := map[[2]int64][][]uint32{}
	walkOf := func(i int, j int64) []uint32 {
		key := [2]int64{int64(i), j / VisitBlockWalks}
		if blocks[key] == nil {
			starts := make([]uint32, VisitBlockWalks)
			for k := range starts {
				starts[k] = vq.Starts[i]
			}
			walks := make([][]uint32, VisitBlockWalks)
			job := walk.Job{Algorithm: p.Algorithm, Seed: VisitBlockSeed(p.Seed, uint32(q), uint32(i), uint32(key[1])), Starts: starts}
			if err := e.Run(context.Background(), []walk.Job{job}, func(c walk.Chunk) error {
				for k, id := range c.WalkIDs {
					walks[id] = slices.Clone(c.Walk(k))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			blocks[key] = walks
		}
		return blocks[key][j%VisitBlockWalks]
	}
	n := len(vq.Starts)
	budget := make([]int64, n)
	capW := make([]int64, n)
	for i := range budget {
		budget[i], capW[i] = math.MaxInt64, int64(p.WalksPerSeed)
	}
	if p.StepsPerQuery > 0 {
		budget = SplitSteps(p.StepsPerQuery, vq.Weights, n)
		copy(capW, budget)
	}
	excluded := map[uint32]bool{}
	for _, s := range vq.Starts {
		if p.ExcludeSeeds {
			excluded[s] = true
		}
		if p.ExcludeNeighbors {
			for _, v := range g.Neighbors(s) {
				excluded[v] = true
			}
		}
	}
	counts := map[uint32]int64{}
	steps, walks := make([]int64, n), make([]int64, n)
	done := make([]bool, n)
	var res VisitResult
	reached := int64(0)
	for j := int64(0); ; j++ {
		active := false
	seeds:
		for i := range n {
			if done[i] || g.Degree(vq.Starts[i]) == 0 || capW[i] == 0 {
				continue
			}
			active = true
			w := walkOf(i, j)
			for _, v := range w[1:] {
				if steps[i] == budget[i] {
					break
				}
				steps[i]++
				counts[v]++
				if p.NP > 0 && counts[v] == p.NV && !excluded[v] {
					reached++
					if reached == p.NP {
						walks[i]++
						res.Stopped = true
						break seeds
					}
				}
			}
			walks[i]++
			if steps[i] == budget[i] || walks[i] == capW[i] {
				done[i] = true
			}
		}
		if !active || res.Stopped {
			break
		}
	}
	for i := range n {
		res.Steps += steps[i]
		res.Walks += walks[i]
	}
	minV := max(p.MinVisits, 1)
	for v, c := range counts {
		if c >= minV && !excluded[v] {
			res.Candidates = append(res.Candidates, Candidate{v, c})
		}
	}
	slices.SortFunc(res.Candidates, func(a, b Candidate) int {
		if a.Visits != b.Visits {
			return int(b.Visits - a.Visits)
		}
		return int(a.Vertex) - int(b.Vertex)
	})
	if len(res.Candidates) > p.TopK {
		res.Candidates = res.Candidates[:p.TopK]
	}
	if res.Candidates == nil {
		res.Candidates = []Candidate{}
	}
	return res
}

func TestCountVisitsMatchesBruteForce(t *testing.T) {
	g := testGraph(t)
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 20, StopProb: 0.2}
	dw := walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true}
	queries := []VisitQuery{
		{Starts: []uint32{0}},
		{Starts: []uint32{3, 12}, Weights: []float64{3, 1}},
		{Starts: []uint32{15}},      // a dead end: no step
		{Starts: []uint32{15, 7}},   // a dead end beside a live seed
		{Starts: []uint32{1, 2, 3}}, // equal split with a remainder
	}
	cases := []struct {
		name string
		p    VisitParams
	}{
		{"budget", VisitParams{Algorithm: ppr, Seed: 7, StepsPerQuery: 5001, TopK: 5}},
		{"budget spanning blocks", VisitParams{Algorithm: ppr, Seed: 8, StepsPerQuery: 20000, TopK: 20}},
		{"walks per seed", VisitParams{Algorithm: dw, Seed: 9, WalksPerSeed: 700, TopK: 3}},
		{"exclusions", VisitParams{Algorithm: ppr, Seed: 10, StepsPerQuery: 3000, TopK: 16, ExcludeSeeds: true, ExcludeNeighbors: true}},
		{"min visits", VisitParams{Algorithm: ppr, Seed: 11, StepsPerQuery: 3000, TopK: 16, MinVisits: 200}},
		{"early stopping", VisitParams{Algorithm: ppr, Seed: 12, StepsPerQuery: 100000, TopK: 4, NP: 3, NV: 50}},
		{"early stopping, excluded", VisitParams{Algorithm: ppr, Seed: 13, StepsPerQuery: 100000, TopK: 4, NP: 2, NV: 40, ExcludeSeeds: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{1024, 100} { // 100: blocks arrive in several chunks
				e, err := cpu.New(g, cpu.WithWorkers(3), cpu.WithChunkSize(chunk))
				if err != nil {
					t.Fatal(err)
				}
				queries := queries
				if c.p.WalksPerSeed > 0 { // weights split budgets only
					queries = slices.Clone(queries)
					for q := range queries {
						queries[q].Weights = nil
					}
				}
				got, st, err := CountVisits(context.Background(), e, g, c.p, queries)
				if err != nil {
					t.Fatal(err)
				}
				var steps int64
				for q, vq := range queries {
					want := bruteVisits(t, e, g, c.p, q, vq)
					if got[q].Candidates == nil {
						got[q].Candidates = []Candidate{}
					}
					if !reflect.DeepEqual(got[q], want) {
						t.Fatalf("chunk %d query %d:\n got %+v\nwant %+v", chunk, q, got[q], want)
					}
					steps += want.Steps
				}
				if st.Steps != steps || st.Queries != int64(len(queries)) {
					t.Errorf("stats %+v, want %d steps", st, steps)
				}
			}
		})
	}
}

func TestCountVisitsSemantics(t *testing.T) {
	g := testGraph(t)
	e, _ := cpu.New(g)
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 20, StopProb: 0.2}
	p := VisitParams{Algorithm: ppr, Seed: 1, StepsPerQuery: 10007, TopK: 100}
	res, _, err := CountVisits(context.Background(), e, g, p, []VisitQuery{{Starts: []uint32{0}}, {Starts: []uint32{15}}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Steps != 10007 {
		t.Errorf("steps %d, want the whole budget 10007 (the last walk cut)", r.Steps)
	}
	var sum int64
	for k, c := range r.Candidates {
		sum += c.Visits
		if k > 0 && !before(r.Candidates[k-1], c) {
			t.Errorf("candidates %d and %d out of order: %+v %+v", k-1, k, r.Candidates[k-1], c)
		}
	}
	if sum != r.Steps {
		t.Errorf("visits sum to %d, steps %d (nothing excluded, every vertex fits top 100)", sum, r.Steps)
	}
	if res[1].Steps != 0 || len(res[1].Candidates) != 0 {
		t.Errorf("dead-end seed: %+v, want nothing", res[1])
	}
	// Exclusions: no seed, no neighbour of a seed.
	p.ExcludeSeeds, p.ExcludeNeighbors = true, true
	res, _, _ = CountVisits(context.Background(), e, g, p, []VisitQuery{{Starts: []uint32{1}}})
	for _, c := range res[0].Candidates {
		if c.Vertex == 1 || g.HasEdge(1, c.Vertex) {
			t.Errorf("excluded vertex %d returned", c.Vertex)
		}
	}
	if len(res[0].Candidates) == 0 {
		t.Error("no candidates left after exclusions")
	}
	// Early stopping ends at the step where the NP-th candidate reaches NV.
	p = VisitParams{Algorithm: ppr, Seed: 1, StepsPerQuery: 1_000_000, TopK: 3, NP: 3, NV: 100}
	res, _, _ = CountVisits(context.Background(), e, g, p, []VisitQuery{{Starts: []uint32{0}}})
	r = res[0]
	if !r.Stopped || r.Steps >= 1_000_000 || len(r.Candidates) != 3 || r.Candidates[2].Visits < 100 {
		t.Fatalf("early stopping: %+v", r)
	}
	if r.Candidates[0].Visits == 100 && r.Candidates[1].Visits == 100 {
		t.Errorf("stopped late or early: %+v", r.Candidates)
	}
}

func TestCountVisitsDeterministic(t *testing.T) {
	g := testGraph(t)
	p := VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.15}, Seed: 99, StepsPerQuery: 30000, TopK: 10}
	var qs []VisitQuery
	for v := range uint32(15) {
		qs = append(qs, VisitQuery{Starts: []uint32{v}})
	}
	var first []VisitResult
	for _, w := range []int{1, 2, 5} {
		e, _ := cpu.New(g, cpu.WithWorkers(w), cpu.WithChunkSize(64*w))
		res, _, err := CountVisits(context.Background(), e, g, p, qs)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
		} else if !reflect.DeepEqual(res, first) {
			t.Fatalf("%d workers: results differ", w)
		}
	}
}

// TestVisitFrequenciesMatchRestartDistribution compares visit counts with
// the exact distribution of arrivals of PPR walks with restart from vertex
// 0: mu(v) = sum over t = 1..L of (1-a)^t (e_0 P^t)(v), normalised. Visits
// within a walk are correlated, so Pearson's statistic over all counts is
// divided by its dispersion, measured on the queries taken one by one
// (200 independent queries, same seed vertex, different walk keys).
func TestVisitFrequenciesMatchRestartDistribution(t *testing.T) {
	g := testGraph(t)
	e, _ := cpu.New(g)
	a := walk.Algorithm{Kind: walk.PPR, Length: 12, StopProb: 0.25}
	n := g.NumVertices()
	mu := make([]float64, n)
	cur := make([]float64, n)
	cur[0] = 1
	for step := 1; step <= a.Length; step++ {
		next := make([]float64, n)
		for u := range n {
			nb := g.Neighbors(uint32(u))
			for _, v := range nb {
				next[v] += cur[u] * (1 - a.StopProb) / float64(len(nb))
			}
		}
		cur = next
		for v := range n {
			mu[v] += cur[v]
		}
	}
	var z float64
	for _, m := range mu {
		z += m
	}
	const queries, steps = 200, 20000
	qs := make([]VisitQuery, queries)
	for i := range qs {
		qs[i] = VisitQuery{Starts: []uint32{0}}
	}
	res, _, err := CountVisits(context.Background(), e, g, VisitParams{Algorithm: a, Seed: 2024, StepsPerQuery: steps, TopK: n}, qs)
	if err != nil {
		t.Fatal(err)
	}
	pearson := func(counts []float64, total float64) (x2 float64, df int) {
		for v := range n {
			if mu[v] == 0 {
				if counts[v] != 0 {
					t.Fatalf("vertex %d visited %v times, probability 0", v, counts[v])
				}
				continue
			}
			exp := total * mu[v] / z
			x2 += (counts[v] - exp) * (counts[v] - exp) / exp
			df++
		}
		return x2, df - 1
	}
	all := make([]float64, n)
	var dispersion float64
	for _, r := range res {
		one := make([]float64, n)
		for _, c := range r.Candidates {
			one[c.Vertex] += float64(c.Visits)
			all[c.Vertex] += float64(c.Visits)
		}
		x2, df := pearson(one, steps)
		dispersion += x2 / float64(df) / queries
	}
	x2, df := pearson(all, steps*queries)
	stat := x2 / dispersion
	t.Logf("pearson %.1f, dispersion %.2f, statistic %.1f, df %d", x2, dispersion, stat, df)
	if crit := chiSquareCritical(df); stat > crit {
		t.Errorf("visit frequencies differ from the restart distribution: %.1f > %.1f (df %d)", stat, crit, df)
	}
	// The same test must see a 1% bias: move 1% of vertex 0's mass.
	biased := slices.Clone(all)
	shift := 0.01 * biased[1]
	biased[1] -= shift
	biased[2] += shift
	if bx2, _ := pearson(biased, steps*queries); bx2/dispersion <= chiSquareCritical(df) {
		t.Logf("note: a 1%% shift between vertices 1 and 2 gives %.1f (not detected)", bx2/dispersion)
	}
}

func TestSplitSteps(t *testing.T) {
	for _, c := range []struct {
		n    int64
		w    []float64
		k    int
		want []int64
	}{
		{10, nil, 3, []int64{4, 3, 3}},
		{10, []float64{1, 1, 1}, 3, []int64{4, 3, 3}},
		{100, []float64{3, 1}, 2, []int64{75, 25}},
		{7, []float64{0.5, 0.25, 0.25}, 3, []int64{3, 2, 2}}, // floors 3 1 1, remainders .5 .75 .75
		{1, []float64{1, 2}, 2, []int64{0, 1}},
	} {
		got := SplitSteps(c.n, c.w, c.k)
		var sum int64
		for _, x := range got {
			sum += x
		}
		if !slices.Equal(got, c.want) || sum != c.n {
			t.Errorf("SplitSteps(%d, %v) = %v, want %v", c.n, c.w, got, c.want)
		}
	}
}

func TestVisitParamsValidate(t *testing.T) {
	g := testGraph(t)
	ok := VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 10, StopProb: 0.2}, StepsPerQuery: 10, TopK: 1}
	q := []VisitQuery{{Starts: []uint32{1}}}
	if err := ok.Validate(g, q); err != nil {
		t.Fatal(err)
	}
	bad := []func(p *VisitParams, q *VisitQuery){
		func(p *VisitParams, q *VisitQuery) { p.WalksPerSeed = 3 },
		func(p *VisitParams, q *VisitQuery) { p.StepsPerQuery = 0 },
		func(p *VisitParams, q *VisitQuery) { p.TopK = 0 },
		func(p *VisitParams, q *VisitQuery) { p.NP = 1 },
		func(p *VisitParams, q *VisitQuery) { q.Starts = nil },
		func(p *VisitParams, q *VisitQuery) { q.Weights = []float64{1, 2} },
		func(p *VisitParams, q *VisitQuery) { q.Weights = []float64{0} },
		func(p *VisitParams, q *VisitQuery) { q.Starts = []uint32{99} },
		func(p *VisitParams, q *VisitQuery) { p.StepsPerQuery, p.WalksPerSeed, q.Weights = 0, 1, []float64{1} },
	}
	for i, f := range bad {
		p, vq := ok, VisitQuery{Starts: []uint32{1}}
		f(&p, &vq)
		if err := p.Validate(g, []VisitQuery{vq}); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

// VisitCandidates (the device path's cut) applies the same rule as the
// host's table: min_visits, exclusions, order, top k.
func TestVisitCandidatesFromSlots(t *testing.T) {
	g := testGraph(t)
	p := VisitParams{TopK: 6, MinVisits: 2, ExcludeSeeds: true, ExcludeNeighbors: true}
	q := VisitQuery{Starts: []uint32{11}}
	counts := map[uint32]int64{0: 5, 1: 9, 2: 9, 3: 1, 4: 7, 5: 2, 6: 2, 7: 2, 8: 30, 9: 2, 11: 50, 12: 4, 15: 3}
	var slots []uint64
	for v, c := range counts {
		slots = append(slots, 0, uint64(v+1)<<32|uint64(c))
	}
	excluded := map[uint32]bool{11: true}
	for _, v := range g.Neighbors(11) {
		excluded[v] = true
	}
	var want []Candidate
	for v, c := range counts {
		if c >= 2 && !excluded[v] {
			want = append(want, Candidate{v, c})
		}
	}
	slices.SortFunc(want, func(a, b Candidate) int {
		if a.Visits != b.Visits {
			return int(b.Visits - a.Visits)
		}
		return int(a.Vertex) - int(b.Vertex)
	})
	want = want[:min(len(want), p.TopK)]
	if got := VisitCandidates(g, p, q, slots); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// oddBatcher counts, through DeviceVisitBatcher, the calls with an odd
// seed (as CountVisits would alone, on its CPU engine) and leaves the
// others to CountVisitCalls: a real engine behind the seam, not a mock.
type oddBatcher struct {
	walk.Engine
	g     *graph.Graph
	calls int
}

var _ DeviceVisitBatcher = (*oddBatcher)(nil)

func (o *oddBatcher) CountVisitCallsOnDevice(ctx context.Context, calls []VisitCall) ([][]VisitResult, []VisitStats, []bool, error) {
	o.calls++
	res, st, handled := make([][]VisitResult, len(calls)), make([]VisitStats, len(calls)), make([]bool, len(calls))
	for i, c := range calls {
		if c.Params.MinVisits < 1 {
			return nil, nil, nil, fmt.Errorf("call %d not validated: min_visits %d", i, c.Params.MinVisits)
		}
		if c.Params.Seed%2 == 1 {
			var err error
			if res[i], st[i], err = CountVisits(ctx, o.Engine, o.g, c.Params, c.Queries); err != nil {
				return nil, nil, nil, err
			}
			handled[i] = true
		}
	}
	return res, st, handled, nil
}

// TestCountVisitCalls: each call's results, stats and validation error are
// what CountVisits gives it alone, whether an engine's batcher or the
// one-by-one path counted it; one invalid call fails only itself.
func TestCountVisitCalls(t *testing.T) {
	g := testGraph(t)
	cpu, _ := cpu.New(g)
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 20, StopProb: 0.2}
	qs := []VisitQuery{{Starts: []uint32{0}}, {Starts: []uint32{15, 3}, Weights: []float64{1, 3}}}
	calls := []VisitCall{
		{VisitParams{Algorithm: ppr, Seed: 1, StepsPerQuery: 5000, TopK: 10}, qs},
		{VisitParams{Algorithm: ppr, Seed: 2, StepsPerQuery: 3000, TopK: 5, ExcludeSeeds: true}, qs[:1]},
		{VisitParams{Algorithm: ppr, Seed: 3, StepsPerQuery: 3000, TopK: 0}, qs}, // invalid: top_k
		{VisitParams{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 6}, Seed: 5, WalksPerSeed: 40, TopK: 7, MinVisits: 2}, qs[:1]},
	}
	for _, c := range []struct {
		name    string
		e       walk.Engine
		batched bool
	}{{"one by one", cpu, false}, {"through a batcher", &oddBatcher{Engine: cpu, g: g}, true}} {
		t.Run(c.name, func(t *testing.T) {
			res, st, errs, err := CountVisitCalls(context.Background(), c.e, g, calls)
			if err != nil {
				t.Fatal(err)
			}
			for i, call := range calls {
				want, wst, werr := CountVisits(context.Background(), cpu, g, call.Params, call.Queries)
				if (errs[i] == nil) != (werr == nil) {
					t.Fatalf("call %d: error %v, alone %v", i, errs[i], werr)
				}
				if werr != nil {
					continue
				}
				if !reflect.DeepEqual(res[i], want) || st[i] != wst {
					t.Fatalf("call %d: %v %+v, alone %v %+v", i, res[i], st[i], want, wst)
				}
			}
			if b, ok := c.e.(*oddBatcher); ok && b.calls != 1 {
				t.Fatalf("the batcher was asked %d times, want once", b.calls)
			}
		})
	}
}
