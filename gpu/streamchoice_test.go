package gpu

import (
	"math"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// s22Edges is the scale-22 R-MAT graph's edge count (edge factor 16,
// undirected, seed 1), the graph every figure below was measured on.
const s22Edges = 128_315_080

// s22Stream is a stream plan of that graph with resident of its edges on
// the device (the plans bench printed: 36.7% at 50%, 33.4% with five
// labels' segment ends, 17.5% at 25%, 6.0% at 10%), fromDisk for a disk
// plan.
func s22Stream(resident float64, fromDisk bool) *StreamPlan {
	r := int64(resident * s22Edges)
	p := &StreamPlan{Edges: s22Edges, EntryBytes: 12, Parts: []StreamPart{{ELo: 0, EHi: r, Resident: true}, {ELo: r, EHi: s22Edges}}}
	if fromDisk {
		p.Disk = &DiskStream{}
	}
	return p
}

// s22Place is a placement plan of that graph with share of its edges on
// the device.
func s22Place(share float64) *Placement {
	return &Placement{Edges: s22Edges, DeviceEdges: int64(share * s22Edges)}
}

// TestChoosePlanPicksTheFasterPlan: with both plans held, each batch goes
// to the plan that was measured faster for it on the H200 host
// (docs/benchmarks/out-of-core.md, M steps/s of the whole run, stream
// against placement plan at the same --device-fraction): copying for long
// walks and many walkers, the placement plan for short walks (PPR,
// MetaPath on five labels), uniform walks of one walk a vertex and
// weighted ones at 50%, the stream engine's in-place reads for a small
// weighted batch. main's engine walked every batch of a streaming engine
// with the stream engine (streamCheaper: copy or in place), so the rows
// that want the placement plan fail there.
func TestChoosePlanPicksTheFasterPlan(t *testing.T) {
	dw := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	dww := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}
	n2v := walk.Algorithm{Kind: walk.Node2Vec, Length: 80, Weighted: true, P: 2, Q: 0.5}
	meta := walk.Algorithm{Kind: walk.MetaPath, Length: 80, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}}
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}
	zprs := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}
	// 42.9% of the vertices have no edge: a DeepWalk walk from every
	// vertex takes 45.7 steps on average (191.6 M steps of 4.19 M walks).
	deep := walk.StepsEstimate{Mean: 45.7, Longest: 80}
	const oneAVertex, fourAVertex = 4_194_304, 16_777_216
	for _, c := range []struct {
		name            string
		a               walk.Algorithm
		walks           int64
		st              walk.StepsEstimate
		resident, place float64 // device shares of the two plans; place 0: no placement plan
		disk, noStream  bool
		want            batchPlan
	}{
		{"weighted deepwalk, 1 walk a vertex, 50% (154 copied, 208 placed)", dww, oneAVertex, deep, 0.367, 0.5, false, false, planPlacement},
		{"weighted deepwalk, 4 walks a vertex, 50% (521 copied, 211 placed)", dww, fourAVertex, deep, 0.367, 0.5, false, false, planCopy},
		{"weighted deepwalk, 1 walk a vertex, 25% (132 copied, 96 placed)", dww, oneAVertex, deep, 0.175, 0.25, false, false, planCopy},
		{"weighted deepwalk, 1 walk a vertex, 10% (134 copied, 75 placed)", dww, oneAVertex, deep, 0.06, 0.1, false, false, planCopy},
		{"uniform deepwalk, 1 walk a vertex, 50% (435 copied, 900 placed)", dw, oneAVertex, deep, 0.367, 0.5, false, false, planPlacement},
		{"uniform deepwalk, 1 walk a vertex, 25% (347 copied, 642 placed)", dw, oneAVertex, deep, 0.175, 0.25, false, false, planPlacement},
		{"uniform deepwalk, 4 walks a vertex, 50% (1,050 copied, 749 placed)", dw, fourAVertex, deep, 0.367, 0.5, false, false, planCopy},
		{"uniform deepwalk, 4 walks a vertex, 10% (509 copied, 452 placed)", dw, fourAVertex, deep, 0.06, 0.1, false, false, planCopy},
		{"ppr 0.2, 1 walk a vertex, 50% (99 copied, 143 in place, 402 placed)", ppr, oneAVertex, walk.StepsEstimate{Mean: 4, Longest: 70}, 0.334, 0.5, false, false, planPlacement},
		{"metapath on 5 labels, 50% (24.5 copied, 30.4 in place, 35.9 placed)", meta, oneAVertex, walk.StepsEstimate{Mean: 14.3, Longest: 80}, 0.334, 0.5, false, false, planPlacement},
		{"node2vec, 1 walk a vertex, 50% (154 copied, 113 placed)", n2v, oneAVertex, deep, 0.367, 0.5, false, false, planCopy},
		{"node2vec, 4 walks a vertex, 50% (526 copied, 112 placed)", n2v, fourAVertex, deep, 0.367, 0.5, false, false, planCopy},
		{"weighted deepwalk, 20,000 walks, 25% (73 in place, 67 placed)", dww, 20_000, deep, 0.175, 0.25, false, false, planInPlace},
		{"uniform deepwalk, 20,000 walks, 25% (84 in place, 199 placed)", dw, 20_000, deep, 0.175, 0.25, false, false, planPlacement},
		{"zprs: the stream engine cannot walk it", zprs, fourAVertex, deep, 0.367, 0.5, false, true, planPlacement},
		{"ppr, no placement plan (stream on): in place as before", ppr, oneAVertex, walk.StepsEstimate{Mean: 4, Longest: 70}, 0.334, 0, false, false, planInPlace},
		{"metapath, no placement plan: in place as before", meta, oneAVertex, walk.StepsEstimate{Mean: 14.3, Longest: 80}, 0.334, 0, false, false, planInPlace},
		{"weighted, a 10,000-walk request from disk: nothing to read in place", dww, 10_000, deep, 0.367, 0, true, false, planCopy},
		{"uniform deepwalk, 1 walk a vertex from disk beside a placement plan", dw, oneAVertex, deep, 0.367, 0.5, true, false, planPlacement},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := planChoice{stream: s22Stream(c.resident, c.disk), streamWalks: !c.noStream, weightedEdge: true}
			if c.place > 0 {
				ch.place = s22Place(c.place)
			}
			got, costs := ch.choose(c.a, c.walks, c.st)
			if got != c.want {
				t.Errorf("chose %s, want %s (%s)", got, c.want, costs)
			}
			if c.disk && !math.IsInf(costs.InPlace, 1) {
				t.Errorf("a disk plan costed in place reads: %s", costs)
			}
		})
	}
}

// TestChoosePlanNothingStreamed: a stream plan that holds every edge
// copies nothing, so it wins over reading anything in place.
func TestChoosePlanNothingStreamed(t *testing.T) {
	ch := planChoice{stream: s22Stream(1, false), place: s22Place(0.5), streamWalks: true, weightedEdge: true}
	if got, costs := ch.choose(walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, 1000, walk.StepsEstimate{Mean: 4, Longest: 30}); got != planCopy {
		t.Errorf("chose %s, want the resident stream plan (%s)", got, costs)
	}
}

// TestPlacementStepRate: the host read rate falls past the translation
// reach and never rises above the near rate.
func TestPlacementStepRate(t *testing.T) {
	if r := placementStepRate(256 << 20); r != hostReadNearSteps {
		t.Errorf("256 MiB: %g", r)
	}
	a, b := placementStepRate(1e9), placementStepRate(2e9)
	if !(a > b && math.Abs(a-107e6) < 1e6) {
		t.Errorf("1 GB %g, 2 GB %g: want about 107 M, then half", a, b)
	}
}
