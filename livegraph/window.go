package livegraph

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// A time window (WithWindow) keeps a recent-engagement graph bounded: every
// edge has a time (a windowed graph must be timed, so the base's edges have
// one and every insert carries one), and an edge is evicted once the event
// time has moved a window past it. The event time is the largest edge time
// the live graph has seen — the base's newest edge, then every insert
// applied — never the wall clock, so a replay of the same records evicts
// the same edges. Eviction goes by segments of window/segments: time is
// cut into segments, and when the first segment still wholly inside the
// window moves, every edge of the segments before it goes at once. An edge
// therefore lives at least the window and at most the window plus one
// segment. See docs/design/live-graph.md, "Time windows".

// DefaultWindowSegments is the number of segments a window is cut into
// when WithWindow is given 0: an edge outlives the window by at most an
// eighth of it.
const DefaultWindowSegments = 8

// Option configures a live graph (New).
type Option func(*options)

type options struct {
	window    time.Duration
	segments  int
	eventTime int64
	hasTime   bool
	// workers, cores and onWorker: WithWorkers, WithCores,
	// withWorkerHook.
	workers  int
	cores    Cores
	onWorker func()
}

// WithWindow evicts edges older than d by their time, in segments of
// d/segments (0: DefaultWindowSegments). The base graph must have edge
// times. Defaults to no window: nothing is evicted.
func WithWindow(d time.Duration, segments int) Option {
	return func(o *options) { o.window, o.segments = d, segments }
}

// WithEventTime starts the window's event time at t (Unix milliseconds)
// when that is later than the base's newest edge: a live graph built over
// a compacted version resumes the window where the one that wrote it
// stood (Snapshot.Window), so that a replay evicts exactly what the first
// run did. New refuses it without WithWindow.
func WithEventTime(t int64) Option {
	return func(o *options) { o.eventTime, o.hasTime = t, true }
}

// noSegment marks a vertex with nothing scheduled for eviction.
const noSegment = math.MaxInt64

// window is the applier's eviction state (Live.win). Only the applier
// reads or writes it; snapshots get a copy of now and cut (windowMark).
type window struct {
	length, seg int64 // the window and its segment, in milliseconds
	segments    int   // as WithWindow was given it
	// now is the event time, math.MinInt64 before any edge; cut the
	// first live segment: an edge whose time falls in a segment below it
	// is evicted.
	now, cut int64
	// sched holds, per dense vertex, the segment of its oldest edge not
	// yet evicted (noSegment: none), and due, per segment, the vertices
	// scheduled in it: when cut passes a segment, its vertices are the
	// only ones with edges to evict. An entry whose vertex has since been
	// scheduled earlier is stale and skipped, so a vertex is in one list
	// that counts at a time, and a list entry is added only when an insert
	// makes a vertex's oldest edge older.
	sched []int64
	due   map[int64][]uint32
	// baseDone counts, per base vertex, its base edges (in time order)
	// already evicted.
	baseDone []uint32
	// scratch holds a base vertex's edge times by edge (Times is by time).
	scratch []int64
}

// timeOrder bounds the disorder of a vertex's appended times: max is the
// largest time ever appended to it (evicted ones included), and every
// append's time was at least the largest before it minus lag. So once the
// times read in order pass cutoff+lag, none after is below the cutoff,
// and eviction stops reading the array there (times arrive with jitter,
// rarely far out of order).
type timeOrder struct {
	max, lag int64
	set      bool
}

func (o *timeOrder) add(t int64) {
	if o.set {
		o.lag = max(o.lag, o.max-t)
	}
	o.max, o.set = max(o.max, t), true
}

// appended records that v's delta got an edge of time t.
func (l *Live) appended(v uint32, x *extra, t int64) {
	x.order.add(t)
	l.win.schedule(v, t)
}

// windowMark is what a snapshot records of the window.
type windowMark struct {
	on       bool
	now, cut int64
	seg      int64
}

// segOf is the segment of time t, rounding down for negative times too.
func (w *window) segOf(t int64) int64 {
	q := t / w.seg
	if t%w.seg < 0 {
		q--
	}
	return q
}

