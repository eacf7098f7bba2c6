package source

import (
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// onceLogger logs the reader's errors once per kind and window instead of
// on every retry: a broker outage should say so once, with context, not
// fill the log with the same line per partition and poll. Idle long polls
// that end in a read timeout are not errors and go to debug.
type onceLogger struct {
	l      *slog.Logger
	window time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
}

func newOnceLogger(log *slog.Logger, window time.Duration) *onceLogger {
	return &onceLogger{l: log, window: window, last: map[string]time.Time{}}
}

// digits folds partition numbers and offsets, so one kind of error is one key.
var digits = regexp.MustCompile(`[0-9]+`)

func (o *onceLogger) print(msg string) {
	if strings.Contains(msg, "i/o timeout") && strings.Contains(msg, "reading partition") {
		o.l.Debug(msg)
		return
	}
	key := digits.ReplaceAllString(msg, "#")
	now := time.Now()
	o.mu.Lock()
	fresh := now.Sub(o.last[key]) >= o.window
	if fresh {
		o.last[key] = now
	}
	o.mu.Unlock()
	if !fresh {
		o.l.Debug(msg)
		return
	}
	o.l.Warn(msg, "repeats_suppressed_for_seconds", o.window.Seconds())
}
