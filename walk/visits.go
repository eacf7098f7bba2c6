package walk

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
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/graph"
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
	Algorithm Algorithm
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
	x := philox4x32([4]uint32{q, i, b, 0x56495354}, [2]uint32{uint32(seed), uint32(seed >> 32)})
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
func CountVisits(ctx context.Context, e Engine, g *graph.Graph, p VisitParams, queries []VisitQuery) ([]VisitResult, VisitStats, error) {
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

// DeviceVisitCounter is implemented by engines that count visits
// themselves (the GPU engine: walks and counts on the device, only the
// counts come back). CountVisits hands them its validated parameters
// (MinVisits at least 1) and every query; an engine that cannot count these
// parameters returns handled false and CountVisits counts on the host.
// Either way the results are the same.
type DeviceVisitCounter interface {
	CountVisitsOnDevice(ctx context.Context, p VisitParams, queries []VisitQuery) (res []VisitResult, st VisitStats, handled bool, err error)
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
	if p.Algorithm.Kind == PPR {
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

// visitSeed is one seed of a query being counted.
type visitSeed struct {
	start  uint32
	budget int64 // steps; math.MaxInt64 in walks mode
	cap    int64 // walks
	steps  int64 // counted
	walks  int64 // counted
	done   bool
	blocks []*visitBlock // by block number; nil until run, and after counted
	ran    int64         // walks requested so far (whole blocks)
	// walked and walkedSteps measure the walks received, for estimates.
	walked, walkedSteps int64
}

// visitBlock collects the chunks of one block's job.
type visitBlock struct {
	want, got int
	chunks    []Chunk
	// verts and off hold the block's walks in walk-id order once complete
	// (walk k visits verts[off[k]:off[k+1]]).
	verts []uint32
	off   []uint32
}

func (b *visitBlock) seal() {
	if len(b.chunks) == 1 && contiguous(b.chunks[0].WalkIDs) {
		b.verts, b.off = b.chunks[0].Vertices, b.chunks[0].Offsets
		b.chunks = nil
		return
	}
	type ref struct{ c, k int }
	refs := make([]ref, b.want)
	n := 0
	for ci := range b.chunks {
		c := &b.chunks[ci]
		n += len(c.Vertices)
		for k, id := range c.WalkIDs {
			refs[id] = ref{ci, k}
		}
	}
	b.verts, b.off = make([]uint32, 0, n), make([]uint32, 1, b.want+1)
	for _, r := range refs {
		b.verts = append(b.verts, b.chunks[r.c].Walk(r.k)...)
		b.off = append(b.off, uint32(len(b.verts)))
	}
	b.chunks = nil
}

func contiguous(ids []uint64) bool {
	for k, id := range ids {
		if id != uint64(k) {
			return false
		}
	}
	return true
}

// visitQuery is the counting state of one query.
type visitQuery struct {
	seeds   []visitSeed
	active  int
	j       int64 // walk level being consumed
	i       int   // next seed at level j
	counts  visitTable
	reached int64 // candidates with NV visits
	exclude map[uint32]bool
	stopped bool
	// tableSize is the counting table's first size: room for the distinct
	// vertices a budget may reach at half load, so it rarely grows.
	tableSize int
}

type blockRef struct {
	q, s int
	blk  *visitBlock
}

// arrival is a chunk of one block, on its way from the engine's emit to the
// worker counting its query.
type arrival struct {
	s   int
	blk *visitBlock
	c   Chunk
}

// visitInbox hands a query's chunks from emit to the counting workers while
// the engine runs. scheduled says the query is in the work queue or being
// counted: one worker at a time owns a query's counting state.
type visitInbox struct {
	mu        sync.Mutex
	pending   []arrival
	scheduled bool
}

func countWave(ctx context.Context, e Engine, g *graph.Graph, p VisitParams, queries []VisitQuery, lo, hi int, res []VisitResult, st *VisitStats) error {
	qs := make([]*visitQuery, hi-lo)
	for x := range qs {
		vq := queries[lo+x]
		q := &visitQuery{seeds: make([]visitSeed, len(vq.Starts)), tableSize: 1024}
		for int64(q.tableSize) < min(p.estimate(vq)/4, 2*int64(g.NumVertices()), 1<<21) {
			q.tableSize *= 2
		}
		var budgets []int64
		if p.StepsPerQuery > 0 {
			budgets = SplitSteps(p.StepsPerQuery, vq.Weights, len(vq.Starts))
		}
		for i, s := range vq.Starts {
			vs := visitSeed{start: s, budget: math.MaxInt64, cap: int64(p.WalksPerSeed)}
			if budgets != nil {
				vs.budget, vs.cap = budgets[i], budgets[i]
			}
			// A seed without out-edges (or without budget) takes no step.
			vs.done = vs.cap == 0 || g.Degree(s) == 0
			if !vs.done {
				q.active++
			}
			q.seeds[i] = vs
		}
		q.exclude = visitExclusions(g, p, vq.Starts)
		qs[x] = q
	}
	mean := p.meanSteps()
	for {
		var refs []blockRef
		var jobs []Job
		for x, q := range qs {
			if q.active == 0 || q.stopped {
				continue
			}
			for i := range q.seeds {
				s := &q.seeds[i]
				if s.done {
					continue
				}
				for range s.blocksWanted(mean) {
					b := s.ran / VisitBlockWalks
					n := int(min(VisitBlockWalks, s.cap-s.ran))
					starts := make([]uint32, n)
					for k := range starts {
						starts[k] = s.start
					}
					for int64(len(s.blocks)) <= b {
						s.blocks = append(s.blocks, nil)
					}
					blk := &visitBlock{want: n}
					s.blocks[b] = blk
					s.ran += int64(n)
					refs = append(refs, blockRef{x, i, blk})
					jobs = append(jobs, Job{Tag: len(jobs), Algorithm: p.Algorithm, Starts: starts,
						Seed: VisitBlockSeed(p.Seed, uint32(lo+x), uint32(i), uint32(b))})
				}
			}
		}
		if len(jobs) == 0 {
			break
		}
		st.Runs++
		var want int64
		for _, j := range jobs {
			want += int64(len(j.Starts))
		}
		// Counting overlaps the run: emit queues each chunk in its query's
		// inbox and schedules the query; workers count what has arrived.
		inbox := make([]visitInbox, len(qs))
		work := make(chan int, len(qs))
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for x := range work {
					qs[x].drain(&inbox[x], p)
				}
			}()
		}
		var got int64
		err := e.Run(ctx, jobs, func(c Chunk) error {
			if c.Tag < 0 || c.Tag >= len(refs) {
				return fmt.Errorf("visits: engine emitted tag %d of %d jobs", c.Tag, len(refs))
			}
			r := refs[c.Tag]
			for _, id := range c.WalkIDs {
				if id >= uint64(r.blk.want) {
					return fmt.Errorf("visits: engine emitted walk %d of a %d-walk job", id, r.blk.want)
				}
			}
			got += int64(c.Len())
			st.WalkedSteps += c.Steps()
			in := &inbox[r.q]
			in.mu.Lock()
			in.pending = append(in.pending, arrival{r.s, r.blk, c})
			if !in.scheduled {
				in.scheduled = true
				work <- r.q // never blocks: a query is queued at most once
			}
			in.mu.Unlock()
			return nil
		})
		close(work)
		wg.Wait()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("visits: engine emitted %d of %d walks", got, want)
		}
	}
	parallelQueries(len(qs), func(x int) {
		q := qs[x]
		r := VisitResult{Stopped: q.stopped, Candidates: q.counts.top(p, q.exclude)}
		for _, s := range q.seeds {
			r.Steps += s.steps
			r.Walks += s.walks
		}
		res[lo+x] = r
		q.counts = visitTable{}
	})
	return ctx.Err()
}

