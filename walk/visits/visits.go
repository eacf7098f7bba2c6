package visits

// Visit counting: recommendation candidates from walks with restart, as in
// Pixie (Eksombatchai et al., WWW 2018, section 3). A query is a set of
// weighted seeds; walks restart at its seeds until a step budget is spent,
// every step's arrival vertex is counted, and the top-k most visited
// vertices are the candidates. Counting sits on top of any Engine: the
// walks are ordinary jobs, so every engine whose walks are identical gives
// identical counts.
//
// # Which walks are counted (the definition an engine must match)
//
// Seed i (in query order) of query q (in request order) gets a budget of
// steps N_i: SplitSteps(StepsPerQuery, weights) (largest remainders, ties to
// the lower index), or no budget and WalksPerSeed walks in walks mode. Its
// walk j (j = 0, 1, ...) is walk j mod VisitBlockWalks of the job
// Job{Seed: VisitBlockSeed(p.Seed, q, i, j / VisitBlockWalks), Algorithm:
// p.Algorithm, Starts: [seed i ...]}: the walk id inside its block is its
// index there, so a block's walks do not depend on how many blocks are run.
//
// A query consumes its walks interleaved: walk 0 of seed 0, walk 0 of seed
// 1, ..., walk 1 of seed 0, ..., skipping seeds that are done. Each walk
// visits the vertices it arrives at, one per step (the start vertex of a
// walk is not a visit, a return to it is). A seed is done when its counted
// steps reach N_i — the walk that reaches it is cut there, its remaining
// steps not counted — or when it has consumed N_i walks (only reached when
// most walks take no step: a dead end, a PPR stop before the first step), or
// in walks mode after WalksPerSeed walks. A query stops early, at the step
// where it happens, once NP candidates (vertices not excluded) have NV
// visits each (Pixie's early stopping).
//
// Candidates are the vertices with at least MinVisits visits, minus the
// query's seeds (ExcludeSeeds) and their out-neighbours (ExcludeNeighbors),
// ordered by visits descending then vertex id ascending, the first TopK.

