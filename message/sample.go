package message

// Graph sampling requests: the C-SAW algorithms (neighbor, layer,
// forest_fire, snowball, frontier), their fields and validation
// (docs/reference/messages.md, "Graph samples"). Their output is "samples": one
// Parquet row per sampled edge.

import (
	"fmt"
	"math"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
)

// OutputSamples is the output of a sampling request.
const OutputSamples = "samples"

// DefaultInstancesPerSeed applies when instances_per_seed is absent.
const DefaultInstancesPerSeed = 1

// SampleSpec is what a sampling request asks for: the sampling parameters
// (with the request's RNG seed) and whether rows carry the edge weight.
type SampleSpec struct {
	Params     graphsample.SampleParams
	EdgeWeight bool
}

// NumInstances is the number of sample instances of a sampling request, 0
// for other requests.
func (r *Request) NumInstances() int {
	if r.Sample == nil {
		return 0
	}
	return r.Sample.Params.NumInstances(len(r.Starts))
}

// sampleFields are the members that only sampling requests take.
func sampleFieldsSet(m *requestV1) []string {
	var set []string
	for name, ok := range map[string]bool{"fanouts": m.Fanouts != nil, "replace": m.Replace != nil,
		"layer_sizes": m.LayerSizes != nil, "burn_probability": m.BurnProb != nil, "depth": m.Depth != nil,
		"max_vertices": m.MaxVertices != nil, "frontier_size": m.FrontierSize != nil, "samples": m.Samples != nil,
		"instances_per_seed": m.InstancesPerSeed != nil, "edge_weight": m.EdgeWeight != nil} {
		if ok {
			set = append(set, name)
		}
	}
	return set
}

// checkNoSampleFields rejects a walk request that carries sampling fields.
func (d *decoder) checkNoSampleFields(m *requestV1) error {
	if set := sampleFieldsSet(m); len(set) > 0 {
		return d.reject(ReasonInvalidParameters, "%s is only for the sampling algorithms (neighbor, layer, forest_fire, snowball, frontier), not %s",
			set[0], truncate(m.Algorithm, 32))
	}
	return nil
}

