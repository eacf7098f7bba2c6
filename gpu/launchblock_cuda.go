//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// ws_launch_block launches f with one parameter passed by value: the
// parameter block at p (its size is the kernel's, which the driver knows).
// cu v0.9.6's Launch copies 8 bytes a parameter, so it cannot.
static CUresult ws_launch_block(CUfunction f, unsigned grid, unsigned block, CUstream s, void *p) {
  void *args[1] = {p};
  return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// launchParams starts fn with p by value, for kernels whose parameter is
// the whole block (the temporal ones: a __grid_constant__ WalkParams,
// which they read from the constant bank where a pointer's fields would be
// held in registers or loaded). The driver copies the block at the launch,
// so p may change after it. p must not be Go memory (cgo's rules; the
// slots' parameter blocks are page-locked C memory).
func launchParams(fn cu.Function, grid, block int, s cu.Stream, p *walkParams) error {
	// cu.Function and cu.Stream each hold one C handle (as device_cuda.go's
	// module unload relies on for cu.Module).
	f := *(*C.CUfunction)(unsafe.Pointer(&fn))
	st := *(*C.CUstream)(unsafe.Pointer(&s))
	if r := C.ws_launch_block(f, C.uint(grid), C.uint(block), st, unsafe.Pointer(p)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuLaunchKernel: CUresult %d", int(r))
	}
	return nil
}