// drain counts the chunks that arrived for q until its inbox is empty.
// Only the worker that found q unscheduled runs it, so q's state is its own.
func (q *visitQuery) drain(in *visitInbox, p VisitParams) {
	for {
		in.mu.Lock()
		batch := in.pending
		in.pending = nil
		if len(batch) == 0 {
			in.scheduled = false
			in.mu.Unlock()
			return
		}
		in.mu.Unlock()
		for _, a := range batch {
			s := &q.seeds[a.s]
			a.blk.chunks = append(a.blk.chunks, a.c)
			a.blk.got += a.c.Len()
			s.walked += int64(a.c.Len())
			s.walkedSteps += a.c.Steps()
			if a.blk.got == a.blk.want {
				a.blk.seal()
			}
		}
		q.consume(p)
	}
}

// blocksWanted is how many more blocks seed s needs walked in the next run:
// enough, by the mean walk length seen so far, to spend the budget with a
// tenth to spare, at least one when its next walk is missing.
func (s *visitSeed) blocksWanted(prior float64) int64 {
	left := s.cap - s.ran
	if left <= 0 {
		return 0
	}
	if s.budget == math.MaxInt64 { // walks mode: all at once
		return (left + VisitBlockWalks - 1) / VisitBlockWalks
	}
	mean := prior
	if s.walked > 0 {
		mean = (float64(s.walkedSteps) + 1) / float64(s.walked+1)
	}
	mean = max(mean, 1e-3)
	// Steps the walks already run but not consumed are expected to bring.
	ahead := float64(s.ran-s.walks) * mean
	need := (float64(s.budget-s.steps) - ahead) * 1.1 / mean
	if need <= 0 {
		if s.ran > s.walks {
			return 0
		}
		need = 1
	}
	walks := min(int64(math.Ceil(need)), left)
	return (walks + VisitBlockWalks - 1) / VisitBlockWalks
}