import (
	"context"
	"math"
	"sort"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// VisitBlockWalks is the number of walks of one seed that form one job (a
// block): walk j of a seed is walk j mod VisitBlockWalks of block j /
// VisitBlockWalks. Part of the definition of the counted walks: changing it
// changes every result.
const VisitBlockWalks = 512

// visitWaveSteps bounds the steps walked (and held) for one wave of queries:
// about 5 bytes per step of walk output (vertex ids, offsets, walk ids).
const visitWaveSteps = 8 << 20

// VisitQuery is one query: its seeds (dense ids) and their weights.
type VisitQuery struct {
	Starts []uint32
	// Weights split the step budget between the seeds; nil weighs them
	// equally. Only with a step budget.
	Weights []float64
}

// VisitParams describe how the walks of every query of a request are run,
// counted and cut to candidates.
type VisitParams struct {
	Algorithm walk.Algorithm
	Seed      uint64 // the request's RNG seed; see VisitBlockSeed
	// StepsPerQuery is the budget N of a query (split between its seeds);
	// WalksPerSeed the walks of each seed instead. Exactly one is set.
	StepsPerQuery int64
	WalksPerSeed  int
	TopK          int
	MinVisits     int64 // at least 1; 0 means 1
	// NP and NV: stop a query once NP candidates have NV visits each
	// (both 0: no early stopping).
	NP, NV           int64
	ExcludeSeeds     bool
	ExcludeNeighbors bool
}

// Validate checks the parameters and the queries against g (nil: only the
// parameters).
func (p VisitParams) Validate(g *graph.Graph, queries []VisitQuery) error {
	if err := p.Algorithm.Validate(g); err != nil {
		return err
	}
	switch {
	case (p.StepsPerQuery > 0) == (p.WalksPerSeed > 0) || p.StepsPerQuery < 0 || p.WalksPerSeed < 0:
		return invalid("give a positive steps per query or walks per seed, not both")
	case p.TopK < 1:
		return invalid("top_k %d must be at least 1", p.TopK)
	case p.MinVisits < 0:
		return invalid("min_visits %d must be at least 1", p.MinVisits)
	case (p.NP > 0) != (p.NV > 0) || p.NP < 0 || p.NV < 0:
		return invalid("early stopping needs n_p and n_v both at least 1 (or neither)")
	}
	for q, vq := range queries {
		if len(vq.Starts) == 0 {
			return invalid("query %d has no seeds", q)
		}
		if vq.Weights != nil {
			if p.WalksPerSeed > 0 {
				return invalid("query %d: weights split a step budget; with walks per seed every seed walks the same", q)
			}
			if len(vq.Weights) != len(vq.Starts) {
				return invalid("query %d: %d weights for %d seeds", q, len(vq.Weights), len(vq.Starts))
			}
			for i, w := range vq.Weights {
				if !(w > 0) || math.IsInf(w, 0) {
					return invalid("query %d: weight %d = %v must be positive and finite", q, i, w)
				}
			}
		}
		if g != nil {
			for _, s := range vq.Starts {
				if int(s) >= g.NumVertices() {
					return invalid("query %d: seed vertex %d beyond %d vertices", q, s, g.NumVertices())
				}
			}
		}
	}
	return nil
}

// Candidate is a counted vertex.
type Candidate struct {
	Vertex uint32 // dense id
	Visits int64
}

// VisitResult is one query's outcome.
type VisitResult struct {
	Steps      int64 // counted steps (the sum of all visits, excluded vertices included)
	Walks      int64 // walks consumed, the cut one included
	Stopped    bool  // early stopping ended the query
	Candidates []Candidate
}

// VisitStats describe a CountVisits call.
type VisitStats struct {
	Queries    int64
	Walks      int64 // counted
	Steps      int64 // counted
	Candidates int64
	// WalkedSteps are the steps the engine walked, counted or not (the
	// blocks beyond a query's budget are walked whole).
	WalkedSteps int64
	Runs        int // engine runs
}

// VisitBlockSeed is the RNG seed of block b of seed i of query q: the first
// two words of Philox4x32-10 of the counter (q, i, b, 0x56495354 "VIST")
// under the key (seed low, seed high).
func VisitBlockSeed(seed uint64, q, i, b uint32) uint64 {
	x := walk.Philox4x32([4]uint32{q, i, b, 0x56495354}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return uint64(x[0]) | uint64(x[1])<<32
}

// SplitSteps divides the budget n between k seeds in proportion to weights
// (nil: equal): each gets the floor of its share, and the steps left go one
// each to the largest remainders, ties to the lower index.
func SplitSteps(n int64, weights []float64, k int) []int64 {
	out := make([]int64, k)
	if weights == nil {
		for i := range out {
			out[i] = n / int64(k)
			if int64(i) < n%int64(k) {
				out[i]++
			}
		}
		return out
	}
	var sum float64
	for _, w := range weights {
		sum += w
	}
	rem := make([]float64, k)
	left := n
	for i, w := range weights {
		share := float64(n) * (w / sum)
		out[i] = min(int64(math.Floor(share)), left)
		rem[i] = share - float64(out[i])
		left -= out[i]
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for x := 0; left > 0; x = (x + 1) % k {
		out[order[x]]++
		left--
	}
	return out
}

// CountVisits runs the walks of every query on e and counts them (see the
// file comment for the definition). Queries are processed in waves that
// bound the walks held in memory; within a wave the engine walks the
// blocks of every query in one run, then the queries are counted in
// parallel, and further runs walk more blocks for the queries whose budget
// is not spent. The results are in query order and depend only on g, p and
// queries, never on the schedule.
func CountVisits(ctx context.Context, e walk.Engine, g *graph.Graph, p VisitParams, queries []VisitQuery) ([]VisitResult, VisitStats, error) {
	if err := p.Validate(g, queries); err != nil {
		return nil, VisitStats{}, err
	}
	if p.MinVisits == 0 {
		p.MinVisits = 1
	}
	if dc, ok := e.(DeviceVisitCounter); ok {
		res, st, handled, err := dc.CountVisitsOnDevice(ctx, p, queries)
		if err != nil || handled {
			return res, st, err
		}
	}
	res := make([]VisitResult, len(queries))
	st := VisitStats{Queries: int64(len(queries))}
	for lo := 0; lo < len(queries); {
		hi, budget := lo, int64(0)
		for hi < len(queries) && (hi == lo || budget+p.estimate(queries[hi]) <= visitWaveSteps) {
			budget += p.estimate(queries[hi])
			hi++
		}
		if err := countWave(ctx, e, g, p, queries, lo, hi, res, &st); err != nil {
			return nil, st, err
		}
		lo = hi
	}
	for i := range res {
		st.Walks += res[i].Walks
		st.Steps += res[i].Steps
		st.Candidates += int64(len(res[i].Candidates))
	}
	return res, st, nil
}

// VisitCall is one counting call of several handed to CountVisitCalls: a
// request's parameters and queries.
type VisitCall struct {
	Params  VisitParams
	Queries []VisitQuery
}

// CountVisitCalls counts several calls as CountVisits counts each: call
// i's results, stats and error (its parameters' validation) are res[i],
// st[i] and errs[i], the same as CountVisits(ctx, e, g, calls[i].Params,
// calls[i].Queries) gives. An engine implementing DeviceVisitBatcher
// counts the calls it takes together, so that many small requests fill
// it; the others are counted one by one. err is an engine failure, which
// ends the whole call.
func CountVisitCalls(ctx context.Context, e walk.Engine, g *graph.Graph, calls []VisitCall) (res [][]VisitResult, st []VisitStats, errs []error, err error) {
	res, st, errs = make([][]VisitResult, len(calls)), make([]VisitStats, len(calls)), make([]error, len(calls))
	valid := make([]VisitCall, 0, len(calls))
	at := make([]int, 0, len(calls)) // valid[k] is calls[at[k]]
	for i, c := range calls {
		if errs[i] = c.Params.Validate(g, c.Queries); errs[i] != nil {
			continue
		}
		if c.Params.MinVisits == 0 {
			c.Params.MinVisits = 1
		}
		valid, at = append(valid, c), append(at, i)
	}
	done := make([]bool, len(valid))
	if db, ok := e.(DeviceVisitBatcher); ok && len(valid) > 0 {
		r, s, handled, err := db.CountVisitCallsOnDevice(ctx, valid)
		if err != nil {
			return nil, nil, nil, err
		}
		for k, h := range handled {
			if h {
				res[at[k]], st[at[k]], done[k] = r[k], s[k], true
			}
		}
	}
	for k, c := range valid {
		if done[k] {
			continue
		}
		if res[at[k]], st[at[k]], err = CountVisits(ctx, e, g, c.Params, c.Queries); err != nil {
			return nil, nil, nil, err
		}
	}
	return res, st, errs, nil
}

// VisitCandidates cuts one query's counts to its candidates by
// CountVisits's rule (MinVisits, exclusions, TopK, order). Each slot packs
// vertex+1 in its high word and the count in its low word; zero slots are
// skipped. For engines implementing DeviceVisitCounter.
func VisitCandidates(g *graph.Graph, p VisitParams, q VisitQuery, slots []uint64) []Candidate {
	if p.MinVisits == 0 {
		p.MinVisits = 1
	}
	exclude := visitExclusions(g, p, q.Starts)
	return topCandidates(p, exclude, len(slots), func(i int) (uint32, int64, bool) {
		s := slots[i]
		return uint32(s>>32) - 1, int64(uint32(s)), s != 0
	})
}

// visitExclusions is the set a query's candidates leave out (nil: none).
func visitExclusions(g *graph.Graph, p VisitParams, starts []uint32) map[uint32]bool {
	if !p.ExcludeSeeds && !p.ExcludeNeighbors {
		return nil
	}
	exclude := map[uint32]bool{}
	for _, s := range starts {
		if p.ExcludeSeeds {
			exclude[s] = true
		}
		if p.ExcludeNeighbors {
			for _, v := range g.Neighbors(s) {
				exclude[v] = true
			}
		}
	}
	return exclude
}

// meanSteps is the expected steps of a walk before any is seen.
func (p VisitParams) meanSteps() float64 {
	if p.Algorithm.Kind == walk.PPR {
		return min(float64(p.Algorithm.Length), (1-p.Algorithm.StopProb)/p.Algorithm.StopProb)
	}
	return float64(p.Algorithm.Length)
}

// estimate is the steps a query is expected to walk.
func (p VisitParams) estimate(q VisitQuery) int64 {
	if p.StepsPerQuery > 0 {
		return p.StepsPerQuery
	}
	return int64(float64(p.WalksPerSeed*len(q.Starts)) * max(p.meanSteps(), 1))
}
