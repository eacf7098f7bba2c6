package livegraph

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// applyParallelMin is the least updates a record has for Apply to spread
// it over the cores (applyParallel); smaller records, and every record of a
// live graph with a time window (whose eviction schedule is one list), are
// applied one update after another.
const applyParallelMin = 2048

// WithWorkers bounds the goroutines a live graph spreads its work over:
// Apply's records of applyParallelMin updates or more, and Compact. A
// background compaction gives its own work (Compact, and the live graph
// its catch up builds over the compacted base) fewer than the cores, so
// that the applier's goroutines find cores free while it runs
// (stage/live's CompactionWorkers). Defaults to GOMAXPROCS.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// Cores tells a live graph how many goroutines its parallel work may take
// at the moment: the stage's walkers share the cores with the applier and
// the compaction, and hold them only while walk jobs run or wait.
type Cores interface {
	// Cores returns how many of the n goroutines a pass would take it may
	// take now; an answer below 1 is taken as 1, above n as n. It is asked
	// once a pass (a record or the records of ApplyRecords), so it must be
	// cheap (an atomic load or two) and safe from several goroutines.
	Cores(n int) int
}

// WithCores has every parallel pass ask c how many of its goroutines it
// may take (WithWorkers, or GOMAXPROCS, is the most): Apply's and
// ApplyRecords' passes once a pass, Compact before each 1,024 vertices,
// the goroutines above the answer waiting meanwhile (so a compaction gives
// cores back to walks that start while it runs, and takes them again when
// they end). Defaults to no bound but WithWorkers. SetCores sets it on a
// live graph already made.
func WithCores(c Cores) Option { return func(o *options) { o.cores = c } }

// SetCores is WithCores on l: the stage makes its live graph before the
// walkers that share its cores. Applier only, or before it starts.
func (l *Live) SetCores(c Cores) { l.opts.cores = c }

// withWorkerHook has hook called at the start of each goroutine Apply
// spreads work over, and when a goroutine of Compact takes its first
// vertices (tests count them).
func withWorkerHook(hook func()) Option { return func(o *options) { o.onWorker = hook } }

// most is how many goroutines o allows at most (WithWorkers), at least
// one.
func (o *options) most() int {
	if o.workers > 0 {
		return o.workers
	}
	return max(1, runtime.GOMAXPROCS(0))
}

// procs is how many goroutines o allows now: most, bounded by WithCores.
func (o *options) procs() int {
	n := o.most()
	if o.cores != nil {
		n = min(n, max(1, o.cores.Cores(n)))
	}
	return n
}

// yieldPause is how long a goroutine of Compact above what WithCores allows
// waits before it asks again: long against the question (an atomic load),
// short against a compaction (seconds) and a walk job (tens of ms or more).
const yieldPause = 2 * time.Millisecond

