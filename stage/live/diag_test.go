package live

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The applier reports a second in which a publication came behindLog or
// more after its oldest record, with where its time went, and stays quiet
// otherwise; each report starts the next window.
func TestApplierReportsPublicationsBehind(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	for _, c := range []struct {
		name   string
		after  time.Duration // since the window's start
		behind time.Duration
		want   bool
	}{
		{"behind, a second on", time.Second, behindLog, true},
		{"behind, too soon", behindEvery / 2, 2 * behindLog, false},
		{"not behind", 2 * time.Second, behindLog - time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, nil))
			w := newApplierWindow(t0)
			w.updates, w.records, w.apply, w.publish, w.publishes, w.behind = 4096, 1, 300*time.Millisecond, 200*time.Millisecond, 3, c.behind
			w.report(log, t0.Add(c.after), "catch_up")
			got := strings.Contains(out.String(), "publication behind its records")
			if got != c.want {
				t.Fatalf("logged %v, want %v: %q", got, c.want, out.String())
			}
			if got {
				for _, kv := range []string{"updates=4096", "apply=0.3", "publish=0.2", "publishes=3", "compaction=catch_up", "gc_cycles="} {
					if !strings.Contains(out.String(), kv) {
						t.Errorf("the report lacks %s: %q", kv, out.String())
					}
				}
			}
			reset := w.start.Equal(t0.Add(c.after)) && w.updates == 0 && w.behind == 0
			if reset != (c.after >= behindEvery) {
				t.Errorf("window reset %v after %v", reset, c.after)
			}
		})
	}
}
