package livegraph

// Background compaction with a swap (issue 37). The applier marks a
// snapshot to compact (BeginCompaction) and goes on applying; from then on
// Apply also keeps each record it applies. Compact reads only the snapshot,
// so it runs on another goroutine. When the compacted graph is ready (and
// whatever serves it, an engine, is built), the applier calls Rebase: a
// new, empty delta over the compacted graph takes the records applied
// since the snapshot, applied again in their order, and is published. The
// snapshots of the old base stay whole (they hold their base, tree and id
// table), so a walk on one finishes on it.
//
// Applying the records again is done mostly off the applier: the
// compacting goroutine builds the new live graph over the compacted base
// and catches it up with the records kept so far (Rebaser.CatchUp), as
// often as it likes, while the applier goes on; the applier's swap
// (FinishRebase) then applies only the records kept after the last catch
// up. Applying them all on the applier stopped ingest for as long as the
// compaction took to apply again (1-2 s at scale 20 on two cores, under a
// sustained stream), which is what an update's latency to walkable saw.
//
// Applying the records again gives the graph the records describe from the
// start: Compact orders a vertex's edges by (target, time) stably, base
// edges first, and a compacted base lists a vertex's live edges in that
// order already, so base-then-inserts sorts stably to the same list; a
// delete kills the base edges and the earlier inserts to its target on
// either side of the rebase. TestRebaseEqualsRebuild checks it.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/walkstage/walkstage/graph"
)

// ErrNoCompaction is returned by Rebase when no compaction is in progress.
var ErrNoCompaction = errors.New("live graph: no compaction in progress")

// compaction is the compaction in progress: the snapshot being compacted
// and the records applied since, in order.
type compaction struct {
	snap *Snapshot
	// opts resume the window over the compacted base (ResumeOptions),
	// taken on the applier when the compaction begins.
	opts []Option
	// mu guards records and updates: the applier appends, a Rebaser
	// reads the ones kept so far on the compacting goroutine.
	mu      sync.Mutex
	records []record
	updates int64
	// released records (a prefix) have had their updates dropped: a
	// Rebaser applied them (release).
	released int
}

// record is one applied record kept for a rebase.
type record struct {
	partition int32
	offset    int64
	ups       []Update
}

func (c *compaction) record(partition int32, offset int64, ups []Update) {
	// The caller may reuse its slice; the copy is 40 bytes an update, held
	// only while a compaction runs.
	r := record{partition: partition, offset: offset, ups: slices.Clone(ups)}
	c.mu.Lock()
	c.records = append(c.records, r)
	c.updates += int64(len(ups))
	c.mu.Unlock()
}

// kept returns the records kept from index i on. The records' contents
// never change once kept (release drops them whole).
func (c *compaction) kept(i int) []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[i:len(c.records):len(c.records)]
}

// release drops the updates of the records before i, applied over the
// new base already: a catch up may go on for many rounds under a stream
// (stage/live's catchUpRounded), and the copies would otherwise grow with
// every update applied until the swap, not with the catch up's distance
// to the applier.
// It returns how many updates are kept in all.
func (c *compaction) release(i int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for j := c.released; j < i; j++ {
		c.records[j].ups = nil
	}
	c.released = max(c.released, i)
	return c.updates
}

func (c *compaction) releasedAny() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released > 0
}

// DeltaSize is the size of the delta for a compaction threshold: the
// appended edges (deleted ones included) plus the tombstones.
func (st Stats) DeltaSize() int64 { return st.DeltaEdges + st.Tombstones }

// DueForCompaction reports whether snapshot s's delta has reached both
// ratio times its base's edges and minDelta (Stats.DeltaSize). A ratio of 0
// or less means never.
func (s *Snapshot) DueForCompaction(ratio float64, minDelta int64) bool {
	if ratio <= 0 {
		return false
	}
	d := s.stats.DeltaSize()
	return d > 0 && d >= minDelta && float64(d) >= ratio*float64(s.base.NumEdges())
}

