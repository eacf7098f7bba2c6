// Package sysmem tells how much memory this process may use, so that
// optional speed-for-memory trades (the CPU engine's fused table) and the
// out-of-core engines' budgets can size themselves by default instead of
// failing with an out-of-memory kill.
package sysmem

import (
	"bufio"
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
	c := cgroupAt(selfCgroup, root)
	return c.limit, c.source
}

// Available is the memory the process may still take: the kernel's
// MemAvailable, or less where the cgroup's limit less its usage is lower
// (the least such headroom up the process's path); -1 when neither is
// known.
func Available() int64 {
	avail := MemAvailableAt("/proc/meminfo")
	if avail == 0 {
		avail = -1
	}
	if c := cgroupAt("/proc/self/cgroup", "/sys/fs/cgroup"); c.limit > 0 && (avail < 0 || c.headroom < avail) {
		avail = c.headroom
	}
	return avail
}

// cgroupFiles names a hierarchy's limit and usage files.
type cgroupFiles struct{ limit, usage, source string }

var (
	v2Files = cgroupFiles{"memory.max", "memory.current", "cgroup memory.max"}
	v1Files = cgroupFiles{"memory.limit_in_bytes", "memory.usage_in_bytes", "cgroup memory.limit_in_bytes"}
)

// cgroupLimit is what cgroupAt found: the lowest limit, the least headroom
// (a limit less its cgroup's usage) and the files' kind; zero when none.
type cgroupLimit struct {
	limit, headroom int64
	source          string
}

func cgroupAt(selfCgroup, root string) cgroupLimit {
	if rel, ok := cgroupPath(selfCgroup, func(hierarchy, controllers string) bool { return hierarchy == "0" && controllers == "" }); ok {
		if c := lowestLimit(root, rel, v2Files); c.limit > 0 {
			return c
		}
	}
	if rel, ok := cgroupPath(selfCgroup, func(hierarchy, controllers string) bool {
		return hierarchy != "0" && slices.Contains(strings.Split(controllers, ","), "memory")
	}); ok {
		return lowestLimit(filepath.Join(root, "memory"), rel, v1Files)
	}
	return cgroupLimit{}
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

// lowestLimit reads f's files in root/rel and in each ancestor up to root
// and returns the lowest limit and the least headroom.
func lowestLimit(root, rel string, f cgroupFiles) cgroupLimit {
	var c cgroupLimit
	seen := false
	for dir := filepath.Join(root, rel); ; dir = filepath.Dir(dir) {
		if n := cgroupMax(filepath.Join(dir, f.limit)); n > 0 {
			room := max(n-cgroupMax(filepath.Join(dir, f.usage)), 0)
			if !seen || n < c.limit {
				c.limit, c.source = n, f.source
			}
			if !seen || room < c.headroom {
				c.headroom = room
			}
			seen = true
		}
		if len(dir) <= len(filepath.Clean(root)) {
			return c
		}
	}
}

// MemAvailableAt is MemAvailable of a /proc/meminfo file in bytes, 0 when
// unknown.
func MemAvailableAt(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0
			}
			return n << 10 // kB
		}
	}
	return 0
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
