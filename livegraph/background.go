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

	"github.com/walkstage/walkstage/graph"
)

// ErrNoCompaction is returned by Rebase when no compaction is in progress.
var ErrNoCompaction = errors.New("live graph: no compaction in progress")

// compaction is the compaction in progress: the snapshot being compacted
// and the records applied since, in order.
type compaction struct {
	snap    *Snapshot
	records []record
	updates int64
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
	c.records = append(c.records, record{partition: partition, offset: offset, ups: slices.Clone(ups)})
	c.updates += int64(len(ups))
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
	l.compacting = &compaction{snap: s}
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
	// snapshot, applied again over the new base.
	Records, Updates int64
}

// Rebase makes g, the compaction of the snapshot BeginCompaction returned
// (Compact's result, maybe saved and loaded again), the live graph's base:
// the records applied since that snapshot are applied again, in order, to
// an empty delta over g, and the result is published. The live graph
// changes only when all of them apply; on an error it keeps its base and
// delta, and the compaction is dropped. Applier only.
//
// The dense ids of the new base are an import's (ascending external id),
// which may differ from the old base's: resolve external ids through the
// snapshot a walk takes. Snapshots of the old base are left as they were.
func (l *Live) Rebase(g *graph.Graph) (*Snapshot, RebaseStats, error) {
	c := l.compacting
	if c == nil {
		return nil, RebaseStats{}, ErrNoCompaction
	}
	l.compacting = nil
	old := c.snap
	if err := sameSchema(old.base, g); err != nil {
		return nil, RebaseStats{}, fmt.Errorf("rebase live graph %q: %w", l.base.Name, err)
	}
	if g.NumVertices() != int(old.n) {
		return nil, RebaseStats{}, fmt.Errorf("rebase live graph %q: the new base has %d vertices, the compacted snapshot %d: it is not that snapshot's compaction",
			l.base.Name, g.NumVertices(), old.n)
	}
	if g.HasStringIDs() {
		return nil, RebaseStats{}, fmt.Errorf("rebase live graph %q: the new base has string ids", l.base.Name)
	}
	// The window, when there is one, resumes where it stood at the
	// compacted snapshot: the records applied again evict what they
	// evicted the first time.
	nl, err := New(g, l.ResumeOptions(old)...)
	if err != nil {
		return nil, RebaseStats{}, fmt.Errorf("rebase live graph %q: %w", l.base.Name, err)
	}
	nl.epoch, nl.watermark = l.epoch, maps.Clone(old.watermark)
	var st RebaseStats
	for _, r := range c.records {
		if err := nl.Apply(r.partition, r.offset, r.ups); err != nil {
			return nil, RebaseStats{}, fmt.Errorf("rebase live graph %q: record at partition %d offset %d applied before does not apply to the compacted base: %w",
				l.base.Name, r.partition, r.offset, err)
		}
		st.Records++
		st.Updates += int64(len(r.ups))
	}
	// The published snapshots keep their own base, tree and id table;
	// the applier's working state moves to the new base.
	l.base, l.baseV = nl.base, nl.baseV
	l.top, l.topEpoch, l.addedIDs = nl.top, nl.topEpoch, nl.addedIDs
	l.watermark, l.stats, l.ids, l.epoch, l.win = nl.watermark, nl.stats, nl.ids, nl.epoch, nl.win
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
