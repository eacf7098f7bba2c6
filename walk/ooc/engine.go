package ooc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// Option configures the out-of-core engine.
type Option func(*config)

type config struct {
	budget         int64
	workers        int
	chunkSize      int
	slots          int
	fixedSlots     bool
	partitionBytes int64
	direct         bool
	tableDir       string
	log            *slog.Logger
}

// WithMemoryLimit sets the engine's memory budget in bytes. Defaults to
// HostMemory: WALKSTAGE_HOST_MEMORY_LIMIT, the cgroup's memory limit, or
// MemAvailable.
func WithMemoryLimit(bytes int64) Option { return func(c *config) { c.budget = bytes } }

// WithWorkers sets the goroutines that walk a partition's walkers.
// Defaults to GOMAXPROCS.
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithChunkSize sets the walks per emitted chunk. Defaults to 1024.
func WithChunkSize(n int) Option { return func(c *config) { c.chunkSize = n } }

// WithSlots fixes how many partitions the pool holds at once (at least 2:
// one walked while the next is read), and with it the plan's division of
// the budget between walkers and partitions. By default the plan has
// DefaultSlots and each run divides the two shares again for its walks
// (sizeRun), with at least as many.
func WithSlots(n int) Option { return func(c *config) { c.slots, c.fixedSlots = n, true } }

// WithPartitionBytes caps a partition's loaded size below the budget's
// share, for many small partitions (tests). Defaults to 0: the share.
func WithPartitionBytes(n int64) Option { return func(c *config) { c.partitionBytes = n } }

// WithDirectIO says whether reads bypass the page cache (O_DIRECT) where
// the filesystem allows it. Defaults to true.
func WithDirectIO(on bool) Option { return func(c *config) { c.direct = on } }

// WithTableDir sets where the file of built alias tables goes (8 bytes
// per edge of the partitions walked weighted; unlinked once open).
// Defaults to the graph file's directory, else the temporary directory.
func WithTableDir(dir string) Option { return func(c *config) { c.tableDir = dir } }

// WithLogger sets where the plan and each run's I/O are logged. Defaults
// to slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Stats is what the engine's last run read and walked, beyond
// walk.RunStats.
type Stats struct {
	Partitions int
	Visits     int64 // partition visits
	Loads      int64 // partitions read (ahead, while another was walked, or waited for)
	Waits      int64 // visits that waited for their partition's read (not held, not read ahead)
	BytesRead  int64
	ReadTime   time.Duration // summed over reads, prefetches included
	// Sweeps is the partitions read over the partition count: how many
	// times over the run read the graph.
	Sweeps  float64
	Walkers int // walkers in flight at most
	Slots   int // partitions the pool held at once (the run's division of the budget, sizeRun)
	Pinned  int // of them, kept once filled
	// Scans is the Node2Vec steps taken by the exact scan after
	// walk.MaxRejections rejected proposals, with edges read from the file.
	Scans  int64
	Direct bool // reads bypassed the page cache
}

// Engine walks a graph file larger than memory (see the package comment).
type Engine struct {
	g      *graph.Graph
	path   string
	cfg    config
	r      *reader
	sec    sections
	plan   Plan
	bounds []uint32 // Partitions[i].Hi
	slots  []*part
	tables *tableFile // built alias tables, opened by the first weighted run
	scanR  *reader    // the file read buffered, for Node2Vec's scans (scanReader)

	mu    sync.Mutex
	stats walk.RunStats
	ooc   Stats
}

var (
	_ walk.Engine           = (*Engine)(nil)
	_ walk.StatsReporter    = (*Engine)(nil)
	_ walk.AlgorithmChecker = (*Engine)(nil)
)

