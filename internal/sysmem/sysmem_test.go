package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMax(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content string
		want          int64
	}{
		{"limit", "536870912\n", 536870912},
		{"unlimited", "max\n", 0},
		{"garbage", "lots", 0},
		{"zero", "0\n", 0},
		{"v1 without a limit", "9223372036854771712\n", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := cgroupMax(p); got != c.want {
				t.Fatalf("cgroupMax(%q) = %d, want %d", c.content, got, c.want)
			}
		})
	}
	if got := cgroupMax(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("missing file: %d, want 0", got)
	}
}

func TestLimitTakesTheLowest(t *testing.T) {
	cases := []struct {
		name             string
		physical, cgroup int64
		want             int64
	}{
		{"no limits", 8 << 30, 0, 8 << 30},
		{"container limit", 8 << 30, 2 << 30, 2 << 30},
		{"limit above physical", 1 << 30, 2 << 30, 1 << 30},
		{"physical unknown", 0, 2 << 30, 2 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := limit(c.physical, c.cgroup); got != c.want {
				t.Fatalf("limit = %d, want %d", got, c.want)
			}
		})
	}
}

// TestCgroupLimitAt: v2's memory.max, the lowest up the process's path,
// ahead of v1's memory.limit_in_bytes; v1 found under a controller list and
// from a host path a container does not have.
func TestCgroupLimitAt(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, self := filepath.Join(dir, "cg"), filepath.Join(dir, "self")
	write(filepath.Join(root, "memory.max"), "max\n")
	write(filepath.Join(root, "a", "memory.max"), "3000000000\n")
	write(filepath.Join(root, "a", "b", "memory.max"), "max\n")
	write(filepath.Join(root, "memory", "x", "memory.limit_in_bytes"), "9223372036854771712\n") // v1: no limit
	write(filepath.Join(root, "memory", "p", "memory.limit_in_bytes"), "2500000000\n")
	write(filepath.Join(root, "memory", "p", "q", "memory.limit_in_bytes"), "9223372036854771712\n")
	container := filepath.Join(dir, "container") // a container's own cgroup as the root
	write(filepath.Join(container, "memory", "memory.limit_in_bytes"), "2600000000\n")
	cases := []struct {
		name, self, root string
		want             int64
		source           string
	}{
		{"v2 ancestor", "0::/a/b\n", root, 3000000000, "cgroup memory.max"},
		{"v2 without a limit", "0::/\n", root, 0, ""},
		{"v1 without a limit", "4:memory:/x\n", root, 0, ""},
		{"v1 ancestor", "0::/\n4:memory:/p/q\n", root, 2500000000, "cgroup memory.limit_in_bytes"},
		{"v1, controllers shared", "7:cpu,memory:/p/q\n", root, 2500000000, "cgroup memory.limit_in_bytes"},
		{"v1, host path", "4:memory:/kubepods/pod1/c2\n", container, 2600000000, "cgroup memory.limit_in_bytes"},
		{"v2 ahead of v1", "4:memory:/p/q\n0::/a/b\n", root, 3000000000, "cgroup memory.max"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write(self, c.self)
			if n, src := CgroupLimitAt(self, c.root); n != c.want || src != c.source {
				t.Fatalf("got %d from %q, want %d from %q", n, src, c.want, c.source)
			}
		})
	}
	// Headroom: the least of each limited cgroup's limit less its usage,
	// which need not be the lowest limit's.
	write(filepath.Join(root, "a", "memory.current"), "1000000000\n")
	write(filepath.Join(root, "memory.max"), "3500000000\n")
	write(filepath.Join(root, "memory.current"), "2900000000\n")
	write(self, "0::/a/b\n")
	if c := cgroupAt(self, root); c.limit != 3000000000 || c.headroom != 600000000 {
		t.Fatalf("limit %d, headroom %d; want 3000000000 and 600000000 (the root's)", c.limit, c.headroom)
	}
	write(filepath.Join(root, "memory", "p", "memory.usage_in_bytes"), "2600000000\n") // over its limit
	write(self, "4:memory:/p/q\n")
	if c := cgroupAt(self, root); c.limit != 2500000000 || c.headroom != 0 {
		t.Fatalf("v1: limit %d, headroom %d; want 2500000000 and 0", c.limit, c.headroom)
	}
	if n, src := CgroupLimitAt(filepath.Join(dir, "missing"), root); n != 0 || src != "" {
		t.Fatalf("no cgroup file: %d from %q", n, src)
	}
}

func TestLimitIsPlausible(t *testing.T) {
	l := Limit()
	if l == 0 {
		t.Skip("neither physical memory nor a cgroup limit is readable here")
	}
	if l < 64<<20 || l > 1<<50 {
		t.Fatalf("Limit() = %d bytes, not a plausible amount of memory", l)
	}
}
