package graphsample

// Graph sampling in the C-SAW framework (Pandey et al., "C-SAW: A Framework
// for Graph Sampling and Random Walk on GPUs", SC'20, section III and
// Table I). Every traversal-based sampler is a frontier pool plus three
// user functions: a VertexBias that picks frontier vertices, an EdgeBias
// that weighs a frontier vertex's edges, and an Update that turns the
// selected edges into the next frontier. Select draws k of n candidates
// without replacement by bias (graphsample/select.go).
//
// # The samples an engine must produce (the definition)
//
// An instance is one seed (one seed set for FrontierWalk) repeated
// InstancesPerSeed times: instance i of a request is repetition i mod
// InstancesPerSeed of seed (set) i / InstancesPerSeed. Its random words are
// Philox4x32-10 under key p.Seed with counter
//
//	{instance, slot, hop, candidate / 4}, word candidate % 4
//
// where slot is the frontier vertex's position in the hop's frontier and
// candidate the edge's index in that vertex's adjacency (SampleKey). Slot
// 0xFFFFFFFF is reserved for per-vertex draws that are not candidate keys
// (the forest-fire burn count, at slot = frontier position, candidate
// 0xFFFFFFFF*4: see burnWord). Each algorithm, hop h = 0, 1, ...:
//
//   - NeighborSampling: every frontier vertex (in frontier order) selects
//     Fanouts[h] of its out-edges (Select; with Replace, Fanouts[h] draws
//     with replacement); the next frontier is the selected targets in that
//     order, duplicates kept (a GraphSAGE sampling tree).
//   - LayerSampling: the whole frontier selects LayerSizes[h] of the union
//     of its out-edges (one Select over all candidate edges); the next
//     frontier is the distinct targets, in first-selected order.
//   - ForestFire: every frontier vertex burns x of its out-edges whose
//     target is not yet in the sample, x = floor(log(u) / log(p)) for the
//     burn word u (geometric, mean p/(1-p)), selected as per-vertex
//     neighbour sampling selects (draws with rejection of edges to sampled
//     vertices when n > 4x, else keys over the candidates; graphsample/select.go);
//     the burnt targets join the
//     sample (at most MaxVertices vertices, seed included, stopping at the
//     edge that reaches it) and form the next frontier. Depth hops.
//   - Snowball: as ForestFire with every edge to a new vertex burnt.
//   - FrontierWalk (the multi-dimensional random walk, Ribeiro and
//     Towsley): the frontier is the seed set; step h picks a frontier slot
//     with probability proportional to its vertex's degree (VertexBias
//     degree) and an out-edge of it (EdgeBias), emits the edge and replaces
//     the slot's vertex by the edge's target. Samples steps; its words are
//     counter {instance, 0, step, 0}: words 0 and 1 (a 64-bit draw) pick the
//     slot by degree prefix sum, word 2 the edge.
//
// Selected edges are emitted per frontier vertex in adjacency order, hops in
// order, so an instance's edges are sorted by hop.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/graph"
)

// SampleKind names a graph sampling algorithm.
type SampleKind uint8

const (
	NeighborSampling SampleKind = iota + 1 // per-vertex fan-outs (GraphSAGE)
	LayerSampling                          // per-frontier layer sizes
	ForestFire                             // burning probability
	Snowball                               // every new neighbour
	FrontierWalk                           // multi-dimensional random walk
)

var sampleNames = map[SampleKind]string{NeighborSampling: "neighbor", LayerSampling: "layer",
	ForestFire: "forest_fire", Snowball: "snowball", FrontierWalk: "frontier"}

func (k SampleKind) String() string {
	if s, ok := sampleNames[k]; ok {
		return s
	}
	return fmt.Sprintf("sample(%d)", uint8(k))
}

// ParseSampleKind accepts the names String returns (case-insensitive); ok is
// false for anything else (a walk algorithm, a typo).
func ParseSampleKind(s string) (SampleKind, bool) {
	for k, n := range sampleNames {
		if strings.EqualFold(s, n) {
			return k, true
		}
	}
	return 0, false
}

// BiasKind names what a bias weighs by.
type BiasKind uint8

const (
	BiasConstant   BiasKind = iota // every candidate weighs 1 (unbiased)
	BiasDegree                     // a vertex weighs its out-degree
	BiasEdgeWeight                 // an edge weighs its weight (weighted graph)
	BiasLabel                      // an edge weighs 1 when labelled Label, else 0
)

// Bias is a small typed description of a C-SAW VertexBias or EdgeBias, so
// every engine evaluates the same function without calling back into Go.
type Bias struct {
	Kind  BiasKind
	Label uint8 // BiasLabel
}

