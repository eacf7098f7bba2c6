package ooc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHostMemoryOrder: the variable wins, then the cgroup v2 limit (the
// lowest up the process's path), then the cgroup v1 limit, then
// MemAvailable; a bad variable is an error, not "no limit".
func TestHostMemoryOrder(t *testing.T) {
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
	root := filepath.Join(dir, "cg")
	self := filepath.Join(dir, "self")
	meminfo := filepath.Join(dir, "meminfo")
	write(meminfo, "MemTotal:       24000000 kB\nMemAvailable:    2000000 kB\n")
	write(filepath.Join(root, "memory.max"), "max\n")
	write(filepath.Join(root, "a", "memory.max"), "3000000000\n")
	write(filepath.Join(root, "a", "b", "memory.max"), "max\n")
	// cgroup v1 (sysmem's tests cover the cases): "no limit" is the
	// largest page-aligned int64.
	write(filepath.Join(root, "memory", "x", "memory.limit_in_bytes"), "9223372036854771712\n")
	write(filepath.Join(root, "memory", "p", "memory.limit_in_bytes"), "2500000000\n")
	write(filepath.Join(root, "memory", "p", "q", "memory.limit_in_bytes"), "9223372036854771712\n")
	cases := []struct {
		name, env, self string
		want            Budget
		err             bool
	}{
		{"variable", "123456", "0::/a/b\n", Budget{123456, EnvHostMemoryLimit}, false},
		{"bad variable", "1GiB", "0::/a/b\n", Budget{}, true},
		{"cgroup ancestor", "", "0::/a/b\n", Budget{3000000000, "cgroup memory.max"}, false},
		{"no cgroup limit", "", "0::/\n", Budget{2000000 << 10, "MemAvailable"}, false},
		{"cgroup v1 without a limit", "", "4:memory:/x\n", Budget{2000000 << 10, "MemAvailable"}, false},
		{"cgroup v1 ancestor", "", "0::/\n4:memory:/p/q\n", Budget{2500000000, "cgroup memory.limit_in_bytes"}, false},
		{"cgroup v2 ahead of v1", "", "4:memory:/p/q\n0::/a/b\n", Budget{3000000000, "cgroup memory.max"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write(self, c.self)
			got, err := hostMemory(c.env, self, root, meminfo)
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("got %+v, %v; want %+v (error %v)", got, err, c.want, c.err)
			}
		})
	}
	if b, err := hostMemory("", filepath.Join(dir, "missing"), root, filepath.Join(dir, "missing")); err != nil || b.Bytes != 0 {
		t.Fatalf("no source at all: %+v, %v; want an unknown budget", b, err)
	}
}
