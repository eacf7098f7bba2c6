// Package sysmem tells how much memory this process may use, so that
// optional speed-for-memory trades (the CPU engine's fused table) can size
// themselves by default instead of failing with an out-of-memory kill.
package sysmem

import (
	"bytes"
	"os"
	"strconv"
)

// Limit is the memory this process may use: physical memory, or the cgroup
// v2 memory.max of the process's cgroup where that is lower (a container's
// limit). It is 0 where neither can be read.
func Limit() int64 {
	total := physical()
	if c := cgroupMax("/sys/fs/cgroup/memory.max"); c > 0 && (total == 0 || c < total) {
		return c
	}
	return total
}

// cgroupMax parses a cgroup v2 memory.max file: a byte count, or "max" for
// none (0).
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
