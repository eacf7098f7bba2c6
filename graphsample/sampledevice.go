package graphsample

import (
	"context"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// DeviceSampler is implemented by engines that run some samplers on their
// own device (the GPU engine: neighbour sampling without replacement, layer
// sampling, forest fire, snowball and the frontier walk, unbiased or by
// edge weight, with the whole graph in device memory).
// SampleRangeOn hands them the requests they take and samples the rest on
// the CPU; either way the samples are SampleRange's, edge for edge.
type DeviceSampler interface {
	// SamplesOnDevice reports whether SampleRangeOnDevice takes p (valid
	// for the engine's graph). The answer depends on p and on how the
	// engine was built only, so a caller can name the engine in its
	// output's metadata before it samples.
	SamplesOnDevice(p SampleParams) bool
	// SampleRangeOnDevice is SampleRange for instances first ..
	// first+count-1 of p over starts, on the device; SampleRangeOn has
	// checked its arguments as SampleRange does.
	SampleRangeOnDevice(ctx context.Context, p SampleParams, starts []uint32, first, count int) ([][]SampledEdge, SampleStats, error)
}

// deviceSampler is e as a DeviceSampler when it samples p on its device.
func deviceSampler(e walk.Engine, p SampleParams) (DeviceSampler, bool) {
	ds, ok := e.(DeviceSampler)
	if !ok || !ds.SamplesOnDevice(p) {
		return nil, false
	}
	return ds, true
}

// SampleEngine is the name of the engine SampleRangeOn samples p with on e
// (e.Name() when e samples p on its device, else "cpu"; e may be nil): what
// a sample's manifest and completion event record.
func SampleEngine(e walk.Engine, p SampleParams) string {
	if _, ok := deviceSampler(e, p); ok {
		return e.Name()
	}
	return "cpu"
}

// SampleRangeOn is SampleRange on e's device when e is a DeviceSampler
// that takes p, else on the CPU with workers goroutines (0: GOMAXPROCS).
// e may be nil (the CPU).
func SampleRangeOn(ctx context.Context, e walk.Engine, g *graph.Graph, p SampleParams, starts []uint32, first, count, workers int) ([][]SampledEdge, SampleStats, error) {
	count, err := checkSampleRange(g, p, starts, first, count)
	if err != nil {
		return nil, SampleStats{}, err
	}
	if ds, ok := deviceSampler(e, p); ok {
		return ds.SampleRangeOnDevice(ctx, p, starts, first, count)
	}
	return sampleRange(ctx, g, p, starts, first, count, workers)
}
