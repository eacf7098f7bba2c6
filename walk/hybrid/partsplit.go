package hybrid

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// The partition split (issue 35; C-SAW §V, Garaph): the graph's vertices
// are cut into contiguous ranges, the densest ranges that fit the device
// budget are the device's, the rest the host's, and each side walks only
// the steps taken from its own vertices. A walker (walk.Walker: slot,
// vertex, step, previous vertex) that steps onto the other side's vertex is
// queued for it in batches; the walk's vertices are written into the job's
// rows by whichever side took each step, and the job's walks are emitted
// whole, in walk-id order, once every walker has ended. Neither side reads
// the other's edges, so neither copies them nor reads them in place: the
// GPU walks what it holds at its in-memory rate, the CPU the rest.
//
// This file holds what needs no GPU: the plan, the queues and the driver;
// the CPU side is cpu.HandoverSide. Its tests run two CPU sides (the
// second in the device's place) against the CPU engine alone.

// PartPlan is a partition split's cut of the vertices: Bounds[i] to
// Bounds[i+1] is partition i, Device[i] says the device walks it.
type PartPlan struct {
	Bounds       []uint32
	Device       []bool
	DeviceEdges  int64
	Edges        int64
	DeviceVerts  int64
	Vertices     int64
	DeviceBudget int64 // edges the plan was given
}

// PlanParts cuts g's vertices into at most parts contiguous ranges (greedy
// cuts of at most 2E/parts+1 edges, a vertex of more edges alone; any two
// neighbouring ranges then hold more than that, so there are at most
// parts) and gives the device the densest (edges per vertex, as gpu's
// stream plan chooses its resident partitions) that fit deviceEdges edges.
func PlanParts(g *graph.Graph, deviceEdges int64, parts int) *PartPlan {
	n, m := g.NumVertices(), g.NumEdges()
	parts = max(parts, 1)
	per := 2*int64(m)/int64(parts) + 1
	p := &PartPlan{Edges: int64(m), Vertices: int64(n), DeviceBudget: deviceEdges}
	p.Bounds = append(p.Bounds, 0)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && int64(g.Offsets[hi+1]-g.Offsets[lo]) <= per {
			hi++
		}
		p.Bounds = append(p.Bounds, uint32(hi))
		lo = hi
	}
	np := len(p.Bounds) - 1
	p.Device = make([]bool, np)
	order := make([]int, np)
	for i := range order {
		order[i] = i
	}
	edges := func(i int) int64 { return int64(g.Offsets[p.Bounds[i+1]] - g.Offsets[p.Bounds[i]]) }
	slices.SortStableFunc(order, func(a, b int) int {
		// Densest first: edges(a)/verts(a) > edges(b)/verts(b).
		da := edges(a) * int64(p.Bounds[b+1]-p.Bounds[b])
		db := edges(b) * int64(p.Bounds[a+1]-p.Bounds[a])
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return 0
	})
	for _, i := range order {
		if e := edges(i); p.DeviceEdges+e <= deviceEdges {
			p.Device[i] = true
			p.DeviceEdges += e
			p.DeviceVerts += int64(p.Bounds[i+1] - p.Bounds[i])
		}
	}
	return p
}

// DeviceSet is the vertices the device walks.
func (p *PartPlan) DeviceSet() walk.VertexSet {
	s := walk.NewVertexSet(int(p.Vertices))
	for i, d := range p.Device {
		if d {
			s.AddRange(p.Bounds[i], p.Bounds[i+1])
		}
	}
	return s
}

// String is the plan on one line.
func (p *PartPlan) String() string {
	nd := 0
	for _, d := range p.Device {
		if d {
			nd++
		}
	}
	return fmt.Sprintf("partition split: %d partitions, %d on the device (%.1f%% of %d edges, %.1f%% of %d vertices), the rest walked by the CPU",
		len(p.Device), nd, 100*float64(p.DeviceEdges)/float64(max(p.Edges, 1)), p.Edges,
		100*float64(p.DeviceVerts)/float64(max(p.Vertices, 1)), p.Vertices)
}

// PartSide is one side of a partition split for one job: it walks the
// walkers of in while their vertex is its own, appends those that step
// onto the other side's vertices to out, and returns out, the walks that
// ended and the steps taken (cpu.HandoverSide; the GPU's side walks a
// batch of walkers on the device-resident partitions).
type PartSide interface {
	Advance(in, out []walk.Walker) ([]walk.Walker, int, int64)
}

