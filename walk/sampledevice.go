package walk

import (
	"context"

	"github.com/walkstage/walkstage/graph"
)

// deviceSampler is e as a DeviceSampler when it samples p on its device.
func deviceSampler(e Engine, p SampleParams) (DeviceSampler, bool) {
	ds, ok := e.(DeviceSampler)
	if !ok || !ds.SamplesOnDevice(p) {
		return nil, false
	}
	return ds, true
}

// SampleEngine is the name of the engine SampleRangeOn samples p with on e
// (e.Name() when e samples p on its device, else "cpu"; e may be nil): what
// a sample's manifest and completion event record.
func SampleEngine(e Engine, p SampleParams) string {
	if _, ok := deviceSampler(e, p); ok {
		return e.Name()
	}
	return "cpu"
}

// SampleRangeOn is SampleRange on e's device when e is a DeviceSampler
// that takes p, else on the CPU with workers goroutines (0: GOMAXPROCS).
// e may be nil (the CPU).
func SampleRangeOn(ctx context.Context, e Engine, g *graph.Graph, p SampleParams, starts []uint32, first, count, workers int) ([][]SampledEdge, SampleStats, error) {
	count, err := checkSampleRange(g, p, starts, first, count)
	if err != nil {
		return nil, SampleStats{}, err
	}
	if ds, ok := deviceSampler(e, p); ok {
		return ds.SampleRangeOnDevice(ctx, p, starts, first, count)
	}
	return sampleRange(ctx, g, p, starts, first, count, workers)
}
