package visits

// The counting machinery of CountVisits (visits.go): waves of queries whose
// seeds' walks run in blocks of VisitBlockWalks, counted as they arrive.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

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
	chunks    []walk.Chunk
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
	c   walk.Chunk
}

// visitInbox hands a query's chunks from emit to the counting workers while
// the engine runs. scheduled says the query is in the work queue or being
// counted: one worker at a time owns a query's counting state.
type visitInbox struct {
	mu        sync.Mutex
	pending   []arrival
	scheduled bool
}

// countWave counts queries[lo:hi] into res[lo:hi]: it runs blocks of
// walks until every query has spent its budget or stopped early.
func countWave(ctx context.Context, e walk.Engine, g *graph.Graph, p VisitParams, queries []VisitQuery, lo, hi int, res []VisitResult, st *VisitStats) error {
	qs := newVisitQueries(g, p, queries[lo:hi])
	mean := p.meanSteps()
	for {
		refs, jobs := planBlocks(qs, p, lo, mean)
		if len(jobs) == 0 {
			break
		}
		st.Runs++
		if err := runBlocks(ctx, e, p, qs, refs, jobs, st); err != nil {
			return err
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

// newVisitQueries sets up the counting state of queries: each seed's
// budget, and the counting table's first size.
func newVisitQueries(g *graph.Graph, p VisitParams, queries []VisitQuery) []*visitQuery {
	qs := make([]*visitQuery, len(queries))
	for x := range qs {
		vq := queries[x]
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
	return qs
}

// planBlocks lists the blocks of walks the next run needs, one job each
// (job i is tagged i and fills refs[i]); none when every query is done. lo
// is the index of qs[0] among the request's queries, part of the seeds.
func planBlocks(qs []*visitQuery, p VisitParams, lo int, mean float64) (refs []blockRef, jobs []walk.Job) {
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
				jobs = append(jobs, walk.Job{Tag: len(jobs), Algorithm: p.Algorithm, Starts: starts,
					Seed: VisitBlockSeed(p.Seed, uint32(lo+x), uint32(i), uint32(b))})
			}
		}
	}
	return refs, jobs
}

// runBlocks runs jobs on e and counts their walks into qs as they arrive.
func runBlocks(ctx context.Context, e walk.Engine, p VisitParams, qs []*visitQuery, refs []blockRef, jobs []walk.Job, st *VisitStats) error {
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
	err := e.Run(ctx, jobs, func(c walk.Chunk) error {
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
	return nil
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