// checkSample validates a sampling request's fields and sets r.Output,
// r.Sample and r.WalksPerSeed (= instances_per_seed, so the walk limits
// bound the instances too).
func (d *decoder) checkSample(m *requestV1, r *Request, kind graphsample.SampleKind) error {
	for name, set := range map[string]bool{"length": m.Length != nil, "walks_per_seed": m.WalksPerSeed != nil,
		"p": m.P != nil, "q": m.Q != nil, "stop_probability": m.StopProb != nil, "schema": m.Schema != nil,
		"sampler": m.Sampler != "", "top_k": m.TopK != nil, "steps_per_query": m.StepsPerQuery != nil,
		"n_p": m.NP != nil, "n_v": m.NV != nil, "exclude_seeds": m.ExcludeSeeds != nil,
		"exclude_neighbors": m.ExcludeNeighbors != nil, "min_visits": m.MinVisits != nil, "queries": m.Queries != nil,
		"time_bias": m.TimeBias != "", "time_scale": m.TimeScale != nil, "start_time": m.StartTime != nil,
		"max_time_gap": m.MaxTimeGap != nil, "direction": m.Direction != "", "with_times": m.WithTimes != nil} {
		if set {
			return d.reject(ReasonInvalidParameters, "%s is not for the sampling algorithm %s", name, kind)
		}
	}
	switch m.Output {
	case "", OutputSamples:
	default:
		return d.reject(ReasonInvalidParameters, "output %q: algorithm %s writes %q", truncate(m.Output, 32), kind, OutputSamples)
	}
	p := graphsample.SampleParams{Kind: kind, InstancesPerSeed: DefaultInstancesPerSeed, Fanouts: m.Fanouts, LayerSizes: m.LayerSizes}
	if m.InstancesPerSeed != nil {
		p.InstancesPerSeed = *m.InstancesPerSeed
	}
	if p.InstancesPerSeed < 1 {
		return d.reject(ReasonInvalidParameters, "instances_per_seed %d must be at least 1", p.InstancesPerSeed)
	}
	if d.lim.MaxWalksPerSeed > 0 && p.InstancesPerSeed > d.lim.MaxWalksPerSeed {
		return d.reject(ReasonTooLarge, "instances_per_seed %d exceeds the limit %d", p.InstancesPerSeed, d.lim.MaxWalksPerSeed)
	}
	if m.Replace != nil {
		p.Replace = *m.Replace
	}
	if m.Weighted {
		p.EdgeBias = graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
	}
	if m.BurnProb != nil {
		p.BurnProb = *m.BurnProb
	}
	if m.Depth != nil {
		p.Depth = *m.Depth
	}
	if m.MaxVertices != nil {
		p.MaxVertices = *m.MaxVertices
	}
	if m.FrontierSize != nil {
		p.FrontierSize = *m.FrontierSize
	}
	if m.Samples != nil {
		p.Samples = *m.Samples
	}
	// Required fields first, so a request missing one hears which.
	for _, req := range []struct {
		kind graphsample.SampleKind
		name string
		ok   bool
	}{{graphsample.NeighborSampling, "fanouts", m.Fanouts != nil}, {graphsample.LayerSampling, "layer_sizes", m.LayerSizes != nil},
		{graphsample.ForestFire, "burn_probability", m.BurnProb != nil}, {graphsample.ForestFire, "depth", m.Depth != nil},
		{graphsample.Snowball, "depth", m.Depth != nil}, {graphsample.FrontierWalk, "frontier_size", m.FrontierSize != nil},
		{graphsample.FrontierWalk, "samples", m.Samples != nil}} {
		if req.kind == kind && !req.ok {
			return d.reject(ReasonInvalidParameters, "%s is required with algorithm %s", req.name, kind)
		}
	}
	// An absent max_vertices is the deployment's limit; a larger one is
	// too large.
	if kind == graphsample.ForestFire || kind == graphsample.Snowball {
		if m.MaxVertices == nil {
			p.MaxVertices = d.lim.MaxSampleVertices
		} else if p.MaxVertices < 1 {
			return d.reject(ReasonInvalidParameters, "max_vertices %d must be at least 1", p.MaxVertices)
		} else if d.lim.MaxSampleVertices > 0 && p.MaxVertices > d.lim.MaxSampleVertices {
			return d.reject(ReasonTooLarge, "max_vertices %d exceeds the limit %d", p.MaxVertices, d.lim.MaxSampleVertices)
		}
	}
	for _, s := range [][]int{p.Fanouts, p.LayerSizes} {
		for i, k := range s {
			if d.lim.MaxFanout > 0 && k > d.lim.MaxFanout {
				return d.reject(ReasonTooLarge, "%s[%d] = %d exceeds the limit %d", map[bool]string{true: "fanouts", false: "layer_sizes"}[kind == graphsample.NeighborSampling], i, k, d.lim.MaxFanout)
			}
		}
	}
	if err := p.Validate(d.g); err != nil {
		return d.reject(ReasonInvalidParameters, "%v", err)
	}
	r.Output, r.WalksPerSeed = OutputSamples, p.InstancesPerSeed
	r.Sample = &SampleSpec{Params: p, EdgeWeight: m.EdgeWeight != nil && *m.EdgeWeight}
	if r.Sample.EdgeWeight && d.g != nil && !d.g.Weighted() {
		return d.reject(ReasonInvalidParameters, "edge_weight: graph %q has no edge weights", d.g.Name)
	}
	return nil
}

// checkSampleSize checks the seeds of a sampling request once resolved:
// whole seed sets for frontier, and the most edges the request can sample
// against the limit.
func (d *decoder) checkSampleSize(r *Request) error {
	p := &r.Sample.Params
	p.Seed = r.RNGSeed
	if per := p.SeedsPerInstance(); len(r.Starts)%per != 0 {
		return d.reject(ReasonInvalidParameters, "%d seeds are not whole sets of frontier_size %d", len(r.Starts), per)
	}
	n := int64(r.NumInstances())
	if n > math.MaxUint32 {
		return d.reject(ReasonTooLarge, "%d instances exceed 2^32", n)
	}
	if most := MaxSampleEdges(*p); d.lim.MaxSampledEdges > 0 && (most > d.lim.MaxSampledEdges || n > d.lim.MaxSampledEdges/most) {
		return d.reject(ReasonTooLarge, "%d instances x up to %d edges each exceed the limit %d sampled edges", n, most, d.lim.MaxSampledEdges)
	}
	return nil
}

// MaxSampleEdges bounds the edges one instance of p can sample (at least
// 1): a fan-out tree's size, the layer sizes' sum, max_vertices - 1, the
// frontier walk's steps. Forest fire and snowball without max_vertices are
// bounded by 2^31 (the decoder always sets max_vertices).
func MaxSampleEdges(p graphsample.SampleParams) int64 {
	var n int64
	switch p.Kind {
	case graphsample.NeighborSampling:
		width := int64(1)
		for _, f := range p.Fanouts {
			width = min(width*int64(f), math.MaxInt32)
			n = min(n+width, math.MaxInt32)
		}
	case graphsample.LayerSampling:
		for _, s := range p.LayerSizes {
			n += int64(s)
		}
	case graphsample.ForestFire, graphsample.Snowball:
		n = math.MaxInt32
		if p.MaxVertices > 0 {
			n = int64(p.MaxVertices) - 1
		}
	case graphsample.FrontierWalk:
		n = int64(p.Samples)
	}
	return max(n, 1)
}

