package livegraph

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// withWorkerHook has hook called at the start of each goroutine Apply or
// Compact spreads work over (tests count them).
func withWorkerHook(hook func()) Option { return func(o *options) { o.onWorker = hook } }

// procs is how many goroutines o allows (WithWorkers), at least one.
func (o *options) procs() int {
	if o.workers > 0 {
		return o.workers
	}
	return max(1, runtime.GOMAXPROCS(0))
}

// started runs the worker hook, if any.
func (o *options) started() {
	if o.onWorker != nil {
		o.onWorker()
	}
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
	type op struct{ s, d uint32 }
	ops := make([]op, len(ups))
	const skip = ^uint32(0) // a delete naming a vertex the graph lacks
	maxMid := 0
	mids := make([]int32, len(ups))
	for i := range ups {
		u := &ups[i]
		var s, d uint32
		if u.Op == Insert {
			s, d = l.vertex(u.Src), l.vertex(u.Dst)
		} else {
			l.stats.Deleted++
			var ok1, ok2 bool
			s, ok1 = l.lookup(u.Src)
			d, ok2 = l.lookup(u.Dst)
			if !ok1 || !ok2 {
				s = skip
			}
		}
		ops[i] = op{s, d}
		if s != skip {
			mi := int(s >> (leafBits + midBits))
			mids[i] = int32(mi)
			maxMid = max(maxMid, mi)
		} else {
			mids[i] = -1
		}
	}
	l.topFor(maxMid)
	// The updates of each mid, in record order: a counting sort.
	start := make([]int32, maxMid+2)
	for _, mi := range mids {
		if mi >= 0 {
			start[mi+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	order := make([]int32, start[len(start)-1])
	fill := append([]int32(nil), start[:maxMid+1]...)
	for i, mi := range mids {
		if mi >= 0 {
			order[fill[mi]] = int32(i)
			fill[mi]++
		}
	}
	workers := min(l.opts.procs(), maxMid+1)
	stats := make([]Stats, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l.opts.started()
			st := &stats[w]
			for mi := int(next.Add(1) - 1); mi <= maxMid; mi = int(next.Add(1) - 1) {
				for _, i := range order[start[mi]:start[mi+1]] {
					o := ops[i]
					if ups[i].Op == Insert {
						l.insertAt(st, &ups[i], o.s, o.d)
					} else {
						l.deleteAt(st, o.s, o.d)
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range stats {
		l.stats.add(&stats[i])
	}
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