// edge returns the bias of edge e (an index into g.Targets).
func (b Bias) edge(g *graph.Graph, e uint64) float64 {
	switch b.Kind {
	case BiasEdgeWeight:
		return float64(g.Weights[e])
	case BiasLabel:
		if g.Labels[e] == b.Label {
			return 1
		}
		return 0
	case BiasDegree:
		return float64(g.Degree(g.Targets[e]))
	}
	return 1
}

// Limits on sampling parameters, independent of a deployment's limits.
const (
	MaxSampleHops     = 16
	MaxFanout         = 1 << 16
	MaxFrontierSize   = 1 << 16
	MaxFrontierSteps  = 1 << 24
	MaxSampleVertices = 1 << 24
)

// SampleParams describe one sampling request: the algorithm, its
// parameters and the RNG seed.
type SampleParams struct {
	Kind             SampleKind
	Seed             uint64
	InstancesPerSeed int   // at least 1
	Fanouts          []int // NeighborSampling: per hop
	Replace          bool  // NeighborSampling: draw with replacement
	LayerSizes       []int // LayerSampling: per hop
	BurnProb         float64
	Depth            int // ForestFire, Snowball: hops
	MaxVertices      int // ForestFire, Snowball: 0 = no limit
	FrontierSize     int // FrontierWalk: seeds per instance
	Samples          int // FrontierWalk: steps
	EdgeBias         Bias
	// Segments, when set, make one call sample the instances of several
	// requests (a stage's micro-batch): they override Seed and the
	// instance ids of the Philox keys (Segment). Not a request's
	// parameter: never validated against a request, never written.
	Segments []Segment `json:"-"`
}

// Segment is a run of a merged call's instances that belong to one
// request: from instance First of the call (in the call's numbering, as
// first and count count) up to the next segment's First, under Philox key
// Seed with instance ids Base, Base+1, ...: the keys the request's own
// call gives those instances, so a merged call's samples are each
// request's alone, edge for edge. The seeds (starts) are the call's, as
// without segments; a stage merging requests lays each instance's seed
// set out in its own place and samples with InstancesPerSeed 1.
type Segment struct {
	First int
	Seed  uint64
	Base  uint32
}

// InstanceKey is instance i's Philox key and instance id: Seed and i
// without segments, else those of the segment i falls in.
func (p SampleParams) InstanceKey(i int) (seed uint64, id uint32) {
	if len(p.Segments) == 0 {
		return p.Seed, uint32(i)
	}
	j := sort.Search(len(p.Segments), func(j int) bool { return p.Segments[j].First > i }) - 1
	sg := p.Segments[max(j, 0)]
	return sg.Seed, sg.Base + uint32(i-sg.First)
}

// CheckSegments checks that the segments, when set, cover instances
// first .. first+count-1 in order (a device sampler checks them too).
func (p SampleParams) CheckSegments(first, count int) error {
	if len(p.Segments) == 0 {
		return nil
	}
	if p.Segments[0].First < 0 || p.Segments[0].First > first {
		return fmt.Errorf("walk: segments start at instance %d, after the call's first %d", p.Segments[0].First, first)
	}
	for j := 1; j < len(p.Segments); j++ {
		if p.Segments[j].First <= p.Segments[j-1].First {
			return fmt.Errorf("walk: segment %d starts at instance %d, not after segment %d's %d", j, p.Segments[j].First, j-1, p.Segments[j-1].First)
		}
	}
	if int64(len(p.Segments)) > math.MaxUint32 {
		return fmt.Errorf("walk: %d segments", len(p.Segments))
	}
	return nil
}

// Weighted reports whether the edge bias is the edge weight.
func (p SampleParams) Weighted() bool { return p.EdgeBias.Kind == BiasEdgeWeight }

// Hops is the number of hops (steps for FrontierWalk).
func (p SampleParams) Hops() int {
	switch p.Kind {
	case NeighborSampling:
		return len(p.Fanouts)
	case LayerSampling:
		return len(p.LayerSizes)
	case FrontierWalk:
		return p.Samples
	}
	return p.Depth
}

// SeedsPerInstance is FrontierSize for FrontierWalk, else 1.
func (p SampleParams) SeedsPerInstance() int {
	if p.Kind == FrontierWalk {
		return p.FrontierSize
	}
	return 1
}

