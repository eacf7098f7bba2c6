// Package livegraph holds a live graph: a loaded base graph (graph.Graph)
// plus a delta of edge updates applied in place — edges appended per vertex,
// tombstones for deletes, vertices the base did not have — published as
// immutable snapshots that the walk engines read (walk.Overlay) while the
// updates go on. It also decodes edge-update records (JSON and the binary
// batch form) and compacts a snapshot into a new graph.Graph.
//
// It knows nothing of Kafka or of the stage: the caller hands it decoded
// updates with the partition and offset they came from, and reads the
// watermark back from a snapshot. A compaction runs beside the applier and
// the live graph is rebased on its result (background.go).
//
// Size: a little over the project's ~3,000 lines without tests, because
// applying, publishing, compacting and windowing are one state: a
// compaction is rebased onto the updates applied while it ran, the window
// evicts through the same copy-on-write tree the applier writes, and a
// publication hands walkers what both left, so splitting them would make
// the tree's epochs and the delta index's patch an API between packages.
package livegraph

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// The delta is a persistent radix tree over dense vertex ids, three levels:
// a top slice of mids, a mid of midFan leaves, a leaf of leafFan vertices.
// A snapshot is a top slice; the applier copies a node on its first write
// after a publish (copy on write per node, each node tagged with the epoch
// that owns it), so publishing is O(1) — hand out the working top and start
// a new epoch — and a walker never waits on the applier nor sees a change
// after its snapshot was published.
const (
	leafBits = 6
	leafFan  = 1 << leafBits
	midBits  = 10
	midFan   = 1 << midBits
)

type leaf struct {
	epoch uint64
	v     [leafFan]*vstate
	// dirty marks the vertices written in the leaf's epoch, and a mid's
	// dirty the leaves that have one: what Publish puts in the next
	// snapshot's delta index (changes), without a pass over the delta.
	dirty uint64
	// own marks states the leaf's epoch may write in place though they
	// are not dirty: those of a spare leaf taken over (Live.spare).
	own uint64
}

type mid struct {
	epoch  uint64
	leaves [midFan]*leaf
	dirty  [midFan / 64]uint64
}

// vstate is one vertex's delta: the walk.DeltaVertex walkers read, 48
// bytes, one allocation of Go's 48-byte size class (the appended edges'
// labels sit behind the edges, in their array). A published vstate never
// changes; the applier copies it (the record: the arrays are append-only
// and shared) on its first write in a new epoch, which its leaf's dirty
// bit tells (writableTo): the bit is set when the vstate is made or
// copied in the leaf's epoch, and a leaf copied for a new epoch starts
// with none, so the state needs no epoch of its own.
//
// On a graph with edge times a vertex's state is a tvstate, whose first
// field is the vstate: what only compaction and the window need (the
// times) sits behind the record in the same allocation, and a graph
// without times pays nothing for it (docs/design/live-graph.md, "Memory
// per vertex with a delta").
type vstate struct {
	view walk.DeltaVertex
}

// tvstate is a vertex's state on a graph with edge times.
type tvstate struct {
	vstate
	ext extra
}

// times returns the extra of vs, a state of a graph with edge times
// (timed): vs is then the first field of a tvstate.
func (vs *vstate) times() *extra { return &(*tvstate)(unsafe.Pointer(vs)).ext }

// stateBytes is the memory of one vertex's state on a graph with edge
// times or without.
func stateBytes(timed bool) int64 {
	if timed {
		return int64(unsafe.Sizeof(tvstate{}))
	}
	return int64(unsafe.Sizeof(vstate{}))
}

type extra struct {
	times []int64
	// order bounds how far out of time order the times are (window.go).
	order timeOrder
}

// Live is a live graph: the base and the delta that Apply grows. Apply and
// Publish are for one goroutine (the applier); Snapshot, and every method
// of a snapshot, for any number of readers.
type Live struct {
	base                      *graph.Graph
	baseV                     uint32
	weighted, labelled, timed bool

	// The applier's working state: the tree being built for epoch, the
	// added vertices' external ids (append-only, shared with snapshots),
	// the watermark, the counters.
	epoch     uint64
	top       []*mid
	topEpoch  uint64
	addedIDs  []int64
	watermark map[int32]int64
	stats     Stats
	// win is the time window's state (window.go), nil without one.
	win *window

	// ids holds the added vertices' dense ids and the naming table of
	// the current base; a rebase (background.go) starts a new one, which
	// the snapshots of the old base do not see.
	ids *idTable

	cur atomic.Pointer[Snapshot]
	// wants are the watermarks WaitFor callers wait for, so that the
	// applier publishes as soon as it has applied what one waits for
	// (Waited) rather than at its next interval; nwants counts them, for a
	// check without the lock.
	wantMu sync.Mutex
	wants  map[*map[int32]int64]struct{}
	nwants atomic.Int32
	// wanted has a value when a caller started waiting (Wanted).
	wanted chan struct{}
	// index is the delta index of the last snapshot published, which the
	// next one's is made from (Publish); nil after a rebase, when the next
	// one is built whole.
	index *walk.DeltaIndex
	// under holds the deltas of every vertex the tree has no state for,
	// nil when the tree holds them all. On a graph without edge times a
	// publication that makes an index drops the tree (Publish): the index
	// holds every vertex's record then, and the tree starts anew with the
	// vertices written after, copied out of under on their first write.
	// So a vertex's delta is one 48-byte record, not a state in the tree
	// and a copy in the index (docs/design/live-graph.md, "Memory per
	// vertex with a delta").
	under *walk.DeltaIndex
	// patchCopied adds up the patches the indexes since the last fold
	// copied (Publish).
	patchCopied int
	// spare is the tree the last publication dropped when no snapshot
	// had seen any of it (unseen), its nodes and states of epoch
	// spareEpoch: writableTo takes them over in place (adopt) instead of
	// allocating a mid, a leaf and a state anew for every vertex written
	// after the drop. Those were a third of what an applier beside walks
	// allocated (docs/benchmarks/live-graph.md, "The tree a publication
	// drops, taken over"). Their states hold the records the dropping
	// publication put in under, so a tree holding them reads as one
	// without them. Any publication that hands a tree to a snapshot ends
	// the spare (nil, spareEpoch 0), as does a rebase.
	spare      []*mid
	spareEpoch uint64
	// unseen is set while no snapshot holds a node of top: top started
	// empty in this epoch (the last publication dropped its tree).
	unseen bool
	// dirty marks the vertices written since index was made, ndirty
	// counts them (Publish, while nobody walks); walkedAt is when a
	// snapshot's DeltaIndex was last asked for (Unix ns).
	dirty    []uint64
	ndirty   int
	walkedAt atomic.Int64

	touched uint64 // touch's sum

	// serialApply keeps Apply on one goroutine (tests compare the two).
	serialApply bool
	// merged is ApplyRecords' buffer of the records' updates, one after
	// another, kept between calls.
	merged []Update
	// pass is applyParallel's scratch, kept between passes.
	pass passScratch
	// changeBuf is Publish's list of the vertices written, kept between
	// publications (empty, its pointers cleared, between them): grown
	// anew by appends it was a few pointer-holding arrays a publication
	// for the collector to scan.
	changeBuf []walk.DeltaChange
	// passWorkers is the goroutines the last pass took (PassWorkers).
	passWorkers int
	// opts are the options New was given (WithWorkers for Apply).
	opts options

	// compacting, when set, is the compaction in progress (background.go).
	compacting *compaction
}

