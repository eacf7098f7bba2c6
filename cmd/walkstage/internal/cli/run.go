package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// EngineLogger is how the one-shot commands show the engine's choices
// (fallback to the CPU, table builds) on stderr, in the stage's words.
// WALKSTAGE_LOG_LEVEL, the stage's variable, sets its level here too:
// debug shows where a GPU run's time went, stage by stage.
func EngineLogger(w io.Writer) *slog.Logger {
	return Logger(w, false)
}

// Logger is EngineLogger for a command's --quiet: when quiet, only
// errors, whatever WALKSTAGE_LOG_LEVEL says.
func Logger(w io.Writer, quiet bool) *slog.Logger {
	var lvl slog.Level
	env := os.Getenv("WALKSTAGE_LOG_LEVEL")
	bad := env != "" && lvl.UnmarshalText([]byte(env)) != nil
	if bad {
		lvl = slog.LevelInfo
	}
	if quiet {
		lvl, bad = slog.LevelError, false
	}
	l := slog.New(newPlainHandler(w, lvl))
	if bad {
		l.Warn("WALKSTAGE_LOG_LEVEL is not debug, info, warn or error; logging at info", "value", env)
	}
	return l
}

// StartTrace writes an execution trace of the process into path until the
// returned stop is called; an empty path traces nothing.
func StartTrace(path string) (stop func(), err error) {
	return startRecording(path, trace.Start, trace.Stop)
}

// StartCPUProfile profiles the process into path until the returned stop
// is called; an empty path profiles nothing.
func StartCPUProfile(path string) (stop func(), err error) {
	return startRecording(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// StartMemProfile writes the allocation profile of the whole run into
// path when the returned stop is called (pprof's -sample_index=alloc_space
// shows what fed the collector); an empty path writes nothing.
func StartMemProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// startRecording creates path and starts a runtime recorder writing to it;
// the returned stop ends the recording and closes the file.
func startRecording(path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		end()
		f.Close()
	}, nil
}

// HumanBytes writes n bytes with a binary unit: "512 B", "1.5 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
