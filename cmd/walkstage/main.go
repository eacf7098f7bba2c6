// Command walkstage turns Kafka seed batches into random walks (see README).
// This package only parses flags and calls into the library packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"graph":     {"generate, import or describe a graph file", graphCmd},
		"walk":      {"walk a graph once and write Parquet to object storage", walkCmd},
		"bench":     {"measure walk throughput on a generated or given graph", benchCmd},
		"run":       {"run the Kafka-driven stage, configured from WALKSTAGE_* variables", runCmd},
		"demo":      {"run the stage end to end on an embedded broker and a local store", demoCmd},
		"load":      {"measure a running stage from a request backlog or one request at a time", loadCmd},
		"output":    {"list the committed parts of an output, or remove parts no manifest lists", outputCmd},
		"gpu-probe": {"exit 0 when this binary can run the GPU engine here", gpuProbeCmd},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	memoryLimit.bytes, memoryLimit.note = applyMemoryLimit()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) >= 2 && args[0] == "help" {
		// "walkstage help run" is "walkstage run -h"; "help graph import"
		// is "graph import -h".
		args = append(args[1:len(args):len(args)], "-h")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "walkstage", Version)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "walkstage: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// The flag set has printed the help that -h asked for.
			return 0
		}
		fmt.Fprintf(stderr, "walkstage %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: walkstage <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "  version   print the version\n\nRun 'walkstage <command> -h' or 'walkstage help <command>' for a command's flags.")
}

// engineLogger is how the one-shot commands show the engine's choices
// (fallback to the CPU, table builds) on stderr, in the stage's words.
// WALKSTAGE_LOG_LEVEL, the stage's variable, sets its level here too:
// debug shows where a GPU run's time went, stage by stage.
func engineLogger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	env := os.Getenv("WALKSTAGE_LOG_LEVEL")
	bad := env != "" && lvl.UnmarshalText([]byte(env)) != nil
	if bad {
		lvl = slog.LevelInfo
	}
	l := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
	if bad {
		l.Warn("WALKSTAGE_LOG_LEVEL is not debug, info, warn or error; logging at info", "value", env)
	}
	return l
}

// startTrace writes an execution trace of the process into path until the
// returned stop is called; an empty path traces nothing.
func startTrace(path string) (stop func(), err error) {
	return startRecording(path, trace.Start, trace.Stop)
}

// startCPUProfile profiles the process into path until the returned stop
// is called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	return startRecording(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
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
