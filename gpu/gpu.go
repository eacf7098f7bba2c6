// Package gpu is walkstage's CUDA engine: it uploads the graph and its
// sampling tables once and runs the FlowWalker-style persistent kernels of
// kernels/ behind the walk.Engine interface. Only files built with the
// "cuda" tag import gorgonia.org/cu; a default build has this package's
// errors and options and reports the engine as unavailable.
package gpu

import "errors"

// ErrUnavailable is returned by New when the engine cannot run here: built
// without the cuda tag, or no usable device.
var ErrUnavailable = errors.New("gpu engine unavailable")
