// Package sysmem tells how much memory this process may use, so that
// optional speed-for-memory trades (the CPU engine's fused table) can size
// themselves by default instead of failing with an out-of-memory kill.
package sysmem

import (
	"bytes"
	"os"
	"strconv"
)

// Limit is the memory this process may use: physical memory, or the
// cgroup's limit where that is lower (a container's limit). It is 0 where
// neither can be read. The cgroup files are v2's memory.max at the root of
// the container's cgroup namespace, then v1's limit.
func Limit() int64 {
	return limit(physical(), "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
}

func limit(total int64, cgroupFiles ...string) int64 {
	for _, f := range cgroupFiles {
		if c := cgroupMax(f); c > 0 && (total == 0 || c < total) {
			total = c
		}
	}
	return total
}

// cgroupMax parses a cgroup memory limit file: a byte count, or "max" (v2)
// for none (0). v1's "no limit" is a huge count, which physical memory
// undercuts.
func cgroupMax(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
