package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/walkstage/walkstage/gpu"
)

// gpuProbeCmd exits 0 when this binary can run the GPU engine here: built
// with CUDA, the driver initialised (or the process would not have
// started), and device 0 takes a context and a memory round trip. The GPU
// image's entrypoint (cmd/walkstage-entrypoint) runs it to pick the CUDA or
// the CPU build.
func gpuProbeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return errors.New("gpu-probe takes no arguments")
	}
	if err := gpu.Probe(0); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "gpu: device 0 usable")
	return nil
}
