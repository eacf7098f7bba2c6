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

func TestLimitTakesTheLowest(t *testing.T) {
	dir := t.TempDir()
	v2, v1 := filepath.Join(dir, "memory.max"), filepath.Join(dir, "limit_in_bytes")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(v2, "max\n")
	write(v1, "9223372036854771712\n") // v1 without a limit
	cases := []struct {
		name     string
		physical int64
		v2       string
		want     int64
	}{
		{"no limits", 8 << 30, "max\n", 8 << 30},
		{"container limit", 8 << 30, "2147483648\n", 2 << 30},
		{"limit above physical", 1 << 30, "2147483648\n", 1 << 30},
		{"physical unknown", 0, "2147483648\n", 2 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write(v2, c.v2)
			if got := limit(c.physical, v2, v1, filepath.Join(dir, "missing")); got != c.want {
				t.Fatalf("limit = %d, want %d", got, c.want)
			}
		})
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
