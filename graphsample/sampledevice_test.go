package graphsample

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// oneByOne is a DeviceSampler for tests, backed by the CPU: it takes
// neighbour sampling without replacement (the GPU engine's share) and
// samples each instance on its own, as a device samples an instance per
// warp, so a dispatch that reaches it shows in its counts and in nothing
// else.
type oneByOne struct {
	*cpu.Engine
	g                *graph.Graph
	calls, instances int
	fail             error
}

var _ DeviceSampler = (*oneByOne)(nil)

func (d *oneByOne) Name() string { return "onebyone" }

func (d *oneByOne) SamplesOnDevice(p SampleParams) bool {
	return p.Kind == NeighborSampling && !p.Replace && p.EdgeBias.Kind != BiasLabel
}

func (d *oneByOne) SampleRangeOnDevice(ctx context.Context, p SampleParams, starts []uint32, first, count int) ([][]SampledEdge, SampleStats, error) {
	d.calls++
	if d.fail != nil {
		return nil, SampleStats{}, d.fail
	}
	s := newSampler(d.g, p)
	out := make([][]SampledEdge, count)
	st := SampleStats{Instances: int64(count)}
	per := p.SeedsPerInstance()
	for k := range out {
		i := first + k
		set := i / p.InstancesPerSeed
		out[k] = s.instance(uint32(i), starts[set*per:(set+1)*per])
		st.Edges += int64(len(out[k]))
		d.instances++
	}
	return out, st, nil
}

// SampleRangeOn hands the device the parameters it takes and samples the
// rest on the CPU; both give SampleRange's samples, and SampleEngine names
// the engine that sampled.
func TestSampleRangeOnDispatchesToTheDevice(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	cpu, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	starts := []uint32{0, 1, 2, 3, 11, 12, 15, 4}
	for _, c := range []struct {
		p      SampleParams
		device bool
	}{
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{3, 2}}, true},
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{1, 4}, EdgeBias: Bias{Kind: BiasEdgeWeight}}, true},
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{3, 2}, Replace: true}, false},
		{SampleParams{Kind: NeighborSampling, Fanouts: []int{2}, EdgeBias: Bias{Kind: BiasLabel, Label: 1}}, false},
		{SampleParams{Kind: LayerSampling, LayerSizes: []int{3, 5}}, false},
		{SampleParams{Kind: FrontierWalk, FrontierSize: 4, Samples: 20}, false},
	} {
		p := c.p
		p.Seed, p.InstancesPerSeed = 99, 5
		want, _, err := Sample(ctx, g, p, starts, 2)
		if err != nil {
			t.Fatal(err)
		}
		dev := &oneByOne{Engine: cpu, g: g}
		wantName := "cpu"
		if c.device {
			wantName = "onebyone"
		}
		if got := SampleEngine(dev, p); got != wantName {
			t.Errorf("%s: SampleEngine = %q, want %q", p, got, wantName)
		}
		if got := SampleEngine(cpu, p); got != "cpu" {
			t.Errorf("%s: SampleEngine(cpu) = %q", p, got)
		}
		if got := SampleEngine(nil, p); got != "cpu" {
			t.Errorf("%s: SampleEngine(nil) = %q", p, got)
		}
		// In waves, as the stage samples a large batch.
		var got [][]SampledEdge
		for lo := 0; lo < len(want); lo += 7 {
			w, st, err := SampleRangeOn(ctx, dev, g, p, starts, lo, min(7, len(want)-lo), 2)
			if err != nil {
				t.Fatal(err)
			}
			if st.Instances != int64(len(w)) {
				t.Fatalf("%s: stats %+v for %d instances", p, st, len(w))
			}
			got = append(got, w...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: SampleRangeOn's samples differ from Sample's", p)
		}
		if c.device && (dev.calls != (len(want)+6)/7 || dev.instances != len(want)) {
			t.Errorf("%s: the device sampled %d instances in %d calls, want all %d", p, dev.instances, dev.calls, len(want))
		}
		if !c.device && dev.calls != 0 {
			t.Errorf("%s: the device was called %d times for parameters it does not take", p, dev.calls)
		}
		// A nil engine is the CPU.
		all, _, err := SampleRangeOn(ctx, nil, g, p, starts, 0, -1, 1)
		if err != nil || !reflect.DeepEqual(all, want) {
			t.Errorf("%s: SampleRangeOn(nil) = %v", p, err)
		}
	}
}

// The device sees only checked arguments, and its errors are the call's.
func TestSampleRangeOnChecksBeforeTheDevice(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	dev := &oneByOne{Engine: nil, fail: errors.New("device lost")}
	p := SampleParams{Kind: NeighborSampling, Fanouts: []int{2}, Seed: 1, InstancesPerSeed: 1}
	for _, bad := range []struct {
		starts       []uint32
		first, count int
	}{{[]uint32{99}, 0, 1}, {[]uint32{1, 2}, 1, 2}, {[]uint32{1}, -1, 1}} {
		if _, _, err := SampleRangeOn(ctx, dev, g, p, bad.starts, bad.first, bad.count, 1); err == nil {
			t.Errorf("starts %v first %d count %d: no error", bad.starts, bad.first, bad.count)
		}
	}
	bp := p
	bp.Fanouts = nil
	if _, _, err := SampleRangeOn(ctx, dev, g, bp, []uint32{1}, 0, 1, 1); !errors.Is(err, walk.ErrInvalidAlgorithm) {
		t.Errorf("no fanouts: %v", err)
	}
	if dev.calls != 0 {
		t.Errorf("the device saw %d invalid calls", dev.calls)
	}
	if _, _, err := SampleRangeOn(ctx, dev, g, p, []uint32{1}, 0, 1, 1); err == nil || err.Error() != "device lost" {
		t.Errorf("device error: %v", err)
	}
}