// New plans g, loaded from the file at path, for the memory budget and
// opens the file for reading. g is used for its counts and flags only; its
// mapped arrays are never read.
func New(ctx context.Context, g *graph.Graph, path string, opts ...Option) (*Engine, error) {
	if g == nil || g.NumVertices() <= 0 {
		return nil, errors.New("out-of-core engine: empty graph")
	}
	cfg := config{workers: runtime.GOMAXPROCS(0), chunkSize: 1024, slots: DefaultSlots, direct: true, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 1 || cfg.chunkSize < 1 {
		return nil, fmt.Errorf("out-of-core engine: workers (%d) and chunk size (%d) must be positive", cfg.workers, cfg.chunkSize)
	}
	if cfg.budget == 0 {
		b, err := HostMemory()
		if err != nil {
			return nil, fmt.Errorf("out-of-core engine: %w", err)
		}
		if b.Bytes == 0 {
			return nil, fmt.Errorf("out-of-core engine: no memory budget: set %s (bytes)", EnvHostMemoryLimit)
		}
		cfg.budget = b.Bytes
	}
	sec, err := fileSections(g)
	if err != nil {
		return nil, fmt.Errorf("out-of-core engine: %w", err)
	}
	if err := checkSize(path, sec); err != nil {
		return nil, fmt.Errorf("out-of-core engine: %w", err)
	}
	r, err := openReader(path, cfg.direct)
	if err != nil {
		return nil, err
	}
	plan, err := planFor(ctx, g, r, sec, cfg.budget, cfg.slots, cfg.partitionBytes)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("out-of-core engine for %s: %w", path, err)
	}
	e := &Engine{g: g, path: path, cfg: cfg, r: r, sec: sec, plan: plan}
	for _, p := range plan.Partitions {
		e.bounds = append(e.bounds, p.Hi)
	}
	for range plan.Slots {
		e.slots = append(e.slots, &part{id: -1})
	}
	cfg.log.Info("out-of-core engine: graph walked from disk in partitions", "graph", g.Name, "file", path,
		"graph_bytes", plan.GraphBytes, "budget_bytes", plan.Budget, "partitions", len(plan.Partitions),
		"partition_bytes", plan.PartitionBytes, "slots", plan.Slots, "walker_bytes", plan.WalkerBytes, "direct_io", r.isDirect())
	return e, nil
}

func (e *Engine) Name() string { return "cpu" }

// Close closes the graph file; the engine's memory goes with it.
func (e *Engine) Close() error {
	if e.tables != nil {
		e.tables.close()
	}
	if e.scanR != nil {
		e.scanR.close()
	}
	return e.r.close()
}

// Plan is the engine's partition plan.
func (e *Engine) Plan() Plan { return e.plan }

// LastRunStats reports the last completed Run.
func (e *Engine) LastRunStats() walk.RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// OutOfCoreStats reports the last completed Run's reads and visits.
func (e *Engine) OutOfCoreStats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ooc
}

// Check refuses what the engine cannot walk out of core yet, naming why.
func (e *Engine) Check(a walk.Algorithm) error {
	const pre = "the graph is walked out of core (larger than the host memory budget)"
	switch {
	case a.Kind == walk.Node2Vec && a.ResolvedStepper() != walk.StepperRejection:
		return fmt.Errorf("%w: %s, which walks node2vec only with its rejection sampler (auto; this request: %s)",
			walk.ErrInvalidAlgorithm, pre, a.ResolvedStepper())
	case a.Kind == walk.Temporal:
		return fmt.Errorf("%w: %s, and temporal walks need the edge times, which the out-of-core engine does not read yet; "+
			"raise %s above %d bytes to walk them in memory", walk.ErrInvalidAlgorithm, pre, EnvHostMemoryLimit, e.plan.GraphBytes)
	case a.Kind == walk.MetaPath && !walk.UsesLabelTables(a, e.g):
		return fmt.Errorf("%w: %s, which walks metapath only on label tables (automatic sampler, at most %d labels; this request: sampler %s, %d labels)",
			walk.ErrInvalidAlgorithm, pre, walk.MaxTableLabels, a.Stepper, e.g.NumLabels)
	case a.Kind != walk.MetaPath && (a.ResolvedStepper() == walk.StepperZPRS || a.ResolvedStepper() == walk.StepperDPRS):
		return fmt.Errorf("%w: %s, which does not run the reservoir samplers (zprs, dprs); leave the sampler auto",
			walk.ErrInvalidAlgorithm, pre)
	}
	return nil
}