// idTable is what a base's snapshots share beyond the tree: the added
// vertices' ids and the naming table.
type idTable struct {
	// added maps an added vertex's external id to its dense id. Only the
	// applier writes it, under mu; readers resolving an id take mu's read
	// side (Snapshot.DenseID), the applier reads it without.
	mu    sync.RWMutex
	added map[int64]uint32

	// naming is the id table Snapshot.Naming hands out, built on the
	// first snapshot with added vertices and grown append-only after.
	namingMu   sync.Mutex
	namingIDs  []int64
	namingOffs []uint64
}

// Stats counts what a delta holds.
type Stats struct {
	// Inserted and Deleted count the updates applied over the current
	// base (after a rebase, those applied since the compacted snapshot);
	// deletes that found nothing to delete are in Deleted too.
	Inserted, Deleted int64
	// DeltaEdges is the appended edges the delta holds (deleted ones
	// included until a compaction), Tombstones the deleted targets, Vertices
	// the vertices with a delta, Added the vertices new to the base.
	DeltaEdges, Tombstones int64
	Vertices, Added        int64
	// Bytes is the delta's memory beyond the delta index that holds the
	// records of the vertices the tree does not (Snapshot.DeltaBytes adds
	// it), so it depends on which publications made an index (Publish):
	// vertex states and tree nodes the tree holds, and the
	// capacity of the per-vertex arrays.
	Bytes int64
	// Evicted counts the edges the time window removed (base and
	// appended), Late the inserts older than the window when applied
	// (never seen by a walk), Evictions the times the window's cut moved
	// to a later segment (window.go).
	Evicted, Late, Evictions int64
}

// New starts a live graph over base with an empty delta and publishes it.
// With WithWindow, the base's edges older than the window are evicted
// first.
func New(base *graph.Graph, opts ...Option) (*Live, error) {
	if base == nil {
		return nil, fmt.Errorf("live graph: no base graph")
	}
	if base.HasStringIDs() {
		return nil, fmt.Errorf("live graph over %q: graphs with string ids do not take edge updates yet (integer ids do)", base.Name)
	}
	l := &Live{base: base, baseV: uint32(base.NumVertices()), weighted: base.Weighted(), labelled: base.Labelled(),
		timed: base.Timed(), epoch: 1, watermark: map[int32]int64{}, ids: &idTable{added: map[int64]uint32{}}, wanted: make(chan struct{}, 1)}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	l.opts = o
	l.index = walk.NewDeltaIndex(int(l.baseV), func(func(uint32, *walk.DeltaVertex) bool) {})
	if err := l.setWindow(o); err != nil {
		return nil, err
	}
	l.Publish()
	return l, nil
}

// Base is the graph the delta applies to.
func (l *Live) Base() *graph.Graph { return l.base }

// Snapshot is the latest published snapshot.
func (l *Live) Snapshot() *Snapshot { return l.cur.Load() }

