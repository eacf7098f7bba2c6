package live

import (
	"math"
	"runtime"
)

// Walkers is what the applier knows of the walks that share its host: how
// many cores they hold. The stage implements it; this package knows
// nothing else of walks.
type Walkers interface {
	// WalkerCores is how many cores walk jobs hold now, those running and
	// those queued for the engine; 0 when there are none. It is asked once
	// a pass, so it must be cheap and safe from any goroutine.
	WalkerCores() int
}

// DefaultApplyShare is the share of the cores the applier's passes (and a
// background compaction) keep while walks hold the cores
// (WALKSTAGE_EDGE_APPLY_SHARE): 2 of 16. On the 16-core host at scale 22
// (one run each) the walks beside a backlog ran at 53% of the mean static
// rate with it, 35% with every core (1) and 38% with a quarter, while the
// applier kept 1.2-1.4 M updates/s beside them against 1.9-2.3 M/s with
// every core (docs/benchmarks/live-graph.md, "Ingest beside walks"). Once
// the applier published for waiters once a drained queue, the paced
// series' update -> walkable p99 at 0.1 was 0.32 and 0.54 s (walks beside
// 44-46%, against 32% at 1; "The applier publishes for waiters once a
// drained queue"), and 0.1 became the stage's default.
const DefaultApplyShare = 0.1

// Beside shares the host's cores between the walks and the live graph's
// parallel work (a livegraph.Cores for Live.SetCores and
// Compaction.Cores): while walkers hold half the host's cores or more (a
// walk backlog), a pass of n goroutines takes the cores they leave free,
// and at least Share of its n (one at least); while they hold fewer, all
// n.
//
// Why: the applier's passes and the walkers' goroutines are runnable at
// once, and Go's scheduler shares the cores among goroutines, not among
// the work they are for: a pass of 16 goroutines beside 16 walkers took
// half the host from the walks. On the 16-core host a backlog went in at
// 5.7 M updates/s while the walks beside it fell from 32% to 23% of their
// static rate (docs/benchmarks/live-graph.md, "Ingest on the 16-core
// host"); with no walks to run, the cores are ingest's.
//
// Why half: a few short walk requests (the paced series' probes, a walk
// each, tens of ms) hold a core each but need latency, not width, and
// they wait for the snapshot the applier publishes. Cutting the applier
// and the compaction by the cores they hold (13 of 16 goroutines on
// average in the paced series at share 0.1) left an applier already near
// its limit (apply and publish ~1 s of each second) no room to drain a
// queue once one formed; docs/benchmarks/live-graph.md, "Beside walks: a
// share only for a walk backlog".
type Beside struct {
	Walkers Walkers
	// Share is the least share of its goroutines a pass keeps beside
	// walks, in (0, 1]: 1 keeps them all (ingest first, as before).
	Share float64
	// Procs is the host's cores (0: GOMAXPROCS).
	Procs int
}

// Cores implements livegraph.Cores.
func (b *Beside) Cores(n int) int {
	held := b.Walkers.WalkerCores()
	if held <= 0 {
		return n
	}
	procs := b.Procs
	if procs <= 0 {
		procs = runtime.GOMAXPROCS(0)
	}
	if 2*held < procs {
		return n // no backlog: a few walks hold a core each
	}
	keep := int(math.Ceil(b.Share * float64(n)))
	return max(1, min(n, max(keep, procs-held)))
}