// pidOf is the partition of vertex v.
func (e *Engine) pidOf(v uint32) int {
	return sort.Search(len(e.bounds), func(i int) bool { return e.bounds[i] > v })
}

// Run walks the jobs partition by partition and emits their walks.
func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	t0 := time.Now()
	if err := walk.ValidateJobs(e.g, jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := e.Check(j.Algorithm); err != nil {
			return fmt.Errorf("job %d: %w", j.Tag, err)
		}
	}
	rs := newRun(e, jobs)
	if rs.need.alias && e.tables == nil {
		dir := e.cfg.tableDir
		if dir == "" {
			dir = tableDir(e.path)
		}
		tf, err := openTableFile(dir, e.g.NumEdges(), len(e.plan.Partitions), e.cfg.direct)
		if err != nil {
			return err
		}
		e.tables = tf
	}
	bytes0, nanos0 := e.readBytes()
	err := rs.loop(ctx, emit)
	if err != nil {
		return err
	}
	wall := time.Since(t0)
	bytes1, nanos1 := e.readBytes()
	st := Stats{Partitions: len(e.plan.Partitions), Visits: rs.visits, Loads: rs.loads, Waits: rs.waits,
		BytesRead: bytes1 - bytes0, ReadTime: time.Duration(nanos1 - nanos0),
		Sweeps: float64(rs.loads) / float64(len(e.plan.Partitions)), Walkers: rs.capW, Slots: rs.size.Slots, Pinned: rs.pinned, Scans: rs.scans,
		Direct: e.r.isDirect()}
	e.mu.Lock()
	e.stats = walk.RunStats{Walks: rs.walks, Steps: rs.steps, Wall: wall, Compute: wall, MemoryBytes: rs.memoryBytes()}
	e.ooc = st
	e.mu.Unlock()
	e.cfg.log.Info("out-of-core run", "graph", e.g.Name, "walks", rs.walks, "steps", rs.steps, "duration", wall.Seconds(),
		"partitions", st.Partitions, "visits", st.Visits, "loads", st.Loads, "waits", st.Waits, "sweeps", st.Sweeps,
		"bytes_read", st.BytesRead, "read_seconds", st.ReadTime.Seconds(), "walkers", st.Walkers, "slots", st.Slots,
		"pinned", st.Pinned, "node2vec_scans", st.Scans, "slot_bytes", rs.size.SlotBytes, "modelled_bytes_read", int64(rs.size.ReadBytes), "direct_io", st.Direct)
	return nil
}

// run is one Run's walker state. Walker w (a slot) is walk ids[w] of job
// jobOf[w], at vertex cur[w] after taken[w] steps; its vertices so far are
// path[w*stride : w*stride+taken[w]+1].
type run struct {
	e        *Engine
	jobs     []walk.Job
	steppers []*stepper
	need     needs
	stride   int
	capW     int
	size     runSize
	pinned   int // the leading slots kept once filled (victimExcept)

	jobOf []int32
	ids   []uint64
	cur   []uint32
	taken []uint32
	path  []uint32
	free  []int32
	// Node2Vec walkers' previous vertex and phase, and the candidates they
	// parked (n2vPark a walker), their attempts and count (node2vec.go);
	// nil in a run without Node2Vec.
	prev, phase  []uint32
	parkX        []uint32
	parkA, parkN []uint8
	// The exact scans' reads (fileAdjacency): offsets, and two buffers
	// each for targets and weights, one a vertex of the scan.
	scanOff        alignedBuf
	scanTgt, scanW [2]alignedBuf
	scanFlip       bool
	scans          int64

	queues  [][]int32 // waiting walkers by partition of their vertex
	held    []*part   // by partition: the slot holding it for this visit, nil if none
	pending [][]int32 // finished walkers by job, not yet emitted
	npend   int
	nextJob int // admission cursor: job, start
	nextIdx int

	shards []shard

	visits, loads, waits int64
	walks, steps         int64
}

