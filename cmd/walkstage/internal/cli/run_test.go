package cli

import (
	"bytes"
	"strings"
	"testing"
)

// The one-shot commands' engine logger takes the stage's
// WALKSTAGE_LOG_LEVEL: debug lines appear only when asked for, and a
// value it cannot read is said, not silently dropped.
func TestEngineLoggerLevel(t *testing.T) {
	cases := []struct {
		env       string
		wantDebug bool
		wantWarn  bool
	}{
		{"", false, false},
		{"info", false, false},
		{"debug", true, false},
		{"DEBUG", true, false},
		{"loud", false, true},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv("WALKSTAGE_LOG_LEVEL", c.env)
			var buf bytes.Buffer
			EngineLogger(&buf).Debug("stage times")
			out := buf.String()
			if got := strings.Contains(out, "stage times"); got != c.wantDebug {
				t.Errorf("debug line shown = %v, want %v:\n%s", got, c.wantDebug, out)
			}
			if got := strings.Contains(out, "WALKSTAGE_LOG_LEVEL"); got != c.wantWarn {
				t.Errorf("warning shown = %v, want %v:\n%s", got, c.wantWarn, out)
			}
		})
	}
}
