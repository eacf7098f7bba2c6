package logkeys

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A duration reaches the line as float seconds under a _seconds key, in
// both of the stage's formats and inside a group; other values pass.
func TestSecondsReplacesDurations(t *testing.T) {
	var js, text bytes.Buffer
	ho := &slog.HandlerOptions{ReplaceAttr: Seconds}
	for _, l := range []*slog.Logger{slog.New(slog.NewJSONHandler(&js, ho)), slog.New(slog.NewTextHandler(&text, ho))} {
		l.Info("batch succeeded", "duration", 98849695*time.Nanosecond, "commit_seconds", 1500*time.Millisecond,
			"walks", 10, slog.Group("phase", "wait", 2*time.Second))
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"duration_seconds": 0.098849695, "commit_seconds": 1.5, "walks": 10.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v in %s", k, m[k], want, js.String())
		}
	}
	if g, _ := m["phase"].(map[string]any); g["wait_seconds"] != 2.0 {
		t.Errorf("group member: %s", js.String())
	}
	if _, ok := m["duration"]; ok {
		t.Errorf("the nanosecond key is still there: %s", js.String())
	}
	if !strings.Contains(text.String(), "duration_seconds=0.098849695") {
		t.Errorf("text format: %s", text.String())
	}
}