// RangeSeeds is the part of starts that instances first .. first+count-1
// start from (instance i from set i / InstancesPerSeed of
// SeedsPerInstance seeds), for a checked range: a call of one wave checks
// its own seeds, not the whole request's again (33 waves of a 1 M-seed
// request scanned 33 M seeds, twice, as long as the wave's sampling on
// the GPU).
func (p SampleParams) RangeSeeds(starts []uint32, first, count int) []uint32 {
	if count <= 0 {
		return nil
	}
	per := p.SeedsPerInstance()
	return starts[first/p.InstancesPerSeed*per : ((first+count-1)/p.InstancesPerSeed+1)*per]
}

// Validate checks the parameters and, when g is not nil, that g can serve
// the bias.
func (p SampleParams) Validate(g *graph.Graph) error {
	if _, ok := sampleNames[p.Kind]; !ok {
		return invalid("unknown sampling algorithm %d", p.Kind)
	}
	if p.InstancesPerSeed < 1 {
		return invalid("instances_per_seed %d must be at least 1", p.InstancesPerSeed)
	}
	sizes := func(name string, s []int, own SampleKind) error {
		if p.Kind != own {
			if s != nil {
				return invalid("%s is only for %s, not %s", name, own, p.Kind)
			}
			return nil
		}
		if len(s) == 0 || len(s) > MaxSampleHops {
			return invalid("%s needs 1 to %d hops, got %d", name, MaxSampleHops, len(s))
		}
		for i, k := range s {
			if k < 1 || k > MaxFanout {
				return invalid("%s[%d] = %d out of range [1, %d]", name, i, k, MaxFanout)
			}
		}
		return nil
	}
	if err := sizes("fanouts", p.Fanouts, NeighborSampling); err != nil {
		return err
	}
	if err := sizes("layer_sizes", p.LayerSizes, LayerSampling); err != nil {
		return err
	}
	if p.Replace && p.Kind != NeighborSampling {
		return invalid("replace is only for neighbor, not %s", p.Kind)
	}
	if p.Kind == ForestFire {
		if !(p.BurnProb > 0 && p.BurnProb < 1) {
			return invalid("forest_fire burn_probability %v must be in (0, 1)", p.BurnProb)
		}
	} else if p.BurnProb != 0 {
		return invalid("burn_probability is only for forest_fire, not %s", p.Kind)
	}
	if p.Kind == ForestFire || p.Kind == Snowball {
		if p.Depth < 1 || p.Depth > MaxSampleHops {
			return invalid("%s depth %d out of range [1, %d]", p.Kind, p.Depth, MaxSampleHops)
		}
		if p.MaxVertices < 0 || p.MaxVertices > MaxSampleVertices {
			return invalid("%s max_vertices %d out of range [0, %d]", p.Kind, p.MaxVertices, MaxSampleVertices)
		}
	} else if p.Depth != 0 || p.MaxVertices != 0 {
		return invalid("depth and max_vertices are only for forest_fire and snowball, not %s", p.Kind)
	}
	if p.Kind == FrontierWalk {
		if p.FrontierSize < 1 || p.FrontierSize > MaxFrontierSize {
			return invalid("frontier frontier_size %d out of range [1, %d]", p.FrontierSize, MaxFrontierSize)
		}
		if p.Samples < 1 || p.Samples > MaxFrontierSteps {
			return invalid("frontier samples %d out of range [1, %d]", p.Samples, MaxFrontierSteps)
		}
	} else if p.FrontierSize != 0 || p.Samples != 0 {
		return invalid("frontier_size and samples are only for frontier, not %s", p.Kind)
	}
	switch p.EdgeBias.Kind {
	case BiasConstant, BiasEdgeWeight, BiasLabel:
	default:
		return invalid("edge bias %d is not constant, edge weight or label", p.EdgeBias.Kind)
	}
	if p.EdgeBias.Kind != BiasConstant && p.Kind == Snowball {
		return invalid("snowball takes every new neighbour: no edge bias")
	}
	if g == nil {
		return nil
	}
	if p.EdgeBias.Kind == BiasEdgeWeight && !g.Weighted() {
		return invalid("weighted %s needs edge weights, and graph %q has none", p.Kind, g.Name)
	}
	if p.EdgeBias.Kind == BiasLabel && (!g.Labelled() || int(p.EdgeBias.Label) >= g.NumLabels) {
		return invalid("label bias %d: graph %q has labels 0..%d", p.EdgeBias.Label, g.Name, g.NumLabels-1)
	}
	return nil
}

