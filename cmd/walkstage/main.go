// Command walkstage turns Kafka seed batches into random walks (see README).
// This package holds the command table and the commands that run or drive
// the stage (run, demo, load, gpu-probe, version); each other family of
// commands is a package under internal/ (graphcmd, walkcmd, benchcmd,
// outputcmd), and internal/cli the plumbing they share. None of them
// walks, encodes or consumes anything itself: they parse flags and call
// into the library packages.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/benchcmd"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/graphcmd"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/outputcmd"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/walkcmd"
)

func commands() map[string]cli.Command {
	return map[string]cli.Command{
		"graph":     {Summary: "generate, import or describe a graph file", Usage: graphcmd.Usage, Subs: graphcmd.Commands()},
		"walk":      {Summary: "walk a graph once and write Parquet to object storage", Run: walkcmd.Command(Version)},
		"bench":     {Summary: "measure walk throughput on a generated or given graph", Run: benchcmd.Run},
		"run":       {Summary: "run the Kafka-driven stage, configured from WALKSTAGE_* variables", Run: runCmd},
		"demo":      {Summary: "run the stage end to end on an embedded broker and a local store", Run: demoCmd},
		"load":      {Summary: "measure a running stage from a request backlog or one request at a time", Run: loadCmd},
		"output":    {Summary: "list the committed parts of an output, or remove parts no manifest lists", Usage: outputcmd.Usage, Subs: outputcmd.Commands()},
		"gpu-probe": {Summary: "exit 0 when this binary can run the GPU engine here", Run: gpuProbeCmd},
		"version":   {Summary: "print the version", Run: versionCmd},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	memoryLimit.bytes, memoryLimit.note = applyMemoryLimit()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command line and returns the process exit code: 0, 1 for
// a failure, 2 for a mistake in the command line (internal/cli).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, commands(), args, stdout, stderr)
}

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func versionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = cli.SubUsage(fs, "walkstage version [--json]")
	var rf cli.ResultFlags
	rf.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	w, _ := rf.Writers(stdout, stderr)
	fmt.Fprintln(w, "walkstage", Version)
	return rf.Print(stdout, map[string]string{"version": Version})
}
