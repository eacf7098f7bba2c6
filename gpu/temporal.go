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

// errTemporalNode2VecDelta refuses temporal Node2Vec on a live graph's
// delta: the timed lists' kernel (overlaytemporal.cuh) draws no Node2Vec
// factor, and a plain temporal step would be a different walk.
var errTemporalNode2VecDelta = errors.New("temporal Node2Vec on a live graph's delta runs on the CPU engine only so far")

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
