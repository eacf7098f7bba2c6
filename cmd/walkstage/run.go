package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/walkstage/walkstage/stage"
)

const runUsage = `usage: walkstage run [--check]

Runs the Kafka-driven stage until SIGTERM or SIGINT, configured only from
WALKSTAGE_* environment variables (see docs/messages.md for the message
formats and stage/config.go for every variable). Logs go to stderr.

  --check   validate the configuration, print it (secrets masked) and exit

Variables (default in brackets):
`

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "validate the configuration and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, runUsage)
		for _, v := range stage.Variables() {
			fmt.Fprintf(stderr, "  %-40s [%s]\n", v.Name, v.Default)
		}
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *check {
		c, err := stage.LoadConfig(nil)
		if err != nil {
			return err
		}
		for _, v := range stage.Describe(c) {
			fmt.Fprintf(stdout, "%s=%s\n", v.Name, v.Value)
		}
		return nil
	}
	return stage.Main(ctx, nil, os.Stderr, Version)
}