// Publish makes everything applied so far visible as a new snapshot and
// returns it. The working tree becomes the snapshot's, and the next write
// copies what it changes; the snapshot's delta index is the last one's
// with the vertices written since put in (walk.DeltaIndex.Update), O(the
// vertices written + the index's patch + the vertices / 64), its patch
// folded into its base level (Fold, O(vertices with a delta)) once the
// patches copied since the last fold add up to as many heads as a fold
// copies: the copies then cost at most the folds, and the patch stays
// about sqrt(2 x vertices with a delta x vertices written a publication).
//
// While nobody walks (no snapshot's DeltaIndex asked for in the last
// eagerWindow, no read-your-writes waiter whose offsets this publication
// reaches), the index is not made: the
// vertices written are marked in a bitmap, O(vertices written), and the
// first publication after a walk puts them all in. A snapshot published
// meanwhile builds its index whole on its first walk. Making every index
// took a fifth of the applier's time on a stream nobody walked
// (BenchmarkIngest: 1.47 M updates per CPU-s against 1.93-2.03 M). A
// waiter for offsets not applied yet walks none of the snapshots before
// them: while a backlog is caught up under a read-your-writes request for
// its end (a replay after a restart, stage-load.sh's settle probe), only
// the publication that reaches them makes the index.
func (l *Live) Publish() *Snapshot {
	n := l.baseV + uint32(len(l.addedIDs))
	var x *walk.DeltaIndex
	eager := time.Now().UnixNano()-l.walkedAt.Load() < int64(eagerWindow) || l.Waited()
	switch {
	case !eager:
		if l.index != nil {
			l.markDirty()
		}
	case l.index == nil || 2*l.ndirty > l.index.Len()+4096:
		// After a rebase (a new tree), or so much written unwalked that a
		// whole build costs less than the patch would.
		x = wholeIndex(l.top, l.under, n)
		l.index, l.patchCopied = x, 0
		l.clearDirty()
	default:
		var changes []walk.DeltaChange
		if l.ndirty == 0 {
			changes = l.changes()
		} else {
			l.markDirty()
			changes = l.dirtyChanges()
			l.clearDirty()
		}
		// A publication that folds makes the folded index in one pass
		// (UpdateFold), not a patch that the fold drops at once.
		if pend, length := l.index.Preview(changes); pend > 0 && l.patchCopied+pend >= length {
			x, l.patchCopied = l.index.UpdateFold(int(n), changes), 0
		} else {
			x = l.index.Update(int(n), changes)
			l.patchCopied += x.Pending()
		}
		// Neither keeps the list: reused by the next publication, its
		// pointers cleared so it keeps no old state alive.
		clear(changes)
		l.changeBuf = changes[:0]
		l.index = x
	}
	l.spare, l.spareEpoch = nil, 0
	if x != nil && !l.timed {
		// x holds every delta: the tree's states and nodes are dropped
		// (under). A graph with edge times keeps its tree, whose states
		// hold the times behind the record (tvstate). A tree no snapshot
		// saw is kept as the spare.
		l.stats.Bytes -= treeBytes(l.top, l.timed)
		if l.unseen {
			l.spare, l.spareEpoch = l.top, l.epoch
		}
		l.top, l.under = nil, x
	}
	l.unseen = l.top == nil
	s := &Snapshot{base: l.base, top: l.top, under: l.under, n: n, added: l.addedIDs[:len(l.addedIDs):len(l.addedIDs)],
		watermark: maps.Clone(l.watermark), stats: l.stats, epoch: l.epoch, ids: l.ids, next: make(chan struct{}), win: l.mark(), idx: x, live: l}
	old := l.cur.Swap(s)
	if old != nil {
		close(old.next)
	}
	l.epoch++
	return s
}

// markDirty marks the vertices written in the current epoch in the
// bitmap of those written since the index was last made.
func (l *Live) markDirty() {
	for mi, m := range l.top {
		if m == nil || m.epoch != l.epoch {
			continue
		}
		for j, dl := range m.dirty {
			for ; dl != 0; dl &= dl - 1 {
				li := j*64 + bits.TrailingZeros64(dl)
				w := mi<<(midBits) | li // the leaf's vertices are one bitmap word
				if w >= len(l.dirty) {
					l.dirty = append(l.dirty, make([]uint64, w+1-len(l.dirty))...)
				}
				d := m.leaves[li].dirty
				l.ndirty += bits.OnesCount64(d &^ l.dirty[w])
				l.dirty[w] |= d
			}
		}
	}
}

// dirtyChanges lists the vertices of the dirty bitmap with their current
// deltas, in increasing order.
func (l *Live) dirtyChanges() []walk.DeltaChange {
	out := slices.Grow(l.changeBuf[:0], l.ndirty)
	for w, d := range l.dirty {
		for ; d != 0; d &= d - 1 {
			v := uint32(w<<leafBits | bits.TrailingZeros64(d))
			out = append(out, walk.DeltaChange{V: v, D: &findState(l.top, v).view}) // written since under: in the tree
		}
	}
	return out
}

// clearDirty empties the dirty bitmap.
func (l *Live) clearDirty() {
	if l.ndirty > 0 {
		clear(l.dirty)
		l.ndirty = 0
	}
}

// changes lists the vertices written in the current epoch, in increasing
// order, with their deltas: the marks writableTo left in this epoch's
// mids and leaves.
func (l *Live) changes() []walk.DeltaChange {
	out := l.changeBuf[:0]
	for mi, m := range l.top {
		if m == nil || m.epoch != l.epoch {
			continue
		}
		for j, dl := range m.dirty {
			for ; dl != 0; dl &= dl - 1 {
				li := j*64 + bits.TrailingZeros64(dl)
				lf := m.leaves[li]
				for d := lf.dirty; d != 0; d &= d - 1 {
					vi := bits.TrailingZeros64(d)
					out = append(out, walk.DeltaChange{V: uint32((mi<<midBits|li)<<leafBits | vi), D: &lf.v[vi].view})
				}
			}
		}
	}
	return out
}

// treeBytes is what Stats.Bytes counts of tree top: every node and state
// in it was counted once, when made (copies for a new epoch replace what
// they copy).
func treeBytes(top []*mid, timed bool) int64 {
	var n int64
	for _, m := range top {
		if m == nil {
			continue
		}
		n += int64(unsafe.Sizeof(mid{}))
		for _, lf := range m.leaves {
			if lf == nil {
				continue
			}
			n += int64(unsafe.Sizeof(leaf{}))
			for _, vs := range lf.v {
				if vs != nil {
					n += stateBytes(timed)
				}
			}
		}
	}
	return n
}

