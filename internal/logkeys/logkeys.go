// Package logkeys holds what every walkstage logger agrees on beyond slog:
// how a duration is written. Events and metrics give durations in seconds
// (timings.total_seconds, walkstage_*_seconds), so the logs do too, and a
// reader never has to guess whether 98849695 is nanoseconds.
//
// It knows nothing of the stage or the commands that use it.
package logkeys

import (
	"log/slog"
	"strings"
)

// Seconds is a slog.HandlerOptions.ReplaceAttr that writes a
// time.Duration value as float seconds under its key with "_seconds"
// added ("duration" -> "duration_seconds":0.0988). Log calls pass
// seconds themselves under _seconds keys; this catches any that still pass
// a time.Duration, so no line shows slog's integer nanoseconds.
func Seconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_seconds") {
		key += "_seconds"
	}
	return slog.Float64(key, a.Value.Duration().Seconds())
}