// wait holds goroutine w of a parallel loop while WithCores allows fewer
// than w+1 goroutines, until done or ctx ends; it reports whether w may
// go on (false: done, or ctx ended). Goroutine 0 never waits.
func (o *options) wait(ctx context.Context, w int, done func() bool) bool {
	if o.cores == nil || w == 0 {
		return true
	}
	var t *time.Timer
	for w >= o.procs() {
		if done() {
			return false
		}
		if t == nil {
			t = time.NewTimer(yieldPause)
			defer t.Stop()
		} else {
			t.Reset(yieldPause)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// started runs the worker hook, if any.
func (o *options) started() {
	if o.onWorker != nil {
		o.onWorker()
	}
}

// PassWorkers is how many goroutines the last pass of Apply or
// ApplyRecords took (1: the caller's own). Applier only.
func (l *Live) PassWorkers() int { return l.passWorkers }

// Record is one edge-topic record for ApplyRecords: its updates and where
// it was read (a negative Partition leaves the watermark alone, as in
// Apply).
type Record struct {
	Partition int32
	Offset    int64
	Updates   []Update
}

// ApplyRecords applies recs in order, leaving the state, the watermark and
// the counts that Apply on each record in turn leaves, to the byte. A
// record Apply would refuse is passed: none of its updates is applied, the
// watermark moves past it as Apply(partition, offset, nil) moves it, and
// errs[i] is Apply's error (errs is nil when every record was applied).
//
// Why: an applier catching up a backlog hands over the records queued
// behind the one it took, and ApplyRecords applies them in one parallel
// pass (applyParallel over their updates, one after another). Apply spreads
// each record over the cores on its own, and on the 16-core host at scale
// 22 a record of 4,096 updates kept its goroutines busy for about a
// millisecond, most of it starting them, waiting for the last and the
// serial pass between records: its workers used 5.5 of 16 cores
// (docs/benchmarks/live-graph.md, "Ingest on the 16-core host").
func (l *Live) ApplyRecords(recs []Record) (errs []error) {
	total := 0
	for i := range recs {
		total += len(recs[i].Updates)
	}
	one := l.win != nil || l.serialApply || len(recs) < 2 || total < applyParallelMin
	if !one {
		// Checked against the state before any of them: the count of
		// vertices they add is an upper bound, so a pass that might reach
		// the bound goes record by record, where Apply checks each
		// against the state the last left.
		fresh := 0
		for i := range recs {
			if l.CheckSchema(recs[i].Updates) != nil {
				one = true
				break
			}
			fresh += l.fresh(recs[i].Updates)
		}
		one = one || int64(l.baseV)+int64(len(l.addedIDs))+int64(fresh) > graph.MaxVertices
	}
	if one {
		for i, r := range recs {
			if err := l.Apply(r.Partition, r.Offset, r.Updates); err != nil {
				if errs == nil {
					errs = make([]error, len(recs))
				}
				errs[i] = err
				_ = l.Apply(r.Partition, r.Offset, nil)
			}
		}
		return errs
	}
	buf := l.merged[:0]
	for i := range recs {
		buf = append(buf, recs[i].Updates...)
	}
	l.applyParallel(buf)
	l.merged = buf[:0]
	for _, r := range recs {
		if r.Partition >= 0 {
			l.watermark[r.Partition] = r.Offset + 1
		}
		if l.compacting != nil {
			l.compacting.record(r.Partition, r.Offset, r.Updates)
		}
	}
	return nil
}

// applyParallel applies ups as the serial loop does, the same state to the
// byte, on several goroutines. An update changes only its source vertex's
// state (an insert appends to it, a delete adds a tombstone to it), so
// updates are grouped by the tree mid (midFan * leafFan vertices) of their
// source and each mid's updates are applied in record order by one
// goroutine, which copies on write only its own mids' nodes. What is
// shared is done first, in one pass in record order: the dense ids of the
// endpoints, inserts adding the vertices the graph lacks exactly as the
// serial loop adds them, and the top slice made this epoch's and long
// enough. Counts are kept per goroutine and added after.
//
// Why: the applier is one goroutine, and on the 16-core host at scale 22
// it applied 0.84-1.12 M updates/s, busy all the time, while the issue
// asks for 5 M/s (docs/benchmarks/live-graph.md, "Through the stage").
func (l *Live) applyParallel(ups []Update) {
	p := &l.pass
	p.ops = resize(p.ops, len(ups))
	p.mids = resize(p.mids, len(ups))
	ops, mids := p.ops, p.mids
	maxMid := l.resolve(ups, ops, mids)
	l.topFor(maxMid)
	// The updates of each mid, in record order: a counting sort.
	p.start = resize(p.start, maxMid+2)
	start := p.start
	clear(start)
	for _, mi := range mids {
		if mi >= 0 {
			start[mi+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	p.order = resize(p.order, int(start[len(start)-1]))
	p.fill = append(p.fill[:0], start[:maxMid+1]...)
	order, fill := p.order, p.fill
	for i, mi := range mids {
		if mi >= 0 {
			order[fill[mi]] = int32(i)
			fill[mi]++
		}
	}
	workers := min(l.opts.procs(), maxMid+1)
	l.passWorkers = workers
	p.stats = resize(p.stats, workers)
	p.sums = resize(p.sums, workers)
	stats, sums := p.stats, p.sums
	clear(stats)
	clear(sums)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l.opts.started()
			st := &stats[w]
			for mi := int(next.Add(1) - 1); mi <= maxMid; mi = int(next.Add(1) - 1) {
				idx := order[start[mi]:start[mi+1]]
				for len(idx) > 0 {
					chunk := idx[:min(len(idx), touchChunk)]
					idx = idx[len(chunk):]
					sums[w] += l.touchSources(chunk, func(i int32) uint32 { return ops[i].s })
					for _, i := range chunk {
						o := ops[i]
						if ups[i].Op == Insert {
							l.insertAt(st, &ups[i], o.s, o.d)
						} else {
							l.deleteAt(st, o.s, o.d)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range stats {
		l.stats.add(&stats[i])
		l.touched += sums[i]
	}
}

// passScratch is applyParallel's and resolve's working memory, kept
// between passes (as Live.merged is): made anew each pass it was about 20
// bytes an update and a dozen objects a pass, an eighth of what the
// applier allocated at scale 18 (BenchmarkIngest), each byte bringing the
// collector's next cycle nearer (issue 37: the collector took 2.4-3.2 of
// the 16-core host's cores while it ingested 5 M updates/s). Nothing in it
// holds a pointer but the slices' own arrays, so the collector never
// scans it. Applier only.
type passScratch struct {
	ops                      []applyOp
	mids, start, order, fill []int32
	stats                    []Stats
	sums                     []uint64
	// miss are resolve's per-goroutine lists of the updates naming an
	// id the graph lacks.
	miss [][]int32
}

// resize returns s with length n, reusing its array when it has room;
// what it held is left as it was (callers clear or overwrite it).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// applyOp is an update's endpoints as dense ids; s is skipOp for a delete
// naming a vertex the graph lacks.
type applyOp struct{ s, d uint32 }

const skipOp = ^uint32(0)

// resolvePerWorker is the least updates per goroutine resolve spreads its
// lookups over: below, starting goroutines costs more than the lookups.
const resolvePerWorker = 4096

// resolve fills ops and mids (the tree mid of the source, -1 for a skipped
// delete) for applyParallel and returns the largest mid, with the state
// the serial loop leaves: inserts add the vertices the graph lacks in
// record order. Lookups of the ids the graph has are spread over goroutines
// (nothing is added meanwhile, so each finds what the serial loop would);
// the updates naming an id not found are then resolved one after another in
// record order, adding vertices as the serial loop adds them (a delete
// naming a vertex an earlier insert of ups added finds it then).
//
// Why: with the applier's passes over many records (ApplyRecords), this
// pass alone on one goroutine was a third of a pass at scale 22 on 16 cores.
func (l *Live) resolve(ups []Update, ops []applyOp, mids []int32) int {
	workers := min(l.opts.procs(), max(1, len(ups)/resolvePerWorker))
	type part struct {
		miss    []int32
		deleted int64
		maxMid  int
	}
	parts := make([]part, workers)
	if len(l.pass.miss) < workers {
		l.pass.miss = append(l.pass.miss, make([][]int32, workers-len(l.pass.miss))...)
	}
	for w := range parts {
		parts[w].miss = l.pass.miss[w][:0]
	}
	per := (len(ups) + workers - 1) / workers
	lookups := func(w int) {
		p := &parts[w]
		for i := w * per; i < min(len(ups), (w+1)*per); i++ {
			u := &ups[i]
			if u.Op != Insert {
				p.deleted++
			}
			s, ok1 := l.lookup(u.Src)
			d, ok2 := l.lookup(u.Dst)
			if !ok1 || !ok2 {
				p.miss = append(p.miss, int32(i))
				continue
			}
			ops[i] = applyOp{s, d}
			mi := int(s >> (leafBits + midBits))
			mids[i] = int32(mi)
			p.maxMid = max(p.maxMid, mi)
		}
	}
	if workers == 1 {
		lookups(0)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				l.opts.started()
				lookups(w)
			})
		}
		wg.Wait()
	}
	maxMid := 0
	for w := range parts {
		p := &parts[w]
		l.stats.Deleted += p.deleted
		maxMid = max(maxMid, p.maxMid)
		for _, i := range p.miss {
			u := &ups[i]
			var s, d uint32
			if u.Op == Insert {
				s, d = l.vertex(u.Src), l.vertex(u.Dst)
			} else {
				var ok1, ok2 bool
				s, ok1 = l.lookup(u.Src)
				d, ok2 = l.lookup(u.Dst)
				if !ok1 || !ok2 {
					ops[i], mids[i] = applyOp{skipOp, 0}, -1
					continue
				}
			}
			ops[i] = applyOp{s, d}
			mi := int(s >> (leafBits + midBits))
			mids[i] = int32(mi)
			maxMid = max(maxMid, mi)
		}
		l.pass.miss[w] = p.miss[:0]
	}
	return maxMid
}

// touchChunk is how many updates of a mid a worker of applyParallel loads
// ahead (touchSources) before applying them: what they load, a leaf, a
// vertex state, its last edges or its base offsets and weights, a few
// cache lines each, stays in the core's L2.
const touchChunk = 256

// touchSources does for a worker of applyParallel what touch does for
// the serial loop: it loads the state of the source vertex of each of idx
// (src gives its dense id), or the base offsets and first weight of one
// without a state yet, before any is written, so that the processor
// overlaps these cache misses where the updates, applied in order, wait
// for each in turn. It reads only the nodes of the mid the worker owns.
// The sum keeps the loads from being dropped.
func (l *Live) touchSources(idx []int32, src func(int32) uint32) uint64 {
	// peek inlined, as in touch.
	top, under := l.top, l.under
	var sum uint64
	for _, i := range idx {
		s := src(i)
		if s == skipOp {
			continue
		}
		dv := (*walk.DeltaVertex)(nil)
		if vs := findState(top, s); vs != nil {
			dv = &vs.view
		} else if under != nil {
			dv = under.Vertex(s)
		}
		if dv != nil {
			sum += uint64(dv.Live)
		} else if s < l.baseV {
			sum += uint64(l.base.Offsets[s])
		}
	}
	for _, i := range idx {
		s := src(i)
		if s == skipOp {
			continue
		}
		dv := (*walk.DeltaVertex)(nil)
		if vs := findState(top, s); vs != nil {
			dv = &vs.view
		} else if under != nil {
			dv = under.Vertex(s)
		}
		if dv != nil {
			if e := dv.Edges(); len(e) > 0 {
				sum += uint64(e[len(e)-1].Target)
			}
		} else if s < l.baseV && l.weighted {
			if a := l.base.Offsets[s]; a < l.base.Offsets[s+1] {
				sum += uint64(l.base.Weights[a])
			}
		}
	}
	return sum
}

// add adds o's counts to st.
func (st *Stats) add(o *Stats) {
	st.Inserted += o.Inserted
	st.Deleted += o.Deleted
	st.DeltaEdges += o.DeltaEdges
	st.Tombstones += o.Tombstones
	st.Vertices += o.Vertices
	st.Added += o.Added
	st.Bytes += o.Bytes
	st.Evicted += o.Evicted
	st.Late += o.Late
	st.Evictions += o.Evictions
}
