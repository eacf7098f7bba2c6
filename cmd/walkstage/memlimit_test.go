package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/internal/sysmem"
)

func TestDefaultMemoryLimit(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		env   string
		limit int64
		want  int64
	}{
		{"", 10 * gib, 9 * gib}, // 90% of the container's limit
		{"", 1000, 900},
		{"256MiB", 10 * gib, 0}, // GOMEMLIMIT wins: leave the runtime alone
		{"off", 10 * gib, 0},
		{"", 0, 0}, // no limit known
	} {
		if got := defaultMemoryLimit(c.env, c.limit); got != c.want {
			t.Errorf("defaultMemoryLimit(%q, %d) = %d, want %d", c.env, c.limit, got, c.want)
		}
	}
}

// Without GOMEMLIMIT the process runs under a soft limit derived from the
// memory it may use; with it, the runtime's own reading stands.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)

	t.Setenv("GOMEMLIMIT", "")
	n, note := applyMemoryLimit()
	if want := defaultMemoryLimit("", sysmem.Limit()); n != want || want == 0 {
		t.Fatalf("limit %d (%s), want %d", n, note, want)
	}
	if got := debug.SetMemoryLimit(-1); got != n {
		t.Fatalf("runtime limit %d, want %d", got, n)
	}
	if !strings.Contains(note, "90%") {
		t.Fatalf("note %q", note)
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "256MiB")
	if n, note := applyMemoryLimit(); n != before || !strings.Contains(note, "GOMEMLIMIT") {
		t.Fatalf("with GOMEMLIMIT set: %d %q", n, note)
	}
}
