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

func TestLimitIsPlausible(t *testing.T) {
	l := Limit()
	if l == 0 {
		t.Skip("neither physical memory nor a cgroup limit is readable here")
	}
	if l < 64<<20 || l > 1<<50 {
		t.Fatalf("Limit() = %d bytes, not a plausible amount of memory", l)
	}
}
