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
	"strings"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name. A
// group of subcommands ("graph import") has subs and its help in usage
// instead of run.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	usage   string
	subs    map[string]command
}

func commands() map[string]command {
	return map[string]command{
		"graph":     {summary: "generate, import or describe a graph file", usage: graphUsage + graphCatalogUsage, subs: graphCommands()},
		"walk":      {summary: "walk a graph once and write Parquet to object storage", run: walkCmd},
		"bench":     {summary: "measure walk throughput on a generated or given graph", run: benchCmd},
		"run":       {summary: "run the Kafka-driven stage, configured from WALKSTAGE_* variables", run: runCmd},
		"demo":      {summary: "run the stage end to end on an embedded broker and a local store", run: demoCmd},
		"load":      {summary: "measure a running stage from a request backlog or one request at a time", run: loadCmd},
		"output":    {summary: "list the committed parts of an output, or remove parts no manifest lists", usage: outputUsage, subs: outputCommands()},
		"gpu-probe": {summary: "exit 0 when this binary can run the GPU engine here", run: gpuProbeCmd},
		"version":   {summary: "print the version", run: versionCmd},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	memoryLimit.bytes, memoryLimit.note = applyMemoryLimit()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command line and returns the process exit code: 0, 1 for
// a failure, 2 for a mistake in the command line (cli.go).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) >= 2 && args[0] == "help" {
		// "walkstage help run" is "walkstage run -h"; "help graph import"
		// is "graph import -h".
		args = append(args[1:len(args):len(args)], "-h")
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "walkstage: missing command (see walkstage -h)")
		return 2
	}
	if isHelpArg(args[0]) {
		usage(stdout, cmds)
		return 0
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	c, ok := cmds[args[0]]
	if !ok {
		what := fmt.Sprintf("command %q", args[0])
		if strings.HasPrefix(args[0], "-") {
			what = "flag " + args[0] + ": the command comes first"
		}
		fmt.Fprintf(stderr, "walkstage: unknown %s (see walkstage -h)\n", what)
		return 2
	}
	err := dispatch(ctx, args[0], c, args[1:], stdout, stderr)
	var help *helpRequest
	var bad *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		help.fs.SetOutput(stdout)
		help.fs.Usage()
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // printed by the command itself
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "walkstage %s: %s (see walkstage %s -h)\n", bad.cmd, bad.msg, bad.cmd)
		return 2
	}
	fmt.Fprintf(stderr, "walkstage %s: %v\n", args[0], err)
	return 1
}

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func versionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = subUsage(fs, "walkstage version [--json]")
	var rf resultFlags
	rf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	w, _ := rf.writers(stdout, stderr)
	fmt.Fprintln(w, "walkstage", Version)
	return rf.print(stdout, map[string]string{"version": Version})
}

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
	fmt.Fprintln(w, "\nRun 'walkstage <command> -h' or 'walkstage help <command>' for a command's flags.")
}

// engineLogger is how the one-shot commands show the engine's choices
// (fallback to the CPU, table builds) on stderr, in the stage's words.
// WALKSTAGE_LOG_LEVEL, the stage's variable, sets its level here too:
// debug shows where a GPU run's time went, stage by stage.
func engineLogger(w io.Writer) *slog.Logger {
	return cmdLogger(w, false)
}

// cmdLogger is engineLogger for a command's --quiet: when quiet, only
// errors, whatever WALKSTAGE_LOG_LEVEL says.
func cmdLogger(w io.Writer, quiet bool) *slog.Logger {
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
