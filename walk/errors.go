package walk

import "errors"

// The errors callers branch on, wrapped with context by the functions that
// return them: test with errors.Is.

// ErrInvalidAlgorithm is wrapped by every parameter validation failure, so
// callers can tell a rejected request from an engine fault.
var ErrInvalidAlgorithm = errors.New("invalid walk parameters")

// ErrEngineBroken marks an engine error after which the engine cannot be
// trusted to run again (a sticky CUDA error, a lost device). The stage
// reports itself not ready and stops taking work rather than retry into it;
// any other error from Run is an infrastructure error the stage retries.
var ErrEngineBroken = errors.New("engine unusable")
