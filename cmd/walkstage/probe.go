package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/gpu"
)

// gpuProbeCmd exits 0 when this binary can run the GPU engine here: built
// with CUDA, the driver initialised (or the process would not have
// started), and device 0 takes a context and a memory round trip. The GPU
// image's entrypoint (cmd/walkstage-entrypoint) runs it to pick the CUDA or
// the CPU build.
func gpuProbeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gpu-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage gpu-probe

Exits 0 and prints "gpu: device 0 usable" when this binary was built with
CUDA and device 0 takes a context and a memory round trip; exits 1 naming
what failed otherwise. The GPU image's entrypoint runs it to pick the CUDA
or the CPU build. --json prints {"device":0,"usable":true} instead.`)
	var rf cli.ResultFlags
	rf.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "takes no arguments, got %q", fs.Arg(0))
	}
	if err := gpu.Probe(0); err != nil {
		return err
	}
	w, _ := rf.Writers(stdout, stderr)
	fmt.Fprintln(w, "gpu: device 0 usable")
	return rf.Print(stdout, probeResult{Device: 0, Usable: true})
}

// probeResult is gpu-probe's --json line. A device that is not usable is
// an error (exit 1), so usable is always true; it is there so the line
// says what it means.
type probeResult struct {
	Device int  `json:"device"`
	Usable bool `json:"usable"`
}