// cutFor is the first live segment at event time now: the segment of
// now - length, so an edge inside the window is never evicted.
func (w *window) cutFor(now int64) int64 {
	if now == math.MinInt64 {
		return math.MinInt64
	}
	x := now - w.length
	if now < math.MinInt64+w.length {
		x = math.MinInt64
	}
	return w.segOf(x)
}

// cutoff is the first time of segment cut: edges before it are evicted.
func (w *window) cutoff() int64 {
	if w.cut <= math.MinInt64/w.seg {
		return math.MinInt64
	}
	return w.cut * w.seg
}

// schedule records that v holds an edge of time t.
func (w *window) schedule(v uint32, t int64) { w.scheduleSeg(v, w.segOf(t)) }

// scheduleSeg records that v holds an edge in segment s.
func (w *window) scheduleSeg(v uint32, s int64) {
	for int(v) >= len(w.sched) {
		w.sched = append(w.sched, noSegment)
	}
	if s < w.sched[v] {
		w.sched[v] = s
		w.due[s] = append(w.due[s], v)
	}
}

// setWindow turns the window on (New), schedules every base vertex by its
// oldest edge, and evicts what the base's own newest edge puts out of it.
func (l *Live) setWindow(o options) error {
	if o.window == 0 && !o.hasTime {
		return nil
	}
	if o.window == 0 {
		return fmt.Errorf("live graph %q: an event time (WithEventTime) without a window (WithWindow)", l.base.Name)
	}
	if o.window < time.Millisecond {
		return fmt.Errorf("live graph %q: window %v: use at least 1ms (edge times are in milliseconds)", l.base.Name, o.window)
	}
	if o.segments < 0 || o.segments > 1<<20 {
		return fmt.Errorf("live graph %q: %d window segments: use 1 to %d, or 0 for %d", l.base.Name, o.segments, 1<<20, DefaultWindowSegments)
	}
	if !l.timed {
		return fmt.Errorf("live graph %q: a time window needs edge times, and the graph has none: import it with a time column "+
			"(edge updates then must carry a time)", l.base.Name)
	}
	n := int64(o.segments)
	if n == 0 {
		n = DefaultWindowSegments
	}
	ms := o.window.Milliseconds()
	w := &window{length: ms, seg: max(1, (ms+n-1)/n), segments: o.segments, now: math.MinInt64, cut: math.MinInt64, due: map[int64][]uint32{}}
	w.sched = make([]int64, l.baseV)
	w.baseDone = make([]uint32, l.baseV)
	b := l.base
	for v := range l.baseV {
		w.sched[v] = noSegment
		if lo, hi := b.Offsets[v], b.Offsets[v+1]; lo < hi {
			w.schedule(v, b.Times[lo])
			w.now = max(w.now, b.Times[hi-1])
		}
	}
	if o.hasTime {
		w.now = max(w.now, o.eventTime)
	}
	l.win = w
	l.advanceWindow()
	return nil
}

// admit takes an insert's time into the event time and reports whether the
// edge is inside the window. One that is not (a late event) is applied and
// evicted at once: its vertices are added, as any insert's are, and the
// edge is never seen.
func (l *Live) admit(u *Update) bool {
	w := l.win
	w.now = max(w.now, u.Time)
	if u.Time >= w.cutoff() {
		return true
	}
	l.vertex(u.Src)
	l.vertex(u.Dst)
	l.stats.Inserted++
	l.stats.Late++
	return false
}

// advanceWindow moves the cut to the event time's and evicts every edge in
// the segments it passed, vertex by vertex as they are due. It runs after
// each record, so the state after a record depends only on the records
// applied, in order, not on when snapshots were published.
func (l *Live) advanceWindow() {
	w := l.win
	c := w.cutFor(w.now)
	if c <= w.cut {
		return
	}
	w.cut = c
	var segs []int64
	for s := range w.due {
		if s < c {
			segs = append(segs, s)
		}
	}
	slices.Sort(segs)
	for _, s := range segs {
		for _, v := range w.due[s] {
			if w.sched[v] == s {
				w.sched[v] = noSegment
				l.evictVertex(v)
			}
		}
		delete(w.due, s)
	}
	l.stats.Evictions++
}