// wholeIndex builds the delta index of the n vertices of tree top over
// under (nil when the tree holds every delta) whole, with no patch.
func wholeIndex(top []*mid, under *walk.DeltaIndex, n uint32) *walk.DeltaIndex {
	if under == nil {
		return buildIndex(top, n)
	}
	changes := treeChanges(top, n)
	if pend, _ := under.Preview(changes); pend > 0 {
		return under.UpdateFold(int(n), changes)
	}
	return under.Update(int(n), changes)
}

// treeChanges lists every state of tree top below vertex n, in increasing
// order.
func treeChanges(top []*mid, n uint32) []walk.DeltaChange {
	var out []walk.DeltaChange
	for mi, m := range top {
		if m == nil {
			continue
		}
		for li, lf := range m.leaves {
			if lf == nil {
				continue
			}
			for j, vs := range lf.v {
				if v := uint32((mi<<midBits|li)<<leafBits | j); vs != nil && v < n {
					out = append(out, walk.DeltaChange{V: v, D: &vs.view})
				}
			}
		}
	}
	return out
}

// buildIndex builds the delta index of the n vertices of tree top whole,
// a mid a span, on all cores: after a rebase, whose tree is new.
func buildIndex(top []*mid, n uint32) *walk.DeltaIndex {
	each := func(i int, f func(v uint32, vs *vstate) bool) {
		if i >= len(top) || top[i] == nil {
			return
		}
		for li, lf := range top[i].leaves {
			if lf == nil {
				continue
			}
			for j, vs := range lf.v {
				if vs != nil && !f(uint32((i<<midBits|li)<<leafBits|j), vs) {
					return
				}
			}
		}
	}
	return walk.NewDeltaIndexSpans(int(n), midFan*leafFan, func(i int) int {
		c := 0
		each(i, func(v uint32, _ *vstate) bool {
			if v < n {
				c++
			}
			return true
		})
		return c
	}, func(i int, yield func(uint32, *walk.DeltaVertex) bool) {
		each(i, func(v uint32, vs *vstate) bool { return yield(v, &vs.view) })
	})
}

// WaitFor returns the first published snapshot whose watermark reaches
// want on every partition it names (read-your-writes: a request that
// produced edge updates at these offsets walks a graph that holds them),
// waiting for the applier to publish it until ctx is done. A partition
// reached means its watermark is at least the offset given, the offset
// after the caller's last record. While it waits, the applier publishes as
// soon as it has applied want (Waited).
func (l *Live) WaitFor(ctx context.Context, want map[int32]int64) (*Snapshot, error) {
	registered := false
	defer func() {
		if registered {
			l.wantMu.Lock()
			delete(l.wants, &want)
			l.nwants.Add(-1)
			l.wantMu.Unlock()
		}
	}()
	for {
		s := l.cur.Load()
		if s.Covers(want) {
			return s, nil
		}
		if !registered {
			registered = true
			l.wantMu.Lock()
			if l.wants == nil {
				l.wants = map[*map[int32]int64]struct{}{}
			}
			l.wants[&want] = struct{}{}
			l.nwants.Add(1)
			l.wantMu.Unlock()
			select {
			case l.wanted <- struct{}{}:
			default:
			}
			continue // the applier may have published meanwhile
		}
		select {
		case <-s.next:
		case <-ctx.Done():
			return nil, fmt.Errorf("live graph %q: waiting for watermark %v (published: %v): %w", l.base.Name, want, s.watermark, ctx.Err())
		}
	}
}

// Waiters counts the WaitFor callers waiting now, for any goroutine.
func (l *Live) Waiters() int { return int(l.nwants.Load()) }

// Wanted has a value when a WaitFor caller started waiting since the last
// receive: the applier, between records, asks Waited then, for the
// records it applied before the caller came.
func (l *Live) Wanted() <-chan struct{} { return l.wanted }

// Waited reports whether a WaitFor caller waits for offsets that the
// records applied so far reach: publishing now hands it its snapshot at
// once, where the next interval's publication would keep it up to an
// interval longer (the stage's WALKSTAGE_EDGE_PUBLISH_INTERVAL, 100 ms).
// Each caller can make the applier publish early once. Applier only.
func (l *Live) Waited() bool {
	if l.nwants.Load() == 0 {
		return false
	}
	cur := l.cur.Load()
	l.wantMu.Lock()
	defer l.wantMu.Unlock()
	for w := range l.wants {
		if cur.Covers(*w) {
			continue // published: its caller is waking up
		}
		covered := true
		for p, off := range *w {
			if l.watermark[p] < off {
				covered = false
				break
			}
		}
		if covered {
			return true
		}
	}
	return false
}

// Apply applies one record's updates, read from offset of partition of the
// edge topic, and advances the watermark past it (the snapshots published
// from now on record offset+1 for partition; a negative partition leaves
// the watermark alone). The record is checked whole first: an error, which
// wraps ErrBadUpdate, means nothing of it was applied.
func (l *Live) Apply(partition int32, offset int64, ups []Update) error {
	if err := l.check(ups); err != nil {
		return err
	}
	if l.win == nil && len(ups) >= applyParallelMin && !l.serialApply {
		l.applyParallel(ups)
	} else {
		l.passWorkers = 1
		l.touch(ups)
		for i := range ups {
			u := &ups[i]
			if u.Op == Insert {
				l.insert(u)
			} else {
				l.delete(u)
			}
		}
	}
	if partition >= 0 {
		l.watermark[partition] = offset + 1
	}
	if l.win != nil {
		l.advanceWindow()
	}
	if l.compacting != nil {
		l.compacting.record(partition, offset, ups)
	}
	return nil
}

