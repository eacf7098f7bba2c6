package live

// When the applier publishes on its interval. A publication costs what
// changed since the last (the delta index's Update and Fold, the stats)
// plus a part that does not shrink with the interval (the index's patch
// copy, a word per 64 vertices). While the applier catches up a backlog it
// spent 40-50% of its time publishing on the 16-core host
// (docs/benchmarks/live-graph.md): every snapshot of a backlog is behind
// its records anyway, and a walk sees the backlog's end no sooner for the
// snapshots in between. So while records queue, a publication on the
// interval waits until the applier has applied for publishBehindApply
// times as long as the last publication took: publishing then takes at
// most about a fifth of its time. Read-your-writes waiters still get their
// publication early (Live.Waited); a stream the applier keeps up with is
// published every interval as before.

import "time"

const (
	// publishBehindApply is the applying time per unit of publishing time
	// while behind: 4, a publication share of at most 1/5.
	publishBehindApply = 4
	// publishMaxIntervals bounds the wait, in intervals, for a publication
	// whose cost grows with the updates it publishes faster than the wait.
	publishMaxIntervals = 10
)

// publishPacer decides whether a periodic publication is due.
type publishPacer struct {
	interval time.Duration
	last     time.Time     // the end of the last publication
	took     time.Duration // how long it took
}

// published records a publication that ended at end and took took.
func (p *publishPacer) published(end time.Time, took time.Duration) {
	p.last, p.took = end, took
}

// next is when the next periodic publication is due while behind:
// an interval after the last, or publishBehindApply times its cost if
// that is longer, at most publishMaxIntervals intervals.
func (p *publishPacer) next() time.Time {
	wait := min(max(p.interval, publishBehindApply*p.took), publishMaxIntervals*p.interval)
	return p.last.Add(wait)
}

// due reports whether the periodic publication at now goes ahead: always
// when the applier keeps up (not behind), else once next has come.
func (p *publishPacer) due(now time.Time, behind bool) bool {
	return !behind || !now.Before(p.next())
}

// queued reports whether records queue for the applier: in is at least
// half full (the edge reader fills it while a backlog lasts; a stream the
// applier keeps up with leaves it nearly empty).
func queued[T any](in <-chan T) bool {
	return cap(in) > 0 && 2*len(in) >= cap(in)
}
