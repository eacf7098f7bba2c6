package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/stage"
	"github.com/walkstage/walkstage/stage/config"
)

const runUsage = `walkstage run [--check] [--cpuprofile FILE] [--memprofile FILE] [--trace FILE]

Runs the Kafka-driven stage until SIGTERM or SIGINT, configured only from
WALKSTAGE_* environment variables (below; docs/reference/messages.md has the message
formats). Logs go to stderr. When GOMEMLIMIT is not set, the soft memory
limit is 90% of the container's memory limit (or of physical memory); with
a live graph (WALKSTAGE_EDGE_TOPIC) and no GOGC, GOGC is 400 under it.`

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "validate the configuration, print it (secrets masked) and exit")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE` (written at exit)")
	memProfile := fs.String("memprofile", "", "write the allocation profile of the whole run to `FILE` (written at exit; -sample_index=alloc_space shows what feeds the collector)")
	traceFile := fs.String("trace", "", "write an execution trace of the whole run to `FILE` ('go tool trace'; -pprof=sync or sched of it shows where goroutines wait)")
	fs.Usage = func() {
		cli.SubUsage(fs, runUsage)()
		fmt.Fprint(fs.Output(), "\nvariables:\n")
		config.WriteReference(fs.Output())
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q (the stage is configured from WALKSTAGE_* variables)", fs.Arg(0))
	}
	if *check {
		c, err := config.Load(nil)
		if err != nil {
			return err
		}
		for _, v := range config.Describe(c) {
			fmt.Fprintf(stdout, "%s=%s\n", v.Name, v.Value)
		}
		return nil
	}
	if c, err := config.Load(nil); err == nil {
		// stage.Main reports a bad configuration itself.
		log := config.NewLogger(c, os.Stderr)
		log.Info("memory limit", "gomemlimit_bytes", memoryLimit.bytes, "source", memoryLimit.note)
		gogc, note := applyGCPercent(c.EdgeTopic != "")
		log.Info("collector target", "gogc", gogc, "source", note)
	}
	stop, err := cli.StartCPUProfile(*cpuProfile)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer stop()
	stopMem, err := cli.StartMemProfile(*memProfile)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	defer func() {
		if merr := stopMem(); merr != nil && err == nil {
			err = fmt.Errorf("memory profile: %w", merr)
		}
	}()
	stopTrace, err := cli.StartTrace(*traceFile)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer stopTrace()
	return stage.Main(ctx, nil, os.Stderr, Version)
}