// touch loads the state of every vertex the updates write to, and then the
// end of its edge array, before any is written: the loads of different
// vertices do not depend on each other, so the processor overlaps their
// cache misses, where the updates, applied in order, would wait for each
// vertex in turn (they were two thirds of an update's time). The sum only
// keeps the loads from being dropped.
func (l *Live) touch(ups []Update) {
	if len(ups) < 16 {
		return
	}
	// peek, with the tree's lookup inlined (findState) and a call only
	// for a vertex the tree lacks while under holds records: the loads
	// overlap only while the loop's iterations fit the processor's
	// window, and a call to peek (too large to inline) at each made the
	// applier 15-20% slower.
	top, under := l.top, l.under
	var sum uint64
	for i := range ups {
		if v, ok := l.lookup(ups[i].Src); ok {
			if vs := findState(top, v); vs != nil {
				sum += uint64(vs.view.Live)
			} else if under != nil {
				if dv := under.Vertex(v); dv != nil {
					sum += uint64(dv.Live)
				}
			}
		}
	}
	for i := range ups {
		if v, ok := l.lookup(ups[i].Src); ok {
			dv := (*walk.DeltaVertex)(nil)
			if vs := findState(top, v); vs != nil {
				dv = &vs.view
			} else if under != nil {
				dv = under.Vertex(v)
			}
			if dv != nil {
				if e := dv.Edges(); len(e) > 0 {
					sum += uint64(e[len(e)-1].Target)
				}
			}
		}
	}
	l.touched += sum
}

// check refuses a record that cannot be applied whole.
func (l *Live) check(ups []Update) error {
	if err := l.CheckSchema(ups); err != nil {
		return err
	}
	if n := int64(l.baseV) + int64(len(l.addedIDs)) + int64(l.fresh(ups)); n > graph.MaxVertices {
		return fmt.Errorf("%w: the record would grow graph %q to %d vertices, beyond %d", ErrBadUpdate, l.base.Name, n, graph.MaxVertices)
	}
	return nil
}

// fresh counts the endpoints of inserts that the graph lacks now (an id
// named twice counts twice: an upper bound on the vertices ups adds).
func (l *Live) fresh(ups []Update) int {
	n := 0
	for i := range ups {
		u := &ups[i]
		if u.Op != Insert {
			continue
		}
		for _, x := range [2]int64{u.Src, u.Dst} {
			if _, ok := l.lookup(x); !ok {
				n++
			}
		}
	}
	return n
}

// CheckSchema refuses updates that can never fit the base graph: a field
// it does not hold (a weight on an unweighted graph), a missing time on a
// timed one, an unknown op. It reads nothing the applier changes, so a
// reader may call it from any goroutine, to dead-letter such a record
// before it reaches Apply.
func (l *Live) CheckSchema(ups []Update) error {
	for i := range ups {
		u := &ups[i]
		switch u.Op {
		case Insert:
		case Delete:
			if u.Has != 0 {
				return fmt.Errorf("%w: update %d: a delete takes only src and dst", ErrBadUpdate, i)
			}
			continue
		default:
			return fmt.Errorf("%w: update %d: unknown op %d", ErrBadUpdate, i, u.Op)
		}
		if u.Has&HasWeight != 0 && !l.weighted {
			return fmt.Errorf("%w: update %d: weight %v on graph %q, which has no weights", ErrBadUpdate, i, u.Weight, l.base.Name)
		}
		if u.Has&HasLabel != 0 && !l.labelled {
			return fmt.Errorf("%w: update %d: label %d on graph %q, which has no labels", ErrBadUpdate, i, u.Label, l.base.Name)
		}
		if u.Has&HasTime != 0 && !l.timed {
			return fmt.Errorf("%w: update %d: time %d on graph %q, which has no edge times", ErrBadUpdate, i, u.Time, l.base.Name)
		}
		if l.timed && u.Has&HasTime == 0 {
			return fmt.Errorf("%w: update %d: an insert on graph %q needs a time (it has edge times)", ErrBadUpdate, i, l.base.Name)
		}
		if u.Has&HasWeight != 0 && !(u.Weight > 0 && u.Weight <= math.MaxFloat32) {
			return fmt.Errorf("%w: update %d: weight %v must be finite and > 0", ErrBadUpdate, i, u.Weight)
		}
	}
	return nil
}

// lookup resolves an external id on the applier's side.
func (l *Live) lookup(ext int64) (uint32, bool) {
	if v, ok := l.base.DenseID(ext); ok {
		return v, true
	}
	v, ok := l.ids.added[ext]
	return v, ok
}

// vertex resolves ext, adding it as a new vertex when it is unknown.
func (l *Live) vertex(ext int64) uint32 {
	if v, ok := l.lookup(ext); ok {
		return v
	}
	v := l.baseV + uint32(len(l.addedIDs))
	l.addedIDs = append(l.addedIDs, ext)
	l.ids.mu.Lock()
	l.ids.added[ext] = v
	l.ids.mu.Unlock()
	l.stats.Added++
	l.stats.Bytes += 8
	l.writable(v) // every added vertex has a state, edges or not
	return v
}

// writable returns v's state for writing in the current epoch, copying
// the path of nodes from the top on their first write in it, and creating
// v's state from its base adjacency when it has none.
func (l *Live) writable(v uint32) *vstate { return l.writableTo(&l.stats, v) }