// SideConfig is how the driver runs one side.
type SideConfig struct {
	Name string
	Side PartSide
	Set  walk.VertexSet // the vertices this side walks
	// Workers is how many goroutines call Advance at once (the CPU's
	// cores; 1 for the GPU, which walks one batch at a time).
	Workers int
	// Gather takes every batch queued for the side into one Advance call
	// (the GPU: a call pays a launch and two copies whatever its size).
	Gather bool
}

// SplitStats is what a partition-split job did, side by side (index 0 the
// first SideConfig).
type SplitStats struct {
	Names  [2]string
	Steps  [2]int64
	Ended  [2]int64
	Handed [2]int64 // walkers each side handed to the other
	Calls  [2]int64 // Advance calls
	Busy   [2]time.Duration
	Walks  int64
	Wall   time.Duration
}

// String is the stats on one line.
func (s SplitStats) String() string {
	total := max(s.Steps[0]+s.Steps[1], 1)
	return fmt.Sprintf("partition split: %s %.1f%% of the steps (%d, %d calls, busy %v), %s %.1f%% (%d, %d calls, busy %v); walkers handed %s->%s %d, %s->%s %d (%.2f a walk)",
		s.Names[0], 100*float64(s.Steps[0])/float64(total), s.Steps[0], s.Calls[0], s.Busy[0].Round(time.Millisecond),
		s.Names[1], 100*float64(s.Steps[1])/float64(total), s.Steps[1], s.Calls[1], s.Busy[1].Round(time.Millisecond),
		s.Names[0], s.Names[1], s.Handed[0], s.Names[1], s.Names[0], s.Handed[1],
		float64(s.Handed[0]+s.Handed[1])/float64(max(s.Walks, 1)))
}

// splitBatch is the walkers a queue entry holds at most: 64 KiB of walker
// state, large enough that a queue operation is rare next to the steps of
// its walkers, small enough that the other side's workers all get some.
const splitBatch = 4096

// walkerQueue is one side's inbound walkers, in batches. It is unbounded:
// a walker is in one place at a time, so the queues together hold at most
// the job's walkers (16 bytes each), and a bound would let the two sides
// block on each other's full queue.
type walkerQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	batches [][]walk.Walker
	closed  bool
	spare   [][]walk.Walker // emptied batches for reuse
}

func newWalkerQueue() *walkerQueue {
	q := new(walkerQueue)
	q.cond.L = &q.mu
	return q
}

func (q *walkerQueue) push(b []walk.Walker) {
	if len(b) == 0 {
		return
	}
	q.mu.Lock()
	q.batches = append(q.batches, b)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop waits for a batch (all queued batches, joined into one, when all is
// set) and returns false once the queue is closed.
func (q *walkerQueue) pop(all bool, into []walk.Walker) ([]walk.Walker, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.batches) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	if !all {
		b := q.batches[len(q.batches)-1]
		q.batches = q.batches[:len(q.batches)-1]
		return b, true
	}
	into = into[:0]
	for _, b := range q.batches {
		into = append(into, b...)
		q.spare = append(q.spare, b[:0])
	}
	q.batches = q.batches[:0]
	return into, true
}

// batch is an empty batch, reused when one was given back.
func (q *walkerQueue) batch() []walk.Walker {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.spare); n > 0 {
		b := q.spare[n-1]
		q.spare = q.spare[:n-1]
		return b
	}
	return make([]walk.Walker, 0, splitBatch)
}

func (q *walkerQueue) giveBack(b []walk.Walker) {
	q.mu.Lock()
	q.spare = append(q.spare, b[:0])
	q.mu.Unlock()
}

