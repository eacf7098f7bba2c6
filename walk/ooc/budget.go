package ooc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/walkstage/walkstage/internal/sysmem"
)

// EnvHostMemoryLimit names the environment variable that sets the host
// memory budget in bytes, ahead of the cgroup's limit and MemAvailable.
const EnvHostMemoryLimit = "WALKSTAGE_HOST_MEMORY_LIMIT"

// Budget is how much host memory a process may use and where that figure
// came from (logs and `graph info` say which).
type Budget struct {
	Bytes  int64
	Source string // "WALKSTAGE_HOST_MEMORY_LIMIT", "cgroup memory.max", "cgroup memory.limit_in_bytes" or "MemAvailable"
}

// HostMemory is the host memory budget of this process:
// WALKSTAGE_HOST_MEMORY_LIMIT when set, else the memory.max of the process's
// cgroup v2 when it has one, else its cgroup v1 memory limit
// (sysmem.CgroupLimit), else the kernel's MemAvailable; Bytes is 0 when none of them can be read (not
// Linux). An unreadable variable is an
// error (a typo must not silently mean "no limit").
func HostMemory() (Budget, error) {
	return hostMemory(os.Getenv(EnvHostMemoryLimit), "/proc/self/cgroup", "/sys/fs/cgroup", "/proc/meminfo")
}

func hostMemory(env, selfCgroup, cgroupRoot, meminfo string) (Budget, error) {
	if s := strings.TrimSpace(env); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return Budget{}, fmt.Errorf("%s=%q: want a positive byte count", EnvHostMemoryLimit, env)
		}
		return Budget{n, EnvHostMemoryLimit}, nil
	}
	if n, src := sysmem.CgroupLimitAt(selfCgroup, cgroupRoot); n > 0 {
		return Budget{n, src}, nil
	}
	if n := sysmem.MemAvailableAt(meminfo); n > 0 {
		return Budget{n, "MemAvailable"}, nil
	}
	return Budget{}, nil
}