// topFor makes the top slice this epoch's and long enough for mid mi.
func (l *Live) topFor(mi int) {
	if l.topEpoch != l.epoch {
		l.top = slices.Clone(l.top)
		l.topEpoch = l.epoch
	}
	if mi >= len(l.top) {
		l.top = append(l.top, make([]*mid, mi+1-len(l.top))...)
	}
}

// writableTo is writable counting into st: applyParallel's workers each
// write the vertices of their own mids, with their own counts, after
// topFor made the top ready for all of them.
func (l *Live) writableTo(st *Stats, v uint32) *vstate {
	mi, li, vi := int(v>>(leafBits+midBits)), int(v>>leafBits)&(midFan-1), int(v)&(leafFan-1)
	l.topFor(mi)
	m := l.top[mi]
	if m == nil && mi < len(l.spare) && l.spare[mi] != nil {
		m = l.adopt(st, mi)
		l.top[mi], l.spare[mi] = m, nil // each mid's worker its own elements
	}
	if m == nil || m.epoch != l.epoch {
		nm := &mid{epoch: l.epoch}
		if m != nil {
			nm.leaves = m.leaves
		} else {
			st.Bytes += int64(unsafe.Sizeof(mid{}))
		}
		m, l.top[mi] = nm, nm
	}
	lf := m.leaves[li]
	if lf != nil && lf.epoch == l.spareEpoch {
		// A spare leaf of the adopted mid: its states are the
		// epoch's to write in place.
		lf.epoch, lf.dirty, lf.own = l.epoch, 0, ^uint64(0)
	}
	if lf == nil || lf.epoch != l.epoch {
		nl := &leaf{epoch: l.epoch}
		if lf != nil {
			nl.v = lf.v
		} else {
			st.Bytes += int64(unsafe.Sizeof(leaf{}))
		}
		lf, m.leaves[li] = nl, nl
	}
	vs := lf.v[vi]
	mine := (lf.dirty|lf.own)>>vi&1 != 0 // made, copied or taken over in this epoch
	lf.dirty |= 1 << vi
	m.dirty[li/64] |= 1 << (li % 64)
	switch {
	case vs == nil && l.under != nil && l.under.Has(v):
		// Published in under's records, not in the tree: copied out as
		// a published state is.
		vs = l.newState()
		vs.view = *l.under.Vertex(v)
		st.Bytes += stateBytes(l.timed)
	case vs == nil:
		vs = l.newState()
		vs.view.SetLabelled(l.labelled)
		if v < l.baseV {
			a, b := l.base.Offsets[v], l.base.Offsets[v+1]
			vs.view.Live = uint32(b - a)
			if l.weighted {
				for _, w := range l.base.Weights[a:b] {
					vs.view.BaseWeight += float64(w)
				}
			} else {
				vs.view.BaseWeight = float64(b - a)
			}
		}
		st.Vertices++
		st.Bytes += stateBytes(l.timed)
	case !mine:
		if l.timed {
			c := *(*tvstate)(unsafe.Pointer(vs))
			vs = &c.vstate
		} else {
			c := *vs
			vs = &c
		}
	default:
		return vs
	}
	lf.v[vi] = vs
	return vs
}

// adopt takes spare mid mi over for this epoch: its leaves of the spare's
// epoch stay, to be taken over on their first write (writableTo), older
// ones (spare leaves of an earlier spare, never written since) go, and
// Stats.Bytes counts again what it keeps, as treeBytes will subtract it
// at the next drop. The caller puts it in the top.
func (l *Live) adopt(st *Stats, mi int) *mid {
	m := l.spare[mi]
	m.epoch, m.dirty = l.epoch, [midFan / 64]uint64{}
	for li, lf := range m.leaves {
		if lf != nil && lf.epoch != l.spareEpoch {
			m.leaves[li] = nil
		}
	}
	st.Bytes += treeBytes([]*mid{m}, l.timed)
	return m
}

// newState allocates an empty vertex state, a tvstate on a graph with
// edge times.
func (l *Live) newState() *vstate {
	if l.timed {
		return &new(tvstate).vstate
	}
	return new(vstate)
}

func (l *Live) insert(u *Update) {
	if l.win != nil && !l.admit(u) {
		return
	}
	s, d := l.vertex(u.Src), l.vertex(u.Dst)
	vs := l.insertAt(&l.stats, u, s, d)
	if l.win != nil {
		l.appended(s, vs.times(), u.Time)
	}
}

// insertAt appends u's edge s -> d (dense ids) to s's state, counting into
// st, and returns the state.
func (l *Live) insertAt(st *Stats, u *Update, s, d uint32) *vstate {
	vs := l.writableTo(st, s)
	dv := &vs.view
	w := float32(1)
	if u.Has&HasWeight != 0 {
		w = u.Weight
	}
	n := int(dv.N)
	e := edgesFull(dv)
	if n == cap(e) {
		// Full: a new array, the labels behind it moved with the edges.
		ne := l.newEdges(n + 1)
		copy(ne, e)
		if l.labelled {
			copy(labelsOf(ne), labelsOf(e)[:n])
		}
		st.Bytes += l.edgeBytes(cap(ne)) - l.edgeBytes(cap(e))
		e = ne[:n]
	}
	e = append(e, walk.DeltaEdge{Target: d, Weight: w})
	if l.labelled {
		labelsOf(e)[n] = u.Label
	}
	dv.SetEdges(e)
	dv.MaxWeight = max(dv.MaxWeight, w)
	if l.timed {
		x := vs.times()
		x.times = append(x.times, u.Time)
	}
	dv.Live++
	st.Inserted++
	st.DeltaEdges++
	return vs
}