func (q *walkerQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// RunPartSplit walks job on the two sides, whose sets must cover every
// vertex once, into rows (walk.NewHandoverRows of the job). It returns once
// every walk has ended, or ctx is done.
func RunPartSplit(ctx context.Context, job walk.Job, rows *walk.HandoverRows, sides [2]SideConfig) (SplitStats, error) {
	t0 := time.Now()
	var st SplitStats
	for i, s := range sides {
		st.Names[i] = s.Name
		if s.Side == nil || s.Workers < 1 {
			return st, fmt.Errorf("partition split: side %q needs an Advance and at least one worker", s.Name)
		}
		if len(s.Set) != len(sides[0].Set) {
			return st, errors.New("partition split: the sides' vertex sets differ in size")
		}
	}
	for k := range sides[0].Set {
		if sides[0].Set[k]&sides[1].Set[k] != 0 {
			return st, fmt.Errorf("partition split: vertex %d is on both sides", k*64)
		}
	}
	n := int64(len(job.Starts))
	st.Walks = n
	if n == 0 {
		return st, nil
	}
	q := [2]*walkerQueue{newWalkerQueue(), newWalkerQueue()}
	// Each walker starts on the side that holds its start vertex; one on
	// neither (a set that misses it) is walked by the first side's Advance,
	// which hands it on as any walker outside its set, and the second
	// hands it back: it would never end, so the sets are checked here.
	var cur [2][]walk.Walker
	for i, v := range job.Starts {
		s := 0
		if !sides[0].Set.Has(v) {
			s = 1
			if !sides[1].Set.Has(v) {
				return st, fmt.Errorf("partition split: start vertex %d is on neither side", v)
			}
		}
		if cur[s] == nil {
			cur[s] = make([]walk.Walker, 0, splitBatch)
		}
		cur[s] = append(cur[s], walk.Walker{Slot: uint32(i), Vertex: v, Prev: graph.NoVertex})
		if len(cur[s]) == splitBatch {
			q[s].push(cur[s])
			cur[s] = nil
		}
	}
	q[0].push(cur[0])
	q[1].push(cur[1])

	var ended atomic.Int64
	var mu sync.Mutex
	done := func() {
		q[0].close()
		q[1].close()
	}
	stop := context.AfterFunc(ctx, done)
	defer stop()
	var wg sync.WaitGroup
	for si := range sides {
		sc, in, other := sides[si], q[si], q[1-si]
		for range sc.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var steps, handed, calls, endedHere int64
				var busy time.Duration
				var gathered []walk.Walker
				for {
					b, ok := in.pop(sc.Gather, gathered)
					if !ok {
						break
					}
					t := time.Now()
					out := other.batch()
					out, e, s := sc.Side.Advance(b, out)
					busy += time.Since(t)
					calls++
					steps += s
					endedHere += int64(e)
					handed += int64(len(out))
					if sc.Gather {
						gathered = b
					} else {
						in.giveBack(b)
					}
					// A gathered call's hand-over goes out in batches,
					// so the other side's workers share it.
					for len(out) > splitBatch {
						nb := other.batch()
						nb = append(nb, out[len(out)-splitBatch:]...)
						out = out[:len(out)-splitBatch]
						other.push(nb)
					}
					if len(out) > 0 {
						other.push(out)
					} else {
						other.giveBack(out)
					}
					if ended.Add(int64(e)) == n {
						done()
					}
				}
				mu.Lock()
				st.Steps[si] += steps
				st.Handed[si] += handed
				st.Calls[si] += calls
				st.Ended[si] += endedHere
				st.Busy[si] += busy
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	st.Wall = time.Since(t0)
	if ended.Load() != n {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		return st, fmt.Errorf("partition split: %d of %d walks ended", ended.Load(), n)
	}
	return st, nil
}

// EmitRows emits job's walks from rows in chunks of chunkWalks walks, in
// walk-id order. Chunks are built workers at a time, in parallel (a chunk
// copies its walks out of the rows: the copy of a scale-22 job's 3 GB of
// walks is a second on one core), and emitted in order, so at most
// workers chunks wait for emit.
func EmitRows(job walk.Job, rows *walk.HandoverRows, chunkWalks, workers int, emit walk.EmitFunc) error {
	n := len(job.Starts)
	chunkWalks = max(chunkWalks, 1)
	workers = max(workers, 1)
	nc := (n + chunkWalks - 1) / chunkWalks
	window := make([]walk.Chunk, workers)
	for c0 := 0; c0 < nc; c0 += workers {
		k := min(workers, nc-c0)
		var wg sync.WaitGroup
		for w := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo := (c0 + w) * chunkWalks
				window[w] = chunkOfRows(job, rows, lo, min(lo+chunkWalks, n))
			}()
		}
		wg.Wait()
		for w := range k {
			if err := emit(window[w]); err != nil {
				return err
			}
			window[w] = walk.Chunk{}
		}
	}
	return nil
}