// shard is one worker's share of a visit and what came of it.
type shard struct {
	in    []int32
	done  []int32
	moved []int32
	pids  []int32
	scans []int32 // Node2Vec walkers for the loop's exact scan
}

// Walker state in flight costs its row of vertices, its id, vertex, step
// and job, and its place in a queue (twice: the queue may grow by copying).
const walkerFixedBytes = 8 + 4 + 4 + 4 + 4 + 8

// minWalkers is the fewest walkers in flight whatever the budget: below it
// a partition visit amortizes its read over too few steps to finish.
const minWalkers = 256

func newRun(e *Engine, jobs []walk.Job) *run {
	rs := &run{e: e, jobs: jobs, queues: make([][]int32, len(e.plan.Partitions)), pending: make([][]int32, len(jobs))}
	maxLen, total := 0, 0
	n2v := false
	for _, j := range jobs {
		n2v = n2v || j.Algorithm.Kind == walk.Node2Vec
		s := newStepper(j.Algorithm, j.Seed)
		rs.steppers = append(rs.steppers, s)
		n := s.needs()
		rs.need.alias = rs.need.alias || n.alias
		rs.need.labelTables = rs.need.labelTables || n.labelTables
		rs.need.segAlias = rs.need.segAlias || n.segAlias
		maxLen = max(maxLen, j.Algorithm.Length)
		total += len(j.Starts)
	}
	rs.stride = maxLen + 1
	wb := int64(rs.stride*4 + walkerFixedBytes)
	if n2v {
		wb += n2vWalkerBytes
	}
	rs.size = sizeRun(e.plan, rs.need, e.g.NumLabels, total, maxLen, wb, e.plan.Slots, !e.cfg.fixedSlots)
	rs.capW = rs.size.Walkers
	e.setSlots(rs.size.Slots, rs.need)
	if !e.cfg.fixedSlots && rs.size.Slots < len(e.plan.Partitions) {
		rs.pinned = max(0, rs.size.Slots-1-maxPrefetch)
	}
	rs.jobOf = make([]int32, rs.capW)
	rs.ids = make([]uint64, rs.capW)
	rs.cur = make([]uint32, rs.capW)
	rs.taken = make([]uint32, rs.capW)
	rs.path = make([]uint32, rs.capW*rs.stride)
	rs.free = make([]int32, rs.capW)
	if n2v {
		rs.prev, rs.phase = make([]uint32, rs.capW), make([]uint32, rs.capW)
		rs.parkX, rs.parkA, rs.parkN = make([]uint32, rs.capW*n2vPark), make([]uint8, rs.capW*n2vPark), make([]uint8, rs.capW)
	}
	for i := range rs.free {
		rs.free[i] = int32(rs.capW - 1 - i)
	}
	rs.shards = make([]shard, e.cfg.workers)
	return rs
}

func (rs *run) memoryBytes() int64 {
	return int64(rs.capW) * int64(rs.stride*4+walkerFixedBytes)
}

// admit starts walks while walker slots are free, in job and start order.
func (rs *run) admit() {
	for len(rs.free) > 0 && rs.nextJob < len(rs.jobs) {
		j := &rs.jobs[rs.nextJob]
		if rs.nextIdx >= len(j.Starts) {
			rs.nextJob, rs.nextIdx = rs.nextJob+1, 0
			continue
		}
		w := rs.free[len(rs.free)-1]
		rs.free = rs.free[:len(rs.free)-1]
		v := j.Starts[rs.nextIdx]
		rs.jobOf[w], rs.ids[w], rs.cur[w], rs.taken[w] = int32(rs.nextJob), j.FirstWalk+uint64(rs.nextIdx), v, 0
		rs.path[int(w)*rs.stride] = v
		if rs.prev != nil {
			rs.prev[w], rs.phase[w], rs.parkN[w] = graph.NoVertex, n2vPropose, 0
		}
		p := rs.e.pidOf(v)
		rs.queues[p] = append(rs.queues[p], w)
		rs.nextIdx++
	}
}