// evictVertex removes v's edges in segments below the cut and schedules v
// by its oldest edge left. Walkers read a vertex's delta, not edge times,
// so the eviction is written as a delta that the walk engines already
// take. Appended edges mostly arrive in time order, so the evicted ones
// are mostly a prefix of the vertex's array: then the new state takes the
// rest of the same array (dropPrefix, no copy). Otherwise (a base edge
// evicted, or an evicted edge behind a kept one) the state is rewritten
// (rewrite). Snapshots published before keep their own state (copy on
// write), so a walk never sees half an eviction.
func (l *Live) evictVertex(v uint32) {
	w, b := l.win, l.base
	// A windowed graph has edge times, so its tree holds every state.
	old := findState(l.top, v)
	next := int64(noSegment)
	var a, e uint64
	if v < l.baseV {
		a, e = b.Offsets[v], b.Offsets[v+1]
	}
	deg := int(e - a)
	// Base edges are sorted by time per vertex (Times, ByTime): the
	// evicted ones are a prefix, of which the first done were evicted
	// before.
	done := 0
	if v < l.baseV {
		done = int(w.baseDone[v])
	}
	k0 := done + sort.Search(deg-done, func(k int) bool { return w.segOf(b.Times[a+uint64(done+k)]) >= w.cut })
	if k0 < deg {
		next = w.segOf(b.Times[a+uint64(k0)])
	}
	var fresh []uint32
	for _, j := range b.ByTime[a+uint64(done) : a+uint64(k0)] {
		t := b.Targets[a+uint64(j)]
		if old == nil || !old.view.BaseDead(t) {
			fresh = append(fresh, t)
		}
	}
	if v < l.baseV {
		w.baseDone[v] = uint32(k0)
	}
	var times []int64
	if old != nil {
		times = old.times().times
	}
	// Times against the cutoff time, not segments: a division per edge
	// was the largest cost here.
	cutT := w.cutoff()
	k := 0
	for k < len(times) && times[k] < cutT {
		k++
	}
	// Look for an evicted edge behind a kept one only as far as the
	// times' disorder allows one (timeOrder).
	clean := true
	oldest, seen := int64(math.MaxInt64), int64(math.MinInt64)
	if k < len(times) {
		ord := old.times().order
		for _, t := range times[k:] {
			if t < cutT {
				clean = false
				break
			}
			oldest, seen = min(oldest, t), max(seen, t)
			if seen-ord.lag >= cutT && seen >= math.MinInt64+ord.lag {
				// The rest are at least seen-lag: a bound on the
				// oldest is enough to schedule by.
				oldest = min(oldest, seen-ord.lag)
				break
			}
		}
		next = min(next, w.segOf(oldest))
	}
	switch {
	case len(fresh) == 0 && clean && k == 0:
	case len(fresh) == 0 && clean:
		l.dropPrefix(v, k)
	default:
		next = l.rewrite(v, fresh, next)
	}
	if next != noSegment {
		w.scheduleSeg(v, next)
	}
}

