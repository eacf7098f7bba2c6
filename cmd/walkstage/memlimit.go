package main

import (
	"fmt"
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
