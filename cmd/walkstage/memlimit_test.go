package main

import (
	"math"
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

func TestDefaultGCPercent(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		gogc  string
		limit int64
		live  bool
		want  int
	}{
		{"", 9 * gib, true, liveGCPercent}, // a live graph under a soft limit
		{"", 9 * gib, false, 0},            // no live graph: the runtime's default
		{"200", 9 * gib, true, 0},          // GOGC wins
		{"off", 9 * gib, true, 0},
		{"", math.MaxInt64, true, 0}, // no soft limit would bound the larger heap
		{"", 0, true, 0},
	} {
		if got := defaultGCPercent(c.gogc, c.limit, c.live); got != c.want {
			t.Errorf("defaultGCPercent(%q, %d, %v) = %d, want %d", c.gogc, c.limit, c.live, got, c.want)
		}
	}
}

// A stage with a live graph runs the collector at liveGCPercent under the
// soft memory limit unless GOGC says otherwise; one without keeps the
// runtime's target.
func TestApplyGCPercent(t *testing.T) {
	limit := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(limit)
	before := debug.SetGCPercent(-1)
	debug.SetGCPercent(before)
	defer debug.SetGCPercent(before)

	debug.SetMemoryLimit(1 << 30)
	t.Setenv("GOGC", "")
	if n, note := applyGCPercent(false); n != before || debug.SetGCPercent(before) != before {
		t.Fatalf("without a live graph: GOGC %d (%s), want %d", n, note, before)
	}
	n, note := applyGCPercent(true)
	if got := debug.SetGCPercent(before); n != liveGCPercent || got != liveGCPercent || !strings.Contains(note, "GOGC=400") {
		t.Fatalf("live graph: GOGC %d in force, %d reported (%s), want %d", got, n, note, liveGCPercent)
	}
	t.Setenv("GOGC", "150")
	if n, note := applyGCPercent(true); n != before || !strings.Contains(note, "GOGC from the environment") {
		t.Fatalf("GOGC set: %d (%s)", n, note)
	}
	t.Setenv("GOGC", "")
	debug.SetMemoryLimit(math.MaxInt64)
	if n, _ := applyGCPercent(true); n != before {
		t.Fatalf("no soft limit: GOGC %d, want %d", n, before)
	}
}
