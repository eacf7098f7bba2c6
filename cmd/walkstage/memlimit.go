package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/internal/sysmem"
)

// memoryLimitPercent of the memory the process may use becomes the Go
// runtime's soft limit when GOMEMLIMIT is not set. Without a limit the
// collector lets the heap grow to twice the live data (GOGC=100), and most
// of a replica's RSS was collector slack: about 1 GiB for 1,000-walk
// batches on an 8 MiB graph, against 298 MiB at the same throughput under
// GOMEMLIMIT=256MiB (issue 12). The rest is headroom for what the runtime
// does not count: C and CUDA allocations (the GPU engine's host buffers)
// and thread stacks. The memory-mapped graph file is not counted either,
// but its pages are clean page cache the kernel reclaims before killing.
const memoryLimitPercent = 90

// defaultMemoryLimit is the soft limit to set: 0 (leave the runtime alone)
// when GOMEMLIMIT is set or no limit is known, else memoryLimitPercent of
// limit (the cgroup limit, or physical memory where there is none).
func defaultMemoryLimit(gomemlimit string, limit int64) int64 {
	if gomemlimit != "" || limit <= 0 {
		return 0
	}
	return limit/100*memoryLimitPercent + limit%100*memoryLimitPercent/100 // no overflow
}

// memoryLimit is what applyMemoryLimit did, for run's start-up log: the
// limit set (0: none) and how it was chosen.
var memoryLimit struct {
	bytes int64
	note  string
}

// applyMemoryLimit sets the runtime's soft memory limit from the
// container's limit unless GOMEMLIMIT says otherwise, and returns the limit
// in force (0: none) and how it was chosen.
func applyMemoryLimit() (int64, string) {
	env := os.Getenv("GOMEMLIMIT")
	limit := sysmem.Limit()
	n := defaultMemoryLimit(env, limit)
	switch {
	case env != "":
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT from the environment"
	case n == 0:
		return 0, "no memory limit known; the runtime's default applies"
	}
	debug.SetMemoryLimit(n)
	return n, fmt.Sprintf("soft memory limit %s: %d%% of the %s this process may use (cgroup limit or physical memory); set GOMEMLIMIT to override",
		cli.HumanBytes(n), memoryLimitPercent, cli.HumanBytes(limit))
}

// liveGCPercent is the collector's target (GOGC) for a stage with a live
// graph when GOGC is not set and a soft memory limit is in force: the heap
// may grow to five times its live data between collections instead of
// twice, and the soft limit still bounds it (near the limit the runtime
// collects as often as it must). A live graph's applier, publications and
// compactions allocate about 400-450 bytes an update (the delta index's
// patches, side words and compactions) and the stage's own reading of the
// edge topic about 60 more, so at the 16-core host's 5 M updates a second
// the collector ran at 2.4-3.2 CPU-seconds a second beside the walks. At
// GOGC=400 the small-scale stage run of docs/benchmarks/live-graph.md ("The
// stage's allocations beside the ingest") took 5 collections where it took
// 16, for 11% more peak RSS. A stage without a live graph allocates about a
// byte a walked vertex and keeps the runtime's default, whose smaller heap
// issue 12 measured.
const liveGCPercent = 400

// defaultGCPercent is the GOGC to set: 0 (leave the runtime alone) unless
// the stage serves a live graph, GOGC is not set and a soft memory limit
// is in force (limit is the runtime's: math.MaxInt64 when none).
func defaultGCPercent(gogc string, limit int64, live bool) int {
	if !live || gogc != "" || limit <= 0 || limit == math.MaxInt64 {
		return 0
	}
	return liveGCPercent
}

// applyGCPercent sets GOGC for a stage that serves a live graph (live)
// per defaultGCPercent, and returns the collector's target in force and
// how it was chosen.
func applyGCPercent(live bool) (int, string) {
	env := os.Getenv("GOGC")
	limit := debug.SetMemoryLimit(-1)
	n := defaultGCPercent(env, limit, live)
	if n == 0 {
		cur := debug.SetGCPercent(-1)
		debug.SetGCPercent(cur)
		switch {
		case env != "":
			return cur, "GOGC from the environment"
		case !live:
			return cur, "the runtime's default"
		}
		return cur, "the runtime's default: no soft memory limit bounds a larger heap"
	}
	debug.SetGCPercent(n)
	return n, fmt.Sprintf("GOGC=%d for the live graph's allocations, within the soft memory limit %s; set GOGC to override", n, cli.HumanBytes(limit))
}