// dropPrefix evicts v's first k appended edges, keeping the rest of the
// array: a later append writes beyond every published state's length, as
// always. When little of the array is left it is copied, so that a vertex
// that stops receiving edges does not hold a window's worth of memory.
func (l *Live) dropPrefix(v uint32, k int) {
	vs := l.writable(v)
	dv := &vs.view
	old, oldLabels, oldDead, x := edgesFull(dv), dv.Labels(), dv.Dead(), vs.times()
	// The prefix's live edges: those not below a tombstone's Upto, which
	// only the few tombstones of deletes since the last rewrite have.
	live := k
	var recent []walk.Tombstone
	for _, ts := range oldDead {
		if ts.Upto > 0 {
			recent = append(recent, ts)
		}
	}
	if len(recent) > 0 {
		for i, de := range old[:k] {
			if j, ok := slices.BinarySearchFunc(recent, de.Target, cmpTomb); ok && uint32(i) < recent[j].Upto {
				live--
			}
		}
	}
	// Upto counts from the array's start: shift it. A tombstone left
	// covering no appended edge covers base edges only, and is dropped
	// when v has none to its target.
	dead := oldDead
	if len(recent) > 0 {
		dead = make([]walk.Tombstone, 0, len(oldDead))
		for _, ts := range oldDead {
			u := max(0, int(ts.Upto)-k)
			if u == 0 && ts.Upto > 0 && !(v < l.baseV && l.base.HasEdge(v, ts.Target)) {
				continue
			}
			dead = append(dead, walk.Tombstone{Target: ts.Target, Upto: uint32(u)})
		}
	}
	nx := &extra{order: x.order}
	rest := len(old) - k
	var edges []walk.DeltaEdge
	switch {
	case rest == 0:
	case rest*4 < cap(old) || l.labelled || cap(old)-k < walk.DeltaCap(rest):
		// Copied: a small rest, or one whose labels (behind the
		// array's capacity, walk.DeltaVertex.Labels) or whose room
		// for the appends walk.DeltaCap(rest) allows (they write in
		// place up to it) the array's suffix does not give.
		edges = l.newEdges(rest)
		copy(edges, old[k:])
		if l.labelled {
			copy(labelsOf(edges), oldLabels[k:])
		}
		nx.times = slices.Clone(x.times[k:])
	default:
		edges = old[k:]
		nx.times = x.times[k:]
	}
	dv.SetEdges(edges)
	dv.SetDead(dead)
	*vs.times() = *nx
	// MaxWeight stays: an envelope above every weight keeps the delta
	// side's accept draw exact, and recomputing it would read the array.
	dv.Live -= uint32(live)
	l.stats.DeltaEdges -= int64(k)
	l.stats.Tombstones += int64(len(dead) - len(oldDead))
	l.stats.Bytes += l.edgeBytes(walk.DeltaCap(rest)) - l.edgeBytes(cap(old)) + int64(len(dead)-len(oldDead))*int64(unsafe.Sizeof(walk.Tombstone{}))
	l.stats.Evicted += int64(live)
}

