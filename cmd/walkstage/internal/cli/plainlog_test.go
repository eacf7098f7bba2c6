package cli

import (
	"bytes"
	"log/slog"
	"testing"
	"time"
)

// The commands' log lines read like their other stderr lines: no time or
// level=INFO fields, a "warning: " or "error: " prefix where it matters,
// attributes in brackets with durations in seconds, groups and With
// attributes flattened, debug lines only at debug.
func TestPlainLogLines(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(newPlainHandler(&b, slog.LevelInfo))
	l.Info("GPU engine unavailable, using the CPU engine", "reason", "built without the cuda tag")
	l.Warn("slow", "took", 1500*time.Millisecond)
	l.With("batch", "b1").WithGroup("g").Error("failed", "n", 3)
	l.Debug("hidden")
	l.Info("plain")
	want := `GPU engine unavailable, using the CPU engine (reason="built without the cuda tag")
warning: slow (took_seconds=1.5)
error: failed (batch=b1, g.n=3)
plain
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	slog.New(newPlainHandler(&b, slog.LevelDebug)).Debug("shown", "k", "")
	if b.String() != "debug: shown (k=\"\")\n" {
		t.Errorf("debug line %q", b.String())
	}
}
