//go:build cuda

package gpu

import (
	"fmt"
	"testing"

	"github.com/walkstage/walkstage/graphsample"

	"github.com/walkstage/walkstage/walk"
)

// placementCases are the algorithms and samplers checked under a plan: the
// O(1) samplers of every mode, the Node2Vec fallback, the label tables and
// the reservoir samplers (warp and block) with their dynamic biases.
var placementCases = []struct {
	name string
	alg  walk.Algorithm
}{
	{"deepwalk-uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}},
	{"deepwalk-alias", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}},
	{"ppr-alias", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true}},
	{"node2vec-alias", walk.Algorithm{Kind: walk.Node2Vec, Length: 40, P: 0.25, Q: 4, Weighted: true}},
	{"node2vec-fallback", walk.Algorithm{Kind: walk.Node2Vec, Length: 20, P: 0.001, Q: 1, Weighted: true}},
	{"metapath-tables", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{0, 1, 2}}},
	{"metapath-tables-weighted", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{2, 0}, Weighted: true}},
	{"deepwalk-zprs", walk.Algorithm{Kind: walk.DeepWalk, Length: 30, Weighted: true, Stepper: walk.StepperZPRS}},
	{"deepwalk-dprs", walk.Algorithm{Kind: walk.DeepWalk, Length: 30, Weighted: true, Stepper: walk.StepperDPRS}},
	{"node2vec-zprs", walk.Algorithm{Kind: walk.Node2Vec, Length: 20, Weighted: true, P: 0.5, Q: 2, Stepper: walk.StepperZPRS}},
	{"metapath-zprs", walk.Algorithm{Kind: walk.MetaPath, Length: 20, Weighted: true, Schema: []uint8{3, 1}, Stepper: walk.StepperZPRS}},
}

// TestPlacementWalksMatchAllDevice: under placement plans that keep 50%,
// 25%, 10% and none of the edges on the device, and under a memory limit
// below the graph's size, every walk equals the all-device engine's, byte
// for byte, for every sampler (the reservoir samplers included, whose
// floating-point order depends on the chunk layout).
func TestPlacementWalksMatchAllDevice(t *testing.T) {
	g := testGraph(t)
	reps := 3
	if small() {
		reps = 1
	}
	starts := allStarts(g, reps)
	hub := make([]uint32, 500)
	for i := range hub {
		hub[i] = vHub
	}
	ref := newEngine(t, g, WithMaxBatchWalks(5000))
	if ref.Placement() != nil {
		t.Fatal("the all-device engine has a placement plan")
	}
	want := map[string]map[int][][]uint32{}
	jobs := func(a walk.Algorithm) []walk.Job {
		return []walk.Job{{Tag: 1, Algorithm: a, Seed: 7, Starts: starts}, {Tag: 2, Algorithm: a, Seed: 1 << 33, Starts: hub}}
	}
	for _, c := range placementCases {
		want[c.name] = collect(t, ref, jobs(c.alg))
	}
	full := graphPlan(shapeOf(g), 0).need()
	variants := []struct {
		name string
		opts []Option
	}{
		{"fraction=0.5", []Option{WithDeviceFraction(0.5)}},
		{"fraction=0.25", []Option{WithDeviceFraction(0.25)}},
		{"fraction=0.1", []Option{WithDeviceFraction(0.1), WithMaxBatchWalks(3000)}},
		{"fraction=0", []Option{WithDeviceFraction(0)}},
		{fmt.Sprintf("limit=%d", full/2+(256<<10)), []Option{WithMemoryLimit(full/2 + 256<<10), WithStream(StreamOff)}}, // the placement plan, not streaming (auto would stream)
	}
	for _, v := range variants {
		e := newEngine(t, g, v.opts...)
		pl := e.Placement()
		if pl == nil {
			t.Fatalf("%s: no placement plan", v.name)
		}
		t.Logf("%s: %s", v.name, pl)
		for _, c := range placementCases {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				got := collect(t, e, jobs(c.alg))
				for tag := range want[c.name] {
					for id, w := range want[c.name][tag] {
						if !equal(got[tag][id], w) {
							t.Fatalf("job %d walk %d differs from the all-device walk:\nplaced %v\ndevice %v", tag, id, got[tag][id], w)
						}
					}
				}
			})
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if e.liveDev != 0 || e.liveHost != 0 {
			t.Fatalf("%s: after Close %d device and %d pinned allocations live", v.name, e.liveDev, e.liveHost)
		}
	}
}

// TestPlacementTransitionsExact: the samplers' chi-square tests with 10%
// of the edges on the device (the hub's on the device, most others not).
func TestPlacementTransitionsExact(t *testing.T) { transitionsExact(t, WithDeviceFraction(0.1)) }

// TestPlacementVisitsCPUEqualsGPU: visit counts under a plan with a quarter
// of the edges on the device equal the CPU engine's.
func TestPlacementVisitsCPUEqualsGPU(t *testing.T) { visitsCPUEqualsGPU(t, WithDeviceFraction(0.25)) }

// TestPlacementRefusesNeighborSampling: neighbour sampling reads the whole
// graph on the device and says so under a plan.
func TestPlacementRefusesNeighborSampling(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g, WithDeviceFraction(0.5))
	_, _, err := e.SampleNeighbors(t.Context(), graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{2}, InstancesPerSeed: 1}, []uint32{vHub})
	if err == nil {
		t.Fatal("neighbour sampling ran under a placement plan")
	}
	t.Log(err)
}