// rewrite evicts v's edges below the cut into a new state: the base edges
// to the targets in fresh (v's base targets that just lost an edge) get a
// tombstone, and those of them still inside the window are appended again
// with their times; the appended edges are copied into a new array without
// the evicted and the deleted ones, so every tombstone left covers base
// edges only (Upto 0). It returns next lowered to the oldest segment kept.
func (l *Live) rewrite(v uint32, fresh []uint32, next int64) int64 {
	w, b := l.win, l.base
	slices.Sort(fresh)
	fresh = slices.Compact(fresh)
	var a, e uint64
	if v < l.baseV {
		a, e = b.Offsets[v], b.Offsets[v+1]
	}
	deg := int(e - a)
	vs := l.writable(v)
	dv := &vs.view
	oldEdges, oldLabels, oldDead := dv.Edges(), dv.Labels(), dv.Dead()
	oldX := *vs.times()
	var edges []walk.DeltaEdge
	var labels []uint8
	x := &extra{}
	var evicted int64
	cutT, oldest := w.cutoff(), int64(math.MaxInt64)
	add := func(t uint32, wt float32, lb uint8, tm int64) {
		edges = append(edges, walk.DeltaEdge{Target: t, Weight: wt})
		if l.labelled {
			labels = append(labels, lb)
		}
		x.times = append(x.times, tm)
		x.order.add(tm)
		oldest = min(oldest, tm)
	}
	// The base edges to the targets just tombstoned that are still inside
	// the window come first, in CSR order: compaction sorts a vertex's
	// edges by (target, time) stably, base before inserted, and these
	// keep that place.
	if len(fresh) > 0 {
		w.scratch = slices.Grow(w.scratch[:0], deg)[:deg]
		for k, j := range b.ByTime[a:e] {
			w.scratch[j] = b.Times[a+uint64(k)]
		}
		adj := b.Targets[a:e]
		for _, t := range fresh {
			lo, _ := slices.BinarySearch(adj, t)
			for j := lo; j < deg && adj[j] == t; j++ {
				tm := w.scratch[j]
				if tm < cutT {
					evicted++
					continue
				}
				wt, lb := float32(1), uint8(0)
				if b.Weights != nil {
					wt = b.Weights[a+uint64(j)]
				}
				if b.Labels != nil {
					lb = b.Labels[a+uint64(j)]
				}
				add(t, wt, lb, tm)
			}
		}
	}
	for i, de := range oldEdges {
		if dv.DeltaDead(i) {
			continue
		}
		if oldX.times[i] < cutT {
			evicted++
			continue
		}
		var lb uint8
		if l.labelled {
			lb = oldLabels[i]
		}
		add(de.Target, de.Weight, lb, oldX.times[i])
	}
	// Every appended edge left is live, so a tombstone now only covers
	// base edges: one that covered appended edges only (Upto > 0, a
	// target v has no base edge to) is dropped. One with Upto 0 always
	// covers base edges.
	dead := make([]walk.Tombstone, 0, len(oldDead)+len(fresh))
	for _, ts := range oldDead {
		if ts.Upto == 0 || v < l.baseV && b.HasEdge(v, ts.Target) {
			dead = append(dead, walk.Tombstone{Target: ts.Target})
		}
	}
	for _, t := range fresh {
		dead = append(dead, walk.Tombstone{Target: t})
	}
	slices.SortFunc(dead, func(p, q walk.Tombstone) int { return cmpTomb(p, q.Target) })

	// Into an array of their own, labels behind it (newEdges).
	ne := l.newEdges(len(edges))
	copy(ne, edges)
	if l.labelled {
		copy(labelsOf(ne), labels)
	}
	dv.SetEdges(ne)
	dv.SetDead(dead)
	*vs.times() = *x
	dv.MaxWeight = 0
	for _, de := range edges {
		dv.MaxWeight = max(dv.MaxWeight, de.Weight)
	}
	// The edges appended again were live base edges, and stay live.
	dv.Live -= uint32(evicted)
	l.stats.DeltaEdges += int64(len(edges) - len(oldEdges))
	l.stats.Tombstones += int64(len(dead) - len(oldDead))
	l.stats.Bytes += l.edgeBytes(cap(ne)) - l.edgeBytes(walk.DeltaCap(len(oldEdges))) + int64(len(dead)-len(oldDead))*int64(unsafe.Sizeof(walk.Tombstone{}))
	l.stats.Evicted += evicted
	if len(edges) > 0 {
		next = min(next, w.segOf(oldest))
	}
	return next
}

// ResumeOptions are the options that give a live graph built over the
// compaction of s (Compact, a catalog version written from it) l's window
// as it stood at s: the same window, from s's event time. The compaction
// holds exactly the edges at or after s's cutoff, and the records after s,
// applied to it, then evict what they evicted in l, snapshot by snapshot;
// without the event time a compaction that lost s's newest edge (deleted)
// would start with an earlier cut. Nil without a window.
func (l *Live) ResumeOptions(s *Snapshot) []Option {
	if l.win == nil || !s.win.on {
		return nil
	}
	return []Option{WithWindow(time.Duration(l.win.length)*time.Millisecond, l.win.segments), WithEventTime(s.win.now)}
}

// mark is the window as a snapshot records it.
func (l *Live) mark() windowMark {
	if l.win == nil {
		return windowMark{}
	}
	return windowMark{on: true, now: l.win.now, cut: l.win.cut, seg: l.win.seg}
}

// Window reports the snapshot's time window: the event time (the largest
// edge time applied, Unix milliseconds) and the cutoff, the time below
// which every edge is evicted: the snapshot holds every edge applied whose
// time is at least cutoff, and no other. ok is false when the live graph
// has no window; cutoff is math.MinInt64 while nothing is cut.
func (s *Snapshot) Window() (eventTime, cutoff int64, ok bool) {
	m := s.win
	if !m.on {
		return 0, 0, false
	}
	return m.now, (&window{seg: m.seg, cut: m.cut}).cutoff(), true
}
