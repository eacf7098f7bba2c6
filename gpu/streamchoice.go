package gpu

import (
	"fmt"
	"math"

	"github.com/walkstage/walkstage/walk"
)

// Under StreamAuto an engine whose graph does not fit the device (or a
// WithDeviceFraction below 1) holds both plans at once: the stream plan
// (stream.go) and the placement plan (placement.go), sharing the offsets
// on the device. Each batch then walks under whichever the cost model
// below says is fastest: copying the streamed partitions in (long walks,
// many walkers: the copies are paid per sweep, whatever the walkers),
// reading the stream plan's host entries in place, or the placement
// plan's kernels, which read the host's share of its hub-first layout in
// place (short walks and small batches: paid per step that lands on the
// host). The walks are the same under every plan; only the time differs.

// batchPlan is how one batch is walked.
type batchPlan int

const (
	planCopy      batchPlan = iota // the stream engine, partitions copied in
	planInPlace                    // the stream engine, the streamed share read in place
	planPlacement                  // the placement plan's kernels
)

func (p batchPlan) String() string {
	switch p {
	case planInPlace:
		return "stream in place"
	case planPlacement:
		return "placement"
	}
	return "stream copied"
}

// planCosts is the cost model's estimate, in seconds, of one batch under
// each plan; +Inf where the engine does not hold the plan or the plan
// cannot walk the batch.
type planCosts struct {
	Copy, InPlace, Placement float64
}

// best is the cheapest plan; ties go to the stream engine's copy, then in
// place (the order of the constants).
func (c planCosts) best() batchPlan {
	p, t := planCopy, c.Copy
	if c.InPlace < t {
		p, t = planInPlace, c.InPlace
	}
	if c.Placement < t {
		p = planPlacement
	}
	return p
}

// String says what the model estimated, for logs and bench: the reason
// for a choice.
func (c planCosts) String() string {
	f := func(s float64) string {
		if math.IsInf(s, 1) {
			return "n/a"
		}
		return fmt.Sprintf("%.3g s", s)
	}
	return fmt.Sprintf("estimated copied %s, stream in place %s, placement %s", f(c.Copy), f(c.InPlace), f(c.Placement))
}

// The placement plan's host reads, measured on the H200 host at scale 22
// (docs/design/placement.md, docs/benchmarks/out-of-core.md): the host
// share's steps ran at about 450 M/s while the region read in place is
// within the GPU's address-translation reach (4-byte targets, 0.26 to
// 0.46 GB at 50 to 10% on the device), and at rate x region ≈ 1.07e17
// bytes/s beyond it (16-byte alias entries: 105 M/s over 1.0 GB, 71 over
// 1.5, 63 over 1.7). The stream plan's in-place rates are streamCheaper's.
const (
	hostReadReachBytes = 512 << 20
	hostReadNearSteps  = 450e6
	hostReadFarConst   = 1.07e17
	// node2vecHostReads is the host reads a Node2Vec step costs against
	// DeepWalk's under in-place reads (the class test reads the previous
	// vertex's adjacency too): the placement plan walked weighted Node2Vec
	// at 113 M steps/s where the model with one read a step gave 200.
	node2vecHostReads = 1.8
)

// placementStepRate is the host steps a second the placement plan's
// kernels serve reading region bytes in place.
func placementStepRate(region float64) float64 {
	if region <= hostReadReachBytes {
		return hostReadNearSteps
	}
	return min(hostReadNearSteps, hostReadFarConst/region)
}

// streamCosts is streamCheaper's model of a batch of walks walks on the
// stream plan p: the seconds copying (sweeps until the longest walk ends)
// and reading the streamed share in place (a host read for each step that
// lands there).
func streamCosts(p *StreamPlan, walks int64, st walk.StepsEstimate, copyBytes, readBytes int64) (tCopy, tInPlace float64) {
	streamedEdges := p.Edges - p.ResidentEdges()
	tCopy = streamSweepsPerStep * st.Longest * float64(streamedEdges*copyBytes) / streamCopyBytesPerSec
	tInPlace = float64(walks) * st.Mean * float64(streamedEdges) / float64(max(p.Edges, 1)) / inPlaceRate(readBytes)
	return tCopy, tInPlace
}

// inPlaceRate is the steps a second a kernel takes reading the streamed
// share in place, readBytes an edge there.
func inPlaceRate(readBytes int64) float64 {
	if readBytes > 4 {
		return inPlaceEntrySteps
	}
	return inPlaceTargetSteps
}

// hostReads is the host reads a step of a costs where it reads in place:
// Node2Vec's class test reads the previous vertex's edges too.
func hostReads(a walk.Algorithm) float64 {
	if a.Kind == walk.Node2Vec {
		return node2vecHostReads
	}
	return 1
}

// placementSeconds is the placement plan pp's time for walks walks of
// mean steps each, a share 1 - DeviceShare of whose steps read the host
// side in place: readBytes an edge there (16: an alias entry, 4: a
// target), reads a step.
func placementSeconds(pp *Placement, walks int64, mean float64, readBytes int64, reads float64) float64 {
	host := 1 - pp.DeviceShare()
	region := host * float64(pp.Edges) * float64(readBytes)
	return float64(walks) * mean * host * reads / placementStepRate(region)
}

// planChoice is what the cost model needs of an engine to choose a
// batch's plan: the stream plan (nil: none), the placement plan (nil:
// none), whether the stream plan walks the algorithm (streamSupported),
// and whether the graph is weighted (the stream plan's entries are then
// 12 bytes, read in place by every walk).
type planChoice struct {
	stream       *StreamPlan
	place        *Placement
	streamWalks  bool
	weightedEdge bool
}

// choose is the plan for a batch of walks walks of a, with st the pilot's
// estimate of its lengths (stepsPilots), and the costs it compared.
// Under a disk plan nothing is read in place (the host holds no copy).
func (c planChoice) choose(a walk.Algorithm, walks int64, st walk.StepsEstimate) (batchPlan, planCosts) {
	inf := math.Inf(1)
	costs := planCosts{Copy: inf, InPlace: inf, Placement: inf}
	reads := hostReads(a)
	alias := a.Weighted && (a.ResolvedStepper() == walk.StepperAlias || a.Kind == walk.Node2Vec || a.Kind == walk.MetaPath)
	if sp := c.stream; sp != nil && c.streamWalks {
		eb := streamEntryBytes(c.weightedEdge)
		copyBytes := eb
		if c.weightedEdge && !alias && a.Kind != walk.MetaPath {
			copyBytes = 4 // a uniform walk streams the bare targets
		}
		if sp.Streamed() == 0 {
			costs.Copy = 0
		} else {
			tc, ti := streamCosts(sp, walks, st, copyBytes, eb)
			costs.Copy = tc
			if sp.Disk == nil {
				costs.InPlace = ti * reads
			}
		}
	}
	if pp := c.place; pp != nil {
		rb := int64(4)
		if alias {
			rb = 16
		}
		costs.Placement = placementSeconds(pp, walks, st.Mean, rb, reads)
	}
	return costs.best(), costs
}
