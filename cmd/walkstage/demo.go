package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/demo"
)

const demoUsage = `walkstage demo [--dir ./walkstage-demo] [--fresh] [--scale 16] [--engine auto|cpu|gpu] [--timeout 2m] [-v]

Runs the whole stage on this machine with nothing to set up: an in-process
Kafka-protocol broker on a loopback port, a file:// store under --dir, a
generated R-MAT graph, one seed batch per algorithm and one malformed
request. Prints the completion events and where the Parquet files are.
Run again in the same --dir, the stage finds the earlier output and reports
those batches from their manifests without walking them (it says so);
--fresh removes <dir>/walks first.`

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./walkstage-demo", "working folder for the graph and the Parquet output")
	scale := fs.Int("scale", 16, "R-MAT scale of the generated graph (2^scale vertices, 16 edges per vertex)")
	engine := fs.String("engine", "auto", "auto (GPU when built with CUDA and present), cpu or gpu")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	verbose := fs.Bool("v", false, "show the stage's info logs on stderr")
	fresh := fs.Bool("fresh", false, "remove the output of an earlier run in --dir (<dir>/walks) first")
	fs.Usage = cli.SubUsage(fs, demoUsage)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	if *scale < 4 || *scale > 26 {
		return cli.UsageErrorf(fs, "--scale %d out of range [4, 26]", *scale)
	}
	return demo.Run(ctx, demo.Options{Dir: *dir, Scale: *scale, Engine: *engine, Timeout: *timeout,
		Fresh: *fresh, Logs: stderr, Verbose: *verbose, Version: Version}, stdout)
}