// String is a stable rendering for logs.
func (p SampleParams) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", p.Kind)
	switch p.Kind {
	case NeighborSampling:
		fmt.Fprintf(&b, " fanouts=%v replace=%v", p.Fanouts, p.Replace)
	case LayerSampling:
		fmt.Fprintf(&b, " layer_sizes=%v", p.LayerSizes)
	case ForestFire:
		fmt.Fprintf(&b, " p=%g depth=%d max_vertices=%d", p.BurnProb, p.Depth, p.MaxVertices)
	case Snowball:
		fmt.Fprintf(&b, " depth=%d max_vertices=%d", p.Depth, p.MaxVertices)
	case FrontierWalk:
		fmt.Fprintf(&b, " frontier_size=%d samples=%d", p.FrontierSize, p.Samples)
	}
	fmt.Fprintf(&b, " weighted=%v instances_per_seed=%d", p.Weighted(), p.InstancesPerSeed)
	return b.String()
}

// SampledEdge is one edge of a sample: the hop that selected it and its
// endpoints (dense ids); Edge indexes g.Targets (its weight, label).
type SampledEdge struct {
	Hop      int32
	Src, Dst uint32
	Edge     uint64
}

// SampleStats describe one Sample call.
type SampleStats struct {
	Instances int64
	Edges     int64
}

// NumInstances is the number of instances of a request with len(starts)
// seeds.
func (p SampleParams) NumInstances(starts int) int {
	return starts / p.SeedsPerInstance() * p.InstancesPerSeed
}

// Sample runs p over starts (dense ids; FrontierWalk: consecutive sets of
// FrontierSize seeds) on the CPU, workers goroutines (0: GOMAXPROCS), and
// returns every instance's edges in instance order. The result depends on
// p, g and starts only.
func Sample(ctx context.Context, g *graph.Graph, p SampleParams, starts []uint32, workers int) ([][]SampledEdge, SampleStats, error) {
	return SampleRange(ctx, g, p, starts, 0, -1, workers)
}

// SampleRange is Sample for instances first .. first+count-1 only (count
// -1: to the last), their edges at out[0 .. count-1]: a batch too large
// to hold is sampled and written in waves, each instance as Sample
// samples it.
func SampleRange(ctx context.Context, g *graph.Graph, p SampleParams, starts []uint32, first, count, workers int) ([][]SampledEdge, SampleStats, error) {
	count, err := checkSampleRange(g, p, starts, first, count)
	if err != nil {
		return nil, SampleStats{}, err
	}
	return sampleRange(ctx, g, p, starts, first, count, workers)
}

// checkSampleRange validates a SampleRange call (the seeds of its
// instances only: RangeSeeds) and returns its count (count -1 resolved to
// the instances from first on).
func checkSampleRange(g *graph.Graph, p SampleParams, starts []uint32, first, count int) (int, error) {
	if err := p.Validate(g); err != nil {
		return 0, err
	}
	per := p.SeedsPerInstance()
	if len(starts)%per != 0 {
		return 0, invalid("%d seeds are not sets of frontier_size %d", len(starts), per)
	}
	total := p.NumInstances(len(starts))
	if int64(total) > math.MaxUint32 {
		return 0, invalid("%d instances exceed 2^32", total)
	}
	if count < 0 {
		count = total - first
	}
	if first < 0 || count < 0 || first+count > total {
		return 0, fmt.Errorf("walk: instances %d..%d of %d", first, first+count-1, total)
	}
	if err := p.CheckSegments(first, count); err != nil {
		return 0, err
	}
	nv := uint32(g.NumVertices())
	for _, s := range p.RangeSeeds(starts, first, count) {
		if s >= nv {
			return 0, fmt.Errorf("walk: seed %d beyond the graph's %d vertices", s, nv)
		}
	}
	return count, nil
}

// sampleRange is SampleRange on checked arguments.
func sampleRange(ctx context.Context, g *graph.Graph, p SampleParams, starts []uint32, first, n, workers int) ([][]SampledEdge, SampleStats, error) {
	per := p.SeedsPerInstance()
	out := make([][]SampledEdge, n)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const chunk = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	var edges atomic.Int64
	for range min(workers, (n+chunk-1)/chunk) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newSampler(g, p)
			for ctx.Err() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				var cnt int64
				for k := lo; k < min(lo+chunk, n); k++ {
					i := first + k
					set := i / p.InstancesPerSeed
					seed, id := p.InstanceKey(i)
					s.p.Seed = seed
					out[k] = s.instance(id, starts[set*per:(set+1)*per])
					cnt += int64(len(out[k]))
				}
				edges.Add(cnt)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, SampleStats{}, err
	}
	return out, SampleStats{Instances: int64(n), Edges: edges.Load()}, nil
}
