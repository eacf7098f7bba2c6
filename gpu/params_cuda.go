//go:build cuda

package gpu

import (
	_ "embed"
)

// kernelImage is the fatbin of kernels/walk.cu (sm_80 and sm_90 code plus
// compute_90 PTX), built by `make kernels`; it is generated, not committed.
//
//go:embed kernels.fatbin
var kernelImage string