// BeginCompaction publishes what was applied so far and returns that
// snapshot, to be compacted (Compact) on another goroutine; from now on
// Apply keeps each record it applies, for Rebase. Applier only. It fails
// when a compaction is already in progress.
func (l *Live) BeginCompaction() (*Snapshot, error) {
	if l.compacting != nil {
		return nil, fmt.Errorf("live graph %q: a compaction of snapshot %d is in progress", l.base.Name, l.compacting.snap.epoch)
	}
	s := l.Publish()
	l.compacting = &compaction{snap: s, opts: l.ResumeOptions(s)}
	return s, nil
}

// Compacting is the snapshot being compacted, nil when none is. Applier only.
func (l *Live) Compacting() *Snapshot {
	if l.compacting == nil {
		return nil
	}
	return l.compacting.snap
}

// AbortCompaction drops the compaction in progress (its compaction
// failed): the delta goes on growing over the current base. Applier only.
func (l *Live) AbortCompaction() { l.compacting = nil }

// RebaseStats says what a rebase applied again.
type RebaseStats struct {
	// Records and Updates count the records applied after the compacted
	// snapshot, applied again over the new base; TailUpdates those of them
	// applied on the applier at the swap (the rest were caught up on the
	// compacting goroutine).
	Records, Updates, TailUpdates int64
}

// Rebaser builds the live graph over a compacted base and catches it up
// with the records applied since the compacted snapshot, on the
// compacting goroutine, for FinishRebase to swap in. NewRebaser is for the
// applier; Base and CatchUp for one other goroutine.
type Rebaser struct {
	c    *compaction
	name string
	nl   *Live
	done int // records applied to nl
	st   RebaseStats
	// applied, when set (tests), runs after each record CatchUp applies:
	// where the applier, on its own goroutine, keeps records meanwhile.
	applied func()
}

// NewRebaser returns the rebaser of the compaction in progress. Applier only.
func (l *Live) NewRebaser() (*Rebaser, error) {
	if l.compacting == nil {
		return nil, ErrNoCompaction
	}
	return &Rebaser{c: l.compacting, name: l.base.Name}, nil
}

// Base starts the new live graph over g, the compaction of the snapshot
// BeginCompaction returned (Compact's result, maybe saved and loaded
// again). The dense ids of g are an import's (ascending external id),
// which may differ from the old base's: resolve external ids through the
// snapshot a walk takes. Of opts, WithWorkers bounds the catch up's
// records spread over goroutines (CatchUp; FinishRebase's tail, on the
// applier, takes the live graph's own); the window is the compacted
// snapshot's.
func (r *Rebaser) Base(g *graph.Graph, opts ...Option) error {
	old := r.c.snap
	if r.c.releasedAny() {
		return fmt.Errorf("rebase live graph %q: a catch up over another base has dropped the records it applied", r.name)
	}
	if err := sameSchema(old.base, g); err != nil {
		return fmt.Errorf("rebase live graph %q: %w", r.name, err)
	}
	if g.NumVertices() != int(old.n) {
		return fmt.Errorf("rebase live graph %q: the new base has %d vertices, the compacted snapshot %d: it is not that snapshot's compaction",
			r.name, g.NumVertices(), old.n)
	}
	if g.HasStringIDs() {
		return fmt.Errorf("rebase live graph %q: the new base has string ids", r.name)
	}
	// The window, when there is one, resumes where it stood at the
	// compacted snapshot: the records applied again evict what they
	// evicted the first time.
	nl, err := New(g, slices.Concat(r.c.opts, opts)...)
	if err != nil {
		return fmt.Errorf("rebase live graph %q: %w", r.name, err)
	}
	// nl publishes nothing before the swap: its nodes are its own, tagged
	// with an epoch past the compacted snapshot's.
	nl.epoch, nl.watermark = old.epoch+1, maps.Clone(old.watermark)
	r.nl, r.done, r.st = nl, 0, RebaseStats{}
	return nil
}

// CatchUp applies the records kept since the last call to the new live
// graph and returns how many updates are kept and not applied yet (those
// the applier added meanwhile).
func (r *Rebaser) CatchUp() (behind int64, err error) {
	if r.nl == nil {
		return 0, fmt.Errorf("rebase live graph %q: no base yet", r.name)
	}
	recs := r.c.kept(r.done)
	for _, rec := range recs {
		if err := r.nl.Apply(rec.partition, rec.offset, rec.ups); err != nil {
			return 0, fmt.Errorf("rebase live graph %q: record at partition %d offset %d applied before does not apply to the compacted base: %w",
				r.name, rec.partition, rec.offset, err)
		}
		r.done++
		r.st.Records++
		r.st.Updates += int64(len(rec.ups))
		if r.applied != nil {
			r.applied()
		}
	}
	// What was kept while this round applied, counted now: counted at the
	// round's start (as it was), it was always zero, so the stage's
	// catch up stopped after its first round and the applier applied
	// everything kept meanwhile at the swap (0.7-2.2 M updates at scale
	// 22, a second or more without ingest).
	return r.c.release(r.done) - r.st.Updates, nil
}