// SampleWaveEdges is about the edges one wave of a sampling batch holds
// (12 to 20 bytes an edge as graphsample.Columns, plus the device's arrays
// on the GPU), however large the batch: the budget the stage, `walkstage
// walk` and `walkstage bench` give SampleWave.
const SampleWaveEdges = 8 << 20

// SampleWave is how many of the left instances of p to sample next (at
// least 1 while any are left) so that a wave holds about budget edges,
// after a last wave of lastInstances instances drew lastEdges edges
// (lastInstances 0: the first wave). The first wave is sized by the worst
// case (MaxSampleEdges an instance); later ones by four times the mean the
// last wave drew, growing at most twofold a wave and never below the worst
// case's size. Forest fire and snowball bound an instance by max_vertices
// but usually draw a few edges: sized by the worst case alone, a GPU
// forest fire of 1 M seeds ran 1,193 waves, each mostly launch overhead,
// and took three times the CPU's 1.5 s. A wave can exceed the budget only
// when its instances draw over four times the last wave's mean; a
// request's total is bounded anyway (MaxSampledEdges).
func SampleWave(p graphsample.SampleParams, budget int64, left, lastInstances int, lastEdges int64) int {
	if left <= 0 {
		return 0
	}
	size := int(min(int64(left), max(1, budget/MaxSampleEdges(p))))
	if lastInstances > 0 {
		mean := max(1, float64(lastEdges)/float64(lastInstances))
		grown := min(float64(2*lastInstances), float64(budget)/(4*mean))
		size = max(size, int(min(float64(left), grown)))
	}
	return size
}

// SampleTailEdges is about the edges the last wave of a batch holds at
// most under SampleTailWave: four of the sink's row groups of 65,536 edges.
// A part's row groups are copied into it one after another (about 0.2 ms
// each on the H200 host), so the last wave's row groups are what the
// writing after the last sample waits for, beside the part's lag.
const SampleTailEdges = 1 << 18

// SampleTailWave is SampleWave for a batch whose waves are written while
// the next one samples (`walkstage walk`): for neighbour sampling, once the
// instances left fit in two waves, each wave takes half of them, but no
// fewer than about SampleTailEdges edges by the last wave's mean, and the
// rest goes in one wave once that few are left. The waves so shrink
// geometrically at the end (about three more than SampleWave's), each
// written while the next, smaller one samples, and the writing left after
// the last sample is one small wave's instead of up to a whole one's:
// after the last wave nothing samples, and the writer runs alone (neighbour
// [25, 10] over 1 M seeds on the H200 host: 11-14 ms from the last sample
// to the end, 6-9 ms so). Other samplers keep SampleWave's waves: a layer
// wave costs about 9 ms beyond its edges (it uploads the request's seeds)
// and a forest fire wave about 5 (rounds by instance), so their extra
// waves cost more than the smaller last write saves (layer [25, 250]: 33
// waves 313 ms, 37 waves 350 ms; forest fire 11 waves 95 ms, 13 waves
// 105). The first wave (lastInstances 0, no mean yet) is SampleWave's.
func SampleTailWave(p graphsample.SampleParams, budget int64, left, lastInstances int, lastEdges int64) int {
	size := SampleWave(p, budget, left, lastInstances, lastEdges)
	if p.Kind != graphsample.NeighborSampling || lastInstances <= 0 || left <= 0 {
		return size
	}
	mean := max(1, float64(lastEdges)/float64(lastInstances))
	// Never above the wave SampleWave would take (a small budget leaves
	// the waves as they are).
	floor := min(size, max(1, int(float64(SampleTailEdges)/mean)))
	switch {
	case left <= floor:
		return left
	case left > 2*size:
		return size
	}
	return max(floor, min(size, (left+1)/2))
}

// AlgorithmName is the request's algorithm as named in logs and the output
// layout: the walk kind, or the sampler.
func (r *Request) AlgorithmName() string {
	if r.Sample != nil {
		return r.Sample.Params.Kind.String()
	}
	return r.Algorithm.Kind.String()
}

// DescribeAlgorithm is the completion event's "algorithm": the walk
// algorithm as run on g (walk.Algorithm.Describe), or the sampler and its
// parameters.
func (r *Request) DescribeAlgorithm(g *graph.Graph) string {
	if r.Sample != nil {
		return r.Sample.Params.String()
	}
	return r.Algorithm.Describe(g)
}

// ValidateFor checks the request's algorithm (walk or sampler) against g.
func (r *Request) ValidateFor(g *graph.Graph) error {
	if r.Sample != nil {
		if r.Sample.EdgeWeight && !g.Weighted() {
			return fmt.Errorf("edge_weight: graph %q has no edge weights", g.Name)
		}
		return r.Sample.Params.Validate(g)
	}
	return r.Algorithm.Validate(g)
}