// edgesFull returns dv's appended edges with their array's capacity,
// walk.DeltaCap(N): an append within it writes in place, beyond every
// published state's length.
func edgesFull(dv *walk.DeltaVertex) []walk.DeltaEdge {
	if dv.First == nil {
		return nil
	}
	return unsafe.Slice(dv.First, walk.DeltaCap(int(dv.N)))[:dv.N]
}

// newEdges returns an array for n appended edges (len n) of capacity
// walk.DeltaCap(n), on a labelled graph with room for as many labels
// right behind it (labelsOf, walk.DeltaVertex.Labels): one allocation, and
// an append in place writes its label in place too. nil for none.
func (l *Live) newEdges(n int) []walk.DeltaEdge {
	c := walk.DeltaCap(n)
	if c == 0 {
		return nil
	}
	words := c
	if l.labelled {
		words += (c + 7) / 8
	}
	buf := make([]uint64, words) // no pointers: the collector does not scan it
	return unsafe.Slice((*walk.DeltaEdge)(unsafe.Pointer(unsafe.SliceData(buf))), c)[:n]
}

// labelsOf returns the labels' room behind an array newEdges made (e
// resliced from it, its capacity kept): cap(e) labels.
func labelsOf(e []walk.DeltaEdge) []uint8 {
	c := cap(e)
	if c == 0 {
		return nil
	}
	return unsafe.Slice((*uint8)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(e[:c])), c*int(unsafe.Sizeof(walk.DeltaEdge{})))), c)
}

// edgeBytes is the memory of an array of c appended edges newEdges makes,
// with, on a graph with edge times, the times' array of as many.
func (l *Live) edgeBytes(c int) int64 {
	n := int64(c) * int64(unsafe.Sizeof(walk.DeltaEdge{}))
	if l.labelled {
		n += int64((c+7)/8) * 8
	}
	if l.timed {
		n += int64(c) * 8
	}
	return n
}

// labelsFull returns dv's labels to the capacity of its appended edges'
// array (on a labelled graph; nil on one without).
func labelsFull(dv *walk.DeltaVertex) []uint8 {
	if dv.Labels() == nil {
		return nil
	}
	return labelsOf(edgesFull(dv))
}

func (l *Live) delete(u *Update) {
	l.stats.Deleted++
	s, ok1 := l.lookup(u.Src)
	d, ok2 := l.lookup(u.Dst)
	if !ok1 || !ok2 {
		return
	}
	l.deleteAt(&l.stats, s, d)
}

// deleteAt kills every edge s -> d (dense ids) there is, counting into st.
func (l *Live) deleteAt(st *Stats, s, d uint32) {
	// Count what the delete kills before touching s's state, so a delete
	// of nothing leaves the delta as it was.
	old := l.peek(s)
	var dead []walk.Tombstone
	var delta []walk.DeltaEdge
	if old != nil {
		dead, delta = old.Dead(), old.Edges()
	}
	killed := 0
	i, had := slices.BinarySearchFunc(dead, d, cmpTomb)
	from := 0
	if had {
		from = int(dead[i].Upto)
	} else if s < l.baseV {
		adj := l.base.Neighbors(s)
		lo, _ := slices.BinarySearch(adj, d)
		hi := lo
		for hi < len(adj) && adj[hi] == d {
			hi++
		}
		killed += hi - lo
	}
	for _, e := range delta[from:] {
		if e.Target == d {
			killed++
		}
	}
	if killed == 0 {
		return
	}
	vs := l.writableTo(st, s)
	ts := walk.Tombstone{Target: d, Upto: vs.view.N}
	nd := make([]walk.Tombstone, 0, len(dead)+1)
	nd = append(nd, dead[:i]...)
	nd = append(nd, ts)
	if had {
		nd = append(nd, dead[i+1:]...)
	} else {
		nd = append(nd, dead[i:]...)
		st.Tombstones++
		st.Bytes += int64(unsafe.Sizeof(ts))
	}
	vs.view.SetDeadAdding(nd, d)
	vs.view.Live -= uint32(killed)
}

func cmpTomb(x walk.Tombstone, t uint32) int { return int(int64(x.Target) - int64(t)) }

// peek returns v's current delta (nil when it has none) without copying:
// its state in the tree, else its record in under. Read-only.
func (l *Live) peek(v uint32) *walk.DeltaVertex {
	if vs := findState(l.top, v); vs != nil {
		return &vs.view
	}
	if l.under != nil {
		return l.under.Vertex(v)
	}
	return nil
}

func findState(top []*mid, v uint32) *vstate {
	mi := int(v >> (leafBits + midBits))
	if mi >= len(top) {
		return nil
	}
	m := top[mi]
	if m == nil {
		return nil
	}
	lf := m.leaves[int(v>>leafBits)&(midFan-1)]
	if lf == nil {
		return nil
	}
	return lf.v[int(v)&(leafFan-1)]
}

// Snapshot is a published, immutable state of a live graph: the base, the
// delta up to its watermark. It is a walk.Overlay.
type Snapshot struct {
	base *graph.Graph
	// top holds the states written since under was made; under every
	// other vertex's record (nil when top holds them all).
	top       []*mid
	under     *walk.DeltaIndex
	n         uint32
	added     []int64
	watermark map[int32]int64
	stats     Stats
	epoch     uint64
	ids       *idTable
	// next is closed when a later snapshot is published (WaitFor).
	next chan struct{}
	// idx is the delta's flat index, made at Publish from the last one's.
	idx *walk.DeltaIndex
	// lazy builds built whole on the first walk of a snapshot published
	// while nobody walked (idx nil then).
	lazy  sync.Once
	built *walk.DeltaIndex
	live  *Live
	// win is the time window as of the snapshot (Window).
	win windowMark
}

