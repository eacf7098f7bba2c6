// Package visits holds visit counting: recommendation candidates from
// walks with restart (Pixie's top-k visited vertices, visits.go), the
// host-side counting that runs those walks as ordinary jobs on any
// walk.Engine and tallies their arrivals (visitcount.go, visittable.go),
// and the seam to engines that count on their own device
// (DeviceVisitCounter, DeviceVisitBatcher; the GPU engine implements
// both). It imports graph and walk (the Engine, jobs and chunks, the
// Philox stream); it knows nothing of Kafka, Parquet or CUDA.
package visits

import (
	"context"
	"fmt"

	"github.com/walkstage/walkstage/walk"
)

// invalid is a rejected visit request: it wraps walk.ErrInvalidAlgorithm,
// which callers test to tell a bad request from an engine fault, for walks
// and visits alike.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", walk.ErrInvalidAlgorithm, fmt.Sprintf(format, a...))
}

// DeviceVisitCounter is implemented by engines that count visits
// themselves (the GPU engine: walks and counts on the device, only the
// counts come back). CountVisits hands them its validated parameters
// (MinVisits at least 1) and every query; an engine that cannot count these
// parameters returns handled false and CountVisits counts on the host.
// Either way the results are the same.
type DeviceVisitCounter interface {
	CountVisitsOnDevice(ctx context.Context, p VisitParams, queries []VisitQuery) (res []VisitResult, st VisitStats, handled bool, err error)
}

// DeviceVisitBatcher is implemented by engines that count several calls'
// queries in shared launches (the GPU engine). CountVisitCalls hands them
// its validated calls (MinVisits at least 1); handled[i] says whether call
// i was counted, with the results CountVisits would give it alone.
type DeviceVisitBatcher interface {
	CountVisitCallsOnDevice(ctx context.Context, calls []VisitCall) (res [][]VisitResult, st []VisitStats, handled []bool, err error)
}