// slotOf is the pool slot holding partition p with the tables the run
// needs, or nil.
func (rs *run) slotOf(p int) *part {
	for _, s := range rs.e.slots {
		if s.id == p && s.has.covers(rs.need) {
			return s
		}
	}
	return nil
}

// setSlots makes the pool hold n slots for a run needing need: a slot
// loaded with other tables is emptied, growing adds empty slots, shrinking
// drops the empty slots first, then the rest from the end, and their
// buffers with them.
func (e *Engine) setSlots(n int, need needs) {
	for len(e.slots) < n {
		e.slots = append(e.slots, &part{id: -1})
	}
	for i, s := range e.slots {
		if s.id >= 0 && s.has != need {
			// Tables other than the run's: loaded again if walked, and its
			// buffers dropped, since the run's division of the budget
			// counts a slot at its own tables' size.
			e.slots[i] = &part{id: -1}
		}
	}
	if len(e.slots) > n {
		slices.SortStableFunc(e.slots, func(a, b *part) int {
			ua, ub := a.id >= 0, b.id >= 0
			switch {
			case ua && !ub:
				return -1
			case ub && !ua:
				return 1
			}
			return 0
		})
		clear(e.slots[n:])
		e.slots = e.slots[:n]
	}
}

// choose picks the partition to visit: the most waiting walkers (C-SAW's
// most-active-first), a partition the pool holds counting double, since
// visiting it reads nothing. -1 when no walker waits.
func (rs *run) choose() int {
	best, score := -1, 0
	for p, q := range rs.queues {
		if len(q) == 0 {
			continue
		}
		s := len(q)
		if rs.slotOf(p) != nil {
			s *= 2
		}
		if s > score {
			best, score = p, s
		}
	}
	return best
}

// victim is the slot to load a partition into, never keep: an empty slot,
// else the one whose partition has the fewest waiting walkers (so the
// busiest stay cached). nil when every other slot's partition has more
// waiting walkers than limit.
func (rs *run) victim(keep *part, limit int) *part {
	return rs.victimExcept(map[*part]bool{keep: true}, limit)
}

// victimExcept is victim keeping every slot of keep. The first rs.pinned
// slots are filled once and never given up: a partition walked through
// (rs.held) has few walkers waiting, so ranking the kept partitions by
// waiting walkers evicted them at once (a weighted run on the 2-core VM
// loaded a partition a visit with eight slots kept, as with none).
func (rs *run) victimExcept(keep map[*part]bool, limit int) *part {
	var v *part
	least := -1
	for i, s := range rs.e.slots {
		if keep[s] || i < rs.pinned && s.id >= 0 {
			continue
		}
		if s.id < 0 {
			return s
		}
		if n := len(rs.queues[s.id]); (least < 0 || n < least) && n <= limit {
			v, least = s, n
		}
	}
	return v
}

// readAhead is the partitions being read while another is walked.
type readAhead struct {
	wg    sync.WaitGroup
	errs  []error
	slots []*part // being read into
}

func (f *readAhead) wait() error {
	if f == nil {
		return nil
	}
	f.wg.Wait()
	return errors.Join(f.errs...)
}

func (rs *run) load(ctx context.Context, s *part, p int) error {
	rs.loads++
	return rs.loadCounted(ctx, s, p)
}

