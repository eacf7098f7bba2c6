//go:build cuda

package gpu

import (
	"testing"

	"gorgonia.org/cu"
)

// TestKernelBlocksMatchLaunchBounds reads each compiled kernel's maximum
// threads per block: a kernel declaring __launch_bounds__ must have exactly
// the block size the Go side launches it with, and the others must allow
// theirs. A constant changed on one side only fails here, not as a launch
// error (or a silent register cap) in production.
func TestKernelBlocksMatchLaunchBounds(t *testing.T) {
	e := newEngine(t, testGraph(t))
	err := e.dev.do(func() error {
		for _, k := range kernelBlocks() {
			fn, err := e.kernel(k.name)
			if err != nil {
				t.Errorf("kernel %s: %v", k.name, err)
				continue
			}
			max, err := fn.Attribute(cu.FnMaxThreadsPerBlock)
			if err != nil {
				t.Errorf("kernel %s: max threads per block: %v", k.name, err)
				continue
			}
			switch {
			case k.bounded && max != k.threads:
				t.Errorf("kernel %s: compiled for at most %d threads a block, launched with %d", k.name, max, k.threads)
			case !k.bounded && max < k.threads:
				t.Errorf("kernel %s: allows %d threads a block, launched with %d", k.name, max, k.threads)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
