package gpu

import (
	"errors"
	"fmt"

	"github.com/walkstage/walkstage/walk"
)

// errTemporalPlaced refuses a temporal job on an engine that does not hold
// the whole graph: the temporal kernels read every edge array from device
// memory.
var errTemporalPlaced = errors.New("temporal walks on the GPU need the whole graph in device memory (no placement plan, no stripes); use the CPU engine or a larger device")

// temporalSupported says why the GPU engine cannot run temporal algorithm
// a (nil when it can); whole says the whole graph is on the device. The
// errors wrap walk.ErrInvalidAlgorithm, as a request this engine cannot
// serve.
func temporalSupported(a walk.Algorithm, whole bool) error {
	switch {
	case a.Kind != walk.Temporal:
		return nil
	case !whole:
		return fmt.Errorf("%w: %w", walk.ErrInvalidAlgorithm, errTemporalPlaced)
	}
	return nil
}

// coarseSpacing is walk.CoarseSpacing (kernels/temporal.cuh's kCoarse).
const coarseSpacing = walk.CoarseSpacing