// loadCounted is load for a caller that counted it (from the loop's
// goroutine: prefetches run beside it).
func (rs *run) loadCounted(ctx context.Context, s *part, p int) error {
	e := rs.e
	if err := s.load(ctx, e.g, e.r, e.sec, e.tables, p, e.plan.Partitions[p], rs.need, e.cfg.workers); err != nil {
		return fmt.Errorf("out-of-core engine: load partition %d [%d, %d): %w", p, e.plan.Partitions[p].Lo, e.plan.Partitions[p].Hi, err)
	}
	return nil
}

// loop is the engine: admit walkers, pick a partition, have it loaded,
// start reading the next while walking it, emit what finished.
func (rs *run) loop(ctx context.Context, emit walk.EmitFunc) (err error) {
	var pre *readAhead
	defer func() { pre.wait() }()
	for {
		perr := pre.wait()
		pre = nil
		if perr != nil {
			return perr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rs.admit()
		p := rs.choose()
		if p < 0 {
			if rs.npend > 0 {
				if err := rs.flush(emit, 1); err != nil {
					return err
				}
				continue
			}
			return nil
		}
		rs.visits++
		s := rs.slotOf(p)
		if s == nil {
			rs.waits++
			if s = rs.victim(nil, int(^uint(0)>>1)); s == nil {
				return errors.New("out-of-core engine: no pool slot to load into") // Slots >= 2: a bug
			}
			if err := rs.load(ctx, s, p); err != nil {
				return err
			}
		}
		pre = rs.startPrefetch(ctx, p, s)
		if err := rs.runScans(rs.visit(s, pre)); err != nil {
			return err
		}
		if err := rs.flush(emit, rs.e.cfg.chunkSize); err != nil {
			return err
		}
	}
}

// maxPrefetch is the most partitions read while one is walked.
const maxPrefetch = 2

// startPrefetch reads, while partition p (in slot cur) is walked, the
// partitions with the most waiting walkers that the pool does not hold,
// into other slots whose partitions have fewer waiting walkers, two at
// most: two reads in flight kept the disk busy across the gap between one
// visit's end and the next read's start, which one alone left idle.
func (rs *run) startPrefetch(ctx context.Context, p int, cur *part) *readAhead {
	type job struct {
		s *part
		p int
	}
	var jobs []job
	taken := map[*part]bool{cur: true}
	chosen := map[int]bool{p: true}
	// Chosen all before any read starts: a read changes its slot's id,
	// which slotOf reads.
	for range min(len(rs.e.slots)-1, maxPrefetch) {
		next, most := -1, 0
		for q, w := range rs.queues {
			if !chosen[q] && len(w) > most && rs.slotOf(q) == nil {
				next, most = q, len(w)
			}
		}
		if next < 0 {
			break
		}
		s := rs.victimExcept(taken, most-1)
		if s == nil {
			break
		}
		taken[s], chosen[next] = true, true
		jobs = append(jobs, job{s, next})
	}
	if len(jobs) == 0 {
		return nil
	}
	pre := &readAhead{errs: make([]error, len(jobs))}
	rs.loads += int64(len(jobs))
	for _, j := range jobs {
		pre.slots = append(pre.slots, j.s)
	}
	for k, j := range jobs {
		pre.wg.Go(func() { pre.errs[k] = rs.loadCounted(ctx, j.s, j.p) })
	}
	return pre
}

// visitShare is the fewest walkers a worker takes in a visit.
const visitShare = 256

// visit advances every walker waiting in the partition of slot s as far as
// it goes inside the partitions the pool holds (the slots pre is not
// reading into), on the workers, and queues those that left them by their
// new partition.
func (rs *run) visit(s *part, pre *readAhead) (scans []int32) {
	p := s.id
	q := rs.queues[p]
	rs.queues[p] = nil
	if rs.held == nil {
		rs.held = make([]*part, len(rs.queues))
	}
	clear(rs.held)
	for _, h := range rs.e.slots {
		// A slot being read into is skipped before its fields are read:
		// the read writes them meanwhile.
		if pre != nil && slices.Contains(pre.slots, h) {
			continue
		}
		if h.id >= 0 && h.has.covers(rs.need) {
			rs.held[h.id] = h
		}
	}
	nw := min(len(rs.shards), (len(q)+visitShare-1)/visitShare)
	var wg sync.WaitGroup
	for k := range nw {
		sh := &rs.shards[k]
		sh.in = q[k*len(q)/nw : (k+1)*len(q)/nw]
		sh.done, sh.moved, sh.pids, sh.scans = sh.done[:0], sh.moved[:0], sh.pids[:0], sh.scans[:0]
		wg.Go(func() { rs.advance(s, sh) })
	}
	wg.Wait()
	rs.queues[p] = q[:0] // walkers never arrive in p during its own visit: they walk on in it
	for k := range nw {
		sh := &rs.shards[k]
		for i, w := range sh.moved {
			rs.queues[sh.pids[i]] = append(rs.queues[sh.pids[i]], w)
		}
		for _, w := range sh.done {
			j := rs.jobOf[w]
			rs.pending[j] = append(rs.pending[j], w)
		}
		rs.npend += len(sh.done)
		scans = append(scans, sh.scans...)
	}
	return scans
}

// advanceLanes is how many walkers a worker steps in turn. A step's
// reads (the vertex's offsets, then the edge drawn) depend on each other,
// so one walker at a time waited on two misses a step: on the 2-core VM,
// with every partition held, that walked at a twelfth of walk/cpu's rate.
// Drawing for every lane first and reading their edges after lets the
// processor overlap the lanes' misses.
const advanceLanes = 16

// lane is a walker being advanced and the draw of its next step.
type lane struct {
	w      int32
	s      *part
	lo, hi uint32
	st     *stepper
	id     uint64
	c, n   uint32
	row    []uint32
	e      uint64
	y      uint32
	seg    bool
}

// advance walks shard sh's walkers from partition s0 on, through every
// partition held (rs.held), until each ends or reaches one not held.
func (rs *run) advance(s0 *part, sh *shard) {
	var ls [advanceLanes]lane
	in := sh.in
	// fill puts the next walkers of in into lane i until one draws a
	// step; false when in has none left.
	fill := func(l *lane) bool {
		for len(in) > 0 {
			w := in[0]
			in = in[1:]
			if rs.steppers[rs.jobOf[w]].kind == walk.Node2Vec {
				rs.advanceN2V(w, sh) // a walker of phases, not of lanes
				continue
			}
			*l = lane{w: w, s: s0, lo: s0.p.Lo, hi: s0.p.Hi, st: rs.steppers[rs.jobOf[w]], id: rs.ids[w], c: rs.cur[w], n: rs.taken[w],
				row: rs.path[int(w)*rs.stride : (int(w)+1)*rs.stride]}
			if rs.drawLane(l, sh) {
				return true
			}
		}
		return false
	}
	nl := 0
	for nl < advanceLanes && fill(&ls[nl]) {
		ls[nl].prefetchEdge()
		nl++
	}
	for nl > 0 {
		// Take every lane's drawn step, asking for the offsets of the
		// vertex reached, then draw every lane's next step, asking for
		// its edge's lines: a pass of the other lanes' work between a
		// request and its use.
		for i := 0; i < nl; i++ {
			l := &ls[i]
			l.n++
			l.c = l.st.take(l.s, l.e, l.y, l.seg)
			l.row[l.n] = l.c
			if v := l.c - l.lo; l.c >= l.lo && v < l.hi-l.lo {
				o := uintptr(unsafe.Pointer(unsafe.SliceData(l.s.off))) + uintptr(v)*8
				prefetch.Lines4(o, o+8, o, o)
			}
		}
		for i := 0; i < nl; {
			if rs.drawLane(&ls[i], sh) || fill(&ls[i]) {
				ls[i].prefetchEdge()
				i++
				continue
			}
			nl--
			ls[i] = ls[nl]
		}
	}
}

// prefetchEdge asks for the lines the lane's drawn step reads (take): the
// target, and the alias entry of a weighted walk.
func (l *lane) prefetchEdge() {
	tgt, prob, alt := l.s.tgt, l.s.prob, l.s.alt
	if l.seg {
		tgt, prob, alt = l.s.segs.tgt, l.s.segs.prob, l.s.segs.alt
	}
	t := uintptr(unsafe.Pointer(unsafe.SliceData(tgt))) + uintptr(l.e)*4
	p, a := t, t
	if l.st.weighted {
		p = uintptr(unsafe.Pointer(unsafe.SliceData(prob))) + uintptr(l.e)*4
		a = uintptr(unsafe.Pointer(unsafe.SliceData(alt))) + uintptr(l.e)*4
	}
	prefetch.Lines4(t, p, a, t)
}

// drawLane draws lane l's next step, switching to the held partition its
// vertex lies in; false when the walker ended or left the held partitions
// (then queued in sh, its position written back).
func (rs *run) drawLane(l *lane, sh *shard) bool {
	for {
		if l.n >= l.st.length {
			sh.done = append(sh.done, l.w)
			break
		}
		if l.c < l.lo || l.c >= l.hi {
			pid := rs.e.pidOf(l.c)
			if h := rs.held[pid]; h != nil {
				l.s, l.lo, l.hi = h, h.p.Lo, h.p.Hi
				continue
			}
			sh.moved = append(sh.moved, l.w)
			sh.pids = append(sh.pids, int32(pid))
			break
		}
		var ok bool
		v := l.c - l.lo
		if l.e, l.y, l.seg, ok = l.st.draw(l.s, l.id, l.n, l.c, l.s.off[v], l.s.off[v+1]); ok {
			return true
		}
		sh.done = append(sh.done, l.w)
		break
	}
	rs.cur[l.w], rs.taken[l.w] = l.c, l.n
	return false
}

// flush emits the finished walks of every job that has at least min of
// them, in chunks of chunkSize walks with ascending ids, and frees their
// walker slots.
func (rs *run) flush(emit walk.EmitFunc, least int) error {
	size := rs.e.cfg.chunkSize
	for j, ws := range rs.pending {
		if len(ws) == 0 || len(ws) < least {
			continue
		}
		slices.SortFunc(ws, func(a, b int32) int {
			if rs.ids[a] < rs.ids[b] {
				return -1
			}
			if rs.ids[a] > rs.ids[b] {
				return 1
			}
			return 0
		})
		for lo := 0; lo < len(ws); lo += size {
			part := ws[lo:min(lo+size, len(ws))]
			c := walk.Chunk{Tag: rs.jobs[j].Tag, WalkIDs: make([]uint64, len(part)), Offsets: make([]uint32, len(part)+1)}
			n := 0
			for k, w := range part {
				c.WalkIDs[k] = rs.ids[w]
				n += int(rs.taken[w]) + 1
				c.Offsets[k+1] = uint32(n)
			}
			c.Vertices = make([]uint32, n)
			for k, w := range part {
				copy(c.Vertices[c.Offsets[k]:c.Offsets[k+1]], rs.path[int(w)*rs.stride:])
			}
			rs.walks += int64(len(part))
			rs.steps += c.Steps()
			if err := emit(c); err != nil {
				return err
			}
		}
		rs.free = append(rs.free, ws...)
		rs.npend -= len(ws)
		rs.pending[j] = ws[:0]
	}
	return nil
}

// readBytes is what the engine's readers have read so far, and in how long.
func (e *Engine) readBytes() (n, nanos int64) {
	n, nanos = e.r.Bytes(), e.r.Nanos()
	if e.tables != nil {
		n, nanos = n+e.tables.r.Bytes(), nanos+e.tables.r.Nanos()
	}
	return n, nanos
}