// chunkOfRows is walks [lo, hi) of job as a chunk, copied out of rows.
func chunkOfRows(job walk.Job, rows *walk.HandoverRows, lo, hi int) walk.Chunk {
	c := walk.Chunk{Tag: job.Tag, WalkIDs: make([]uint64, hi-lo), Offsets: make([]uint32, hi-lo+1), Starts: job.Starts[lo:hi:hi]}
	total := 0
	for k := lo; k < hi; k++ {
		total += int(rows.Lens[k])
	}
	c.Vertices = make([]uint32, 0, total)
	for k := lo; k < hi; k++ {
		c.WalkIDs[k-lo] = job.FirstWalk + uint64(k)
		c.Vertices = rows.CopyWalk(c.Vertices, k)
		c.Offsets[k-lo+1] = uint32(len(c.Vertices))
	}
	return c
}

// PartPilot is what a pilot of walks says of a partition split: of its
// steps, how many are taken from a device vertex, and how often a walk's
// current vertex changes side between two steps (a hand-over).
type PartPilot struct {
	Walks, Steps int64
	DeviceSteps  int64
	Handovers    int64
}

// PilotPartSplit walks about sample of job's starts on ref, the CPU
// engine, and counts their steps by side and their hand-overs under the
// device set dev: a walk's vertex changing side before a step is taken
// from it. (The split also hands over a walker whose walk then ends at
// once, at a dead end or a PPR stop drawn on the other side; the pilot
// does not count those.)
func PilotPartSplit(ctx context.Context, ref walk.Engine, job walk.Job, dev walk.VertexSet, sample int) (PartPilot, error) {
	var p PartPilot
	k := max(len(job.Starts)/max(sample, 1), 1)
	ids := make([]uint32, 0, sample+1)
	for i := 0; i < len(job.Starts); i += k {
		ids = append(ids, uint32(i))
	}
	// The sampled starts walk as a job of their own (ids from
	// FirstWalk): other walks than the job's, from the same starts and
	// distribution.
	pj := job
	pj.Starts = make([]uint32, len(ids))
	for i, id := range ids {
		pj.Starts[i] = job.Starts[id]
	}
	err := ref.Run(ctx, []walk.Job{pj}, func(c walk.Chunk) error {
		for i := range c.Len() {
			w := c.Walk(i)
			p.Walks++
			p.Steps += int64(len(w) - 1)
			for s := 0; s+1 < len(w); s++ {
				on := dev.Has(w[s])
				if on {
					p.DeviceSteps++
				}
				if s+2 < len(w) && dev.Has(w[s+1]) != on {
					p.Handovers++
				}
			}
		}
		if r, ok := ref.(walk.ChunkReleaser); ok {
			r.Release(c)
		}
		return nil
	})
	return p, err
}

// HandoverStepCost is what a hand-over costs the host, in CPU-engine
// steps, for the cost model: the CPU side starts a segment (its vertex's
// offsets, a cold row line) for each walker handed to it and queues each
// walker it hands on, the device side copies each over PCIe both ways and
// sorts it. Measured at a 50% device share (docs/benchmarks/hybrid.md,
// the partition split): about 6.6. The model
// takes 1, the least a hand-over can cost (the segment's first load is a
// step's), so it chooses the split only where even cheap hand-overs would
// pay, and never where the measured ones could not.
const HandoverStepCost = 1.0

// Speedup is the pilot's bound on the split's rate against the CPU engine
// alone, with the device's own steps free: the CPU engine's work is the
// steps, the split's the host steps and handoverCost steps a hand-over.
func (p PartPilot) Speedup(handoverCost float64) float64 {
	host := float64(p.Steps - p.DeviceSteps)
	return float64(p.Steps) / max(host+handoverCost*float64(p.Handovers), 1)
}

// Wins says whether the split should be chosen over the CPU engine alone:
// its bound (Speedup at HandoverStepCost) beats the CPU by a tenth.
func (p PartPilot) Wins() bool { return p.Steps > 0 && p.Speedup(HandoverStepCost) >= 1.1 }

// String is the pilot on one line.
func (p PartPilot) String() string {
	return fmt.Sprintf("pilot of %d walks: %.1f%% of %d steps from device vertices, %.2f hand-overs a walk (%.2f a step); bound %.2fx the CPU engine at %.1f steps a hand-over, split chosen: %v",
		p.Walks, 100*float64(p.DeviceSteps)/float64(max(p.Steps, 1)), p.Steps, float64(p.Handovers)/float64(max(p.Walks, 1)),
		float64(p.Handovers)/float64(max(p.Steps, 1)), p.Speedup(HandoverStepCost), HandoverStepCost, p.Wins())
}
