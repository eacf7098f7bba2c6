// Package sysmem tells how much memory this process may use, so that
// optional speed-for-memory trades (the CPU engine's fused table) and the
// out-of-core engines' budgets can size themselves by default instead of
// failing with an out-of-memory kill.
package sysmem

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Limit is the memory this process may use: physical memory, or the
// cgroup's limit where that is lower (a container's limit). It is 0 where
// neither can be read.
func Limit() int64 {
	cg, _ := CgroupLimit()
	return limit(physical(), cg)
}

func limit(total, cgroup int64) int64 {
	if cgroup > 0 && (total == 0 || cgroup < total) {
		return cgroup
	}
	return total
}

// CgroupLimit is the memory limit of this process's cgroup and where it
// came from ("cgroup memory.max" for v2, "cgroup memory.limit_in_bytes"
// for v1); 0 and "" when none is set or none can be read.
func CgroupLimit() (int64, string) { return CgroupLimitAt("/proc/self/cgroup", "/sys/fs/cgroup") }

// CgroupLimitAt is CgroupLimit with the process's cgroup file (the format
// of /proc/self/cgroup) and the hierarchy's mount point given. The limit is
// the lowest of the process's cgroup and its ancestors up to the root: v2's
// memory.max when the process has a v2 cgroup with one, else the v1 memory
// controller's memory.limit_in_bytes (hosts and Kubernetes nodes that still
// run v1 set a container's limit there). A container usually sees its own
// cgroup mounted as the root while the file names the host's path, so the
// walk up to the root finds its limit in either case.
func CgroupLimitAt(selfCgroup, root string) (int64, string) {
	if rel, ok := cgroupPath(selfCgroup, func(hierarchy, controllers string) bool { return hierarchy == "0" && controllers == "" }); ok {
		if n := lowestLimit(root, rel, "memory.max"); n > 0 {
			return n, "cgroup memory.max"
		}
	}
	if rel, ok := cgroupPath(selfCgroup, func(hierarchy, controllers string) bool {
		return hierarchy != "0" && slices.Contains(strings.Split(controllers, ","), "memory")
	}); ok {
		if n := lowestLimit(filepath.Join(root, "memory"), rel, "memory.limit_in_bytes"); n > 0 {
			return n, "cgroup memory.limit_in_bytes"
		}
	}
	return 0, ""
}

// cgroupPath returns the path of the first line of the cgroup file
// ("hierarchy:controllers:path") that match accepts.
func cgroupPath(selfCgroup string, match func(hierarchy, controllers string) bool) (string, bool) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && match(f[0], f[1]) {
			return f[2], true
		}
	}
	return "", false
}

// lowestLimit reads file in root/rel and in each ancestor up to root and
// returns the lowest limit, 0 when there is none.
func lowestLimit(root, rel, file string) int64 {
	var lowest int64
	for dir := filepath.Join(root, rel); ; dir = filepath.Dir(dir) {
		if n := cgroupMax(filepath.Join(dir, file)); n > 0 && (lowest == 0 || n < lowest) {
			lowest = n
		}
		if len(dir) <= len(filepath.Clean(root)) {
			return lowest
		}
	}
}

// noLimit: cgroup v1 reports "no limit" as the largest page-aligned int64
// (9223372036854771712); any figure this large is none.
const noLimit = 1 << 62

// cgroupMax parses a cgroup memory limit file: a byte count, or 0 for none
// ("max" in v2, a huge count in v1) and for a file that cannot be read.
func cgroupMax(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 || n >= noLimit {
		return 0
	}
	return n
}