// Covers reports whether the snapshot's watermark reaches want on every
// partition it names.
func (s *Snapshot) Covers(want map[int32]int64) bool {
	for p, off := range want {
		if s.watermark[p] < off {
			return false
		}
	}
	return true
}

var _ walk.TimedOverlay = (*Snapshot)(nil)

// Base is the graph the delta applies to.
func (s *Snapshot) Base() *graph.Graph { return s.base }

// NumVertices counts the base's vertices and the added ones.
func (s *Snapshot) NumVertices() int { return int(s.n) }

// Empty reports that the snapshot is its base unchanged.
func (s *Snapshot) Empty() bool { return s.top == nil && (s.under == nil || s.under.Len() == 0) }

// Vertex returns v's delta, nil when it has none: its state in the
// snapshot's tree, else its record in the index under it.
func (s *Snapshot) Vertex(v uint32) *walk.DeltaVertex {
	if vs := findState(s.top, v); vs != nil {
		return &vs.view
	}
	if s.under != nil {
		return s.under.Vertex(v)
	}
	return nil
}

// DeltaBytes is the delta's memory as of the snapshot: Stats().Bytes and
// the delta index that holds the records the tree does not.
func (s *Snapshot) DeltaBytes() int64 {
	n := s.stats.Bytes
	if s.under != nil {
		n += s.under.Bytes()
	}
	return n
}

// DeltaTimes implements walk.TimedOverlay: the times of v's appended
// edges, nil when v has no delta or the graph no times. A graph with edge
// times keeps every vertex's state in the tree (Publish).
func (s *Snapshot) DeltaTimes(v uint32) []int64 {
	vs := findState(s.top, v)
	if vs == nil || !s.base.Timed() {
		return nil
	}
	return vs.times().times
}

// DeltaIndex implements walk.DeltaIndexer: the vertices with a delta as a
// bitmap and flat arrays, made when the snapshot was published.
func (s *Snapshot) DeltaIndex() *walk.DeltaIndex {
	if s.live != nil {
		s.live.walkedAt.Store(time.Now().UnixNano())
	}
	if s.idx != nil {
		return s.idx
	}
	s.lazy.Do(func() { s.built = wholeIndex(s.top, s.under, s.n) })
	return s.built
}

// eagerWindow is how long after a walk asked for a snapshot's delta index
// Publish goes on making each snapshot's index (Publish).
const eagerWindow = 10 * time.Second

// Epoch numbers the snapshots of one live graph, 1 for the empty one.
func (s *Snapshot) Epoch() uint64 { return s.epoch }

// Stats are the delta's counters as of the snapshot.
func (s *Snapshot) Stats() Stats { return s.stats }

// Watermark is, per edge-topic partition, the offset after the last record
// the snapshot holds: the offset to read the partition from to continue it.
func (s *Snapshot) Watermark() map[int32]int64 { return maps.Clone(s.watermark) }

// ExternalID converts a dense id to the external id.
func (s *Snapshot) ExternalID(v uint32) int64 {
	if b := uint32(s.base.NumVertices()); v >= b {
		return s.added[v-b]
	}
	return s.base.ExternalID(v)
}

// DenseID converts an external id to a dense id; ok is false for an id the
// snapshot does not hold (an added vertex is held from the snapshot that
// first holds an edge naming it).
func (s *Snapshot) DenseID(ext int64) (uint32, bool) {
	if v, ok := s.base.DenseID(ext); ok {
		return v, true
	}
	s.ids.mu.RLock()
	v, ok := s.ids.added[ext]
	s.ids.mu.RUnlock()
	if !ok || v >= s.n {
		return 0, false
	}
	return v, true
}

// Naming returns a graph that names the snapshot's vertices for writers
// that map dense ids to external ones (the sink's Parquet encoder reads
// Graph.IDs and NumVertices): the base itself when no vertex was added,
// else the base's name, version, edges and ids followed by the added
// vertices, edgeless (their edges are in the delta). Its DenseID does not
// know the added vertices: resolve ids through the snapshot.
//
// The first call that needs it copies the base's offsets and ids (16
// bytes a vertex, once per live graph); later snapshots append their
// added vertices to the same table, which views of earlier snapshots
// share up to their own length.
func (s *Snapshot) Naming() *graph.Graph {
	b := s.base
	if s.n == uint32(b.NumVertices()) {
		return b
	}
	l := s.ids
	l.namingMu.Lock()
	if l.namingIDs == nil {
		if b.IDs != nil {
			l.namingIDs = slices.Clone(b.IDs)
		} else {
			l.namingIDs = make([]int64, b.NumVertices())
			for v := range l.namingIDs {
				l.namingIDs[v] = int64(v)
			}
		}
		l.namingOffs = slices.Clone(b.Offsets)
	}
	for len(l.namingIDs) < int(s.n) {
		l.namingIDs = append(l.namingIDs, s.added[len(l.namingIDs)-b.NumVertices()])
		l.namingOffs = append(l.namingOffs, l.namingOffs[len(l.namingOffs)-1])
	}
	ids, offs := l.namingIDs[:s.n:s.n], l.namingOffs[:s.n+1:s.n+1]
	l.namingMu.Unlock()
	return &graph.Graph{Name: b.Name, Version: b.Version, Offsets: offs, Targets: b.Targets, Weights: b.Weights,
		Labels: b.Labels, NumLabels: b.NumLabels, IDs: ids, Times: b.Times, ByTime: b.ByTime}
}