// consume counts the query's walks in order until a walk not yet run is
// needed, the budget is spent or early stopping ends it.
func (q *visitQuery) consume(p VisitParams) {
	if q.counts.keys == nil {
		q.counts.init(q.tableSize)
	}
	for q.active > 0 && !q.stopped {
		if q.i == len(q.seeds) {
			q.i, q.j = 0, q.j+1
			continue
		}
		s := &q.seeds[q.i]
		if s.done {
			q.i++
			continue
		}
		b, k := q.j/VisitBlockWalks, int(q.j%VisitBlockWalks)
		if b >= int64(len(s.blocks)) || s.blocks[b] == nil || s.blocks[b].verts == nil {
			return // run more walks
		}
		blk := s.blocks[b]
		w := blk.verts[blk.off[k]+1 : blk.off[k+1]]
		if n := s.budget - s.steps; int64(len(w)) > n {
			w = w[:n]
		}
		for _, v := range w {
			s.steps++
			c := q.counts.add(v)
			if c == p.NV && p.NP > 0 && !q.exclude[v] {
				q.reached++
				if q.reached == p.NP {
					q.stopped = true
					break
				}
			}
		}
		s.walks++
		if k == blk.want-1 {
			s.blocks[b] = nil // counted: free it
		}
		if q.stopped {
			return
		}
		if s.steps == s.budget || s.walks == s.cap {
			s.done = true
			q.active--
			// Its later blocks will not be read.
			for x := b; x < int64(len(s.blocks)); x++ {
				s.blocks[x] = nil
			}
		}
		q.i++
	}
}

// parallelQueries runs f(0..n-1) on GOMAXPROCS goroutines.
func parallelQueries(n int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				x := int(next.Add(1) - 1)
				if x >= n {
					return
				}
				f(x)
			}
		}()
	}
	wg.Wait()
}

// visitTable counts visits per vertex: open addressing, linear probing,
// keys stored as vertex+1 (0 is empty), at most half full.
type visitTable struct {
	keys  []uint32
	vals  []int64
	n     int
	shift uint32 // 32 - log2(len(keys)): Fibonacci hashing keeps the product's top bits
}

func (t *visitTable) init(size int) {
	t.keys, t.vals, t.n = make([]uint32, size), make([]int64, size), 0
	t.shift = 32
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
}

func (t *visitTable) hash(v uint32) uint32 { return (v * 0x9E3779B1) >> t.shift }

// add counts one visit of v and returns its count.
func (t *visitTable) add(v uint32) int64 {
	mask := uint32(len(t.keys) - 1)
	key := v + 1
	for h := t.hash(v); ; h = (h + 1) & mask {
		switch t.keys[h] {
		case key:
			t.vals[h]++
			return t.vals[h]
		case 0:
			t.keys[h], t.vals[h] = key, 1
			t.n++
			if 2*t.n > len(t.keys) {
				t.grow()
			}
			return 1
		}
	}
}

func (t *visitTable) grow() {
	keys, vals := t.keys, t.vals
	t.init(2 * len(keys))
	mask := uint32(len(t.keys) - 1)
	for x, key := range keys {
		if key == 0 {
			continue
		}
		h := t.hash(key - 1)
		for t.keys[h] != 0 {
			h = (h + 1) & mask
		}
		t.keys[h], t.vals[h] = key, vals[x]
		t.n++
	}
}

// before orders candidates: more visits first, then the lower vertex id.
func before(a, b Candidate) bool {
	return a.Visits > b.Visits || a.Visits == b.Visits && a.Vertex < b.Vertex
}

// top selects the TopK candidates.
func (t *visitTable) top(p VisitParams, exclude map[uint32]bool) []Candidate {
	return topCandidates(p, exclude, len(t.keys), func(i int) (uint32, int64, bool) {
		return t.keys[i] - 1, t.vals[i], t.keys[i] != 0
	})
}

// topCandidates selects the TopK of n counted entries (at(i): vertex,
// visits, whether entry i is used) with a bounded heap whose root is the
// worst kept, then sorts them.
func topCandidates(p VisitParams, exclude map[uint32]bool, n int, at func(i int) (uint32, int64, bool)) []Candidate {
	h := make([]Candidate, 0, min(p.TopK, 1024))
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && before(h[w], h[l]) {
				w = l
			}
			if r < len(h) && before(h[w], h[r]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := range n {
		v, visits, used := at(i)
		if !used || visits < p.MinVisits || exclude[v] {
			continue
		}
		c := Candidate{Vertex: v, Visits: visits}
		if len(h) < p.TopK {
			h = append(h, c)
			for i := len(h) - 1; i > 0 && before(h[(i-1)/2], h[i]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
			continue
		}
		if before(c, h[0]) {
			h[0] = c
			down(0)
		}
	}
	sort.Slice(h, func(a, b int) bool { return before(h[a], h[b]) })
	return h
}
