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

// packImage is the fatbin of kernels/pack.cu, the result-packing kernels,
// a translation unit and module of their own.
//
//go:embed pack.fatbin
var packImage string