// Rebase makes g, the compaction of the snapshot BeginCompaction returned,
// the live graph's base: the records applied since that snapshot are
// applied again, in order, to an empty delta over g, and the result is
// published (NewRebaser, Base, FinishRebase on the applier). Applier only.
func (l *Live) Rebase(g *graph.Graph) (*Snapshot, RebaseStats, error) {
	r, err := l.NewRebaser()
	if err != nil {
		return nil, RebaseStats{}, err
	}
	if err := r.Base(g); err != nil {
		l.compacting = nil
		return nil, RebaseStats{}, err
	}
	return l.FinishRebase(r)
}

// FinishRebase applies the records kept after r's last catch up to its
// live graph and makes it this one's state, then publishes it. The live
// graph changes only when all of them apply; on an error it keeps its base
// and delta, and the compaction is dropped. Snapshots of the old base are
// left as they were. Applier only.
func (l *Live) FinishRebase(r *Rebaser) (*Snapshot, RebaseStats, error) {
	c := l.compacting
	if c == nil || c != r.c {
		return nil, RebaseStats{}, ErrNoCompaction
	}
	l.compacting = nil
	before := r.st.Updates
	if r.nl != nil {
		// The tail is the applier's: on its workers, not the catch up's.
		r.nl.opts.workers, r.nl.opts.cores, r.nl.opts.onWorker = l.opts.workers, l.opts.cores, l.opts.onWorker
	}
	if _, err := r.CatchUp(); err != nil {
		return nil, RebaseStats{}, err
	}
	st := r.st
	st.TailUpdates = st.Updates - before
	nl := r.nl
	// The published snapshots keep their own base, tree and id table;
	// the applier's working state moves to the new base. Its epoch stays
	// past every snapshot published.
	l.base, l.baseV = nl.base, nl.baseV
	l.top, l.topEpoch, l.addedIDs = nl.top, nl.topEpoch, nl.addedIDs
	l.watermark, l.stats, l.ids, l.win = nl.watermark, nl.stats, nl.ids, nl.win
	l.epoch = max(l.epoch, nl.epoch)
	l.under = nl.under
	l.index = nil // a new tree: its snapshot's index is built whole
	// The catch up's tree may be its snapshots': nothing of it is spare.
	l.spare, l.spareEpoch, l.unseen = nil, 0, false
	return l.Publish(), st, nil
}

// sameSchema refuses a new base that does not carry what the old one does:
// the updates were checked against the old one's fields.
func sameSchema(old, g *graph.Graph) error {
	switch {
	case old.Weighted() != g.Weighted():
		return fmt.Errorf("the new base is weighted=%v, the old one weighted=%v", g.Weighted(), old.Weighted())
	case old.Labelled() != g.Labelled():
		return fmt.Errorf("the new base is labelled=%v, the old one labelled=%v", g.Labelled(), old.Labelled())
	case old.Timed() != g.Timed():
		return fmt.Errorf("the new base has edge times=%v, the old one %v", g.Timed(), old.Timed())
	}
	return nil
}

// NewAt starts a live graph over base, a version compacted at watermark
// (the offsets its catalog entry records): its snapshots carry the
// watermark from the start, and the edge topic is to be read from there.
func NewAt(base *graph.Graph, watermark map[int32]int64, opts ...Option) (*Live, error) {
	l, err := New(base, opts...)
	if err != nil {
		return nil, err
	}
	for p, off := range watermark {
		if p < 0 || off < 0 {
			return nil, fmt.Errorf("live graph over %q: watermark partition %d offset %d is negative", base.Name, p, off)
		}
	}
	l.watermark = maps.Clone(watermark)
	l.Publish()
	return l, nil
}
