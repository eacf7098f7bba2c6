// Package graphsample holds C-SAW graph sampling (Pandey et al., SC'20):
// the sampling algorithms (neighbour, layer, forest fire, snowball, the
// frontier walk) and their parameters and validation (sample.go), the CPU
// sampler that defines every instance's edges (sampleinstance.go), C-SAW's
// Select of k candidates by bias with its Philox keys (select.go), the
// seam to engines that sample on their own device (DeviceSampler,
// SampleRangeOn; the GPU engine implements it), and Columns, the form a
// wave of samples travels in from an engine to the writer (ColumnSampler,
// SampleColumnsOn; columns.go).
//
// "Sampling" here means drawing a subgraph around seeds; the per-step
// transition choice of a random walk (alias, rejection, ZPRS) is walk's
// stepper. It imports graph, and walk for the Philox stream, the
// multiply-high index and the Engine interface a device sampler extends;
// it knows nothing of Kafka, Parquet or CUDA.
package graphsample

import (
	"fmt"

	"github.com/walkstage/walkstage/walk"
)

// invalid is a rejected sampling request: it wraps walk.ErrInvalidAlgorithm,
// which callers test to tell a bad request from an engine fault, for walks
// and samples alike.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", walk.ErrInvalidAlgorithm, fmt.Sprintf(format, a...))
}
