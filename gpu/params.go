package gpu

import (
	"github.com/walkstage/walkstage/walk"
)

// walkParams mirrors struct ws::WalkParams of kernels/params.cuh field for
// field. Every field but the schema is 8 bytes, so the layouts agree; the
// kernel's static_assert and TestParamsLayout pin the size.
type walkParams struct {
	offsets, targets, weights, labels, alias uint64
	tasks, seeds, result, lengths, cursor    uint64
	nTasks, stride                           uint64
	kind, sampler, length, weighted          uint64
	stopThreshold                            uint64
	accept                                   [3]uint64
	bias                                     [3]float64
	warpThreshold                            uint64
	segOffsets, segTargets, segAlias         uint64
	numLabels                                uint64
	place, split, segSplit                   uint64
	hTargets, hWeights, hLabels, hAlias      uint64
	hSegTargets, hSegAlias                   uint64
	schemaLen                                uint64
	schema                                   [walk.MaxSchemaLen]uint8
	// Temporal walks (kernels/temporal.cuh).
	times, byTime, cumw, timesOut uint64
	timeBias, timeFlags           uint64
	timeStart, maxGap             int64
	timeScale                     float64
	expCell, expSums              uint64
	coarse                        uint64
	next                          uint64 // kernels/temporal.cuh: temporal_next_build's records, or 0
}

// paramsSize is sizeof(ws::WalkParams).
const paramsSize = 472

// Time flags (ws::kTimeHasStart, kTimeHasMaxGap, kTimeBackward).
const (
	timeHasStart  = 1
	timeHasMaxGap = 2
	timeBackward  = 4
)

// rowPitch is the result pool's row length in vertices for walks of length
// steps: Length+1 rounded up to 8, so rows start on 32-byte sectors and the
// thread kernels write whole sectors (kStage in kernels/walk.cu).
func rowPitch(length int) int64 { return (int64(length) + 1 + 7) &^ 7 }

// samplerLabelTables is ws::kLabelTables: MetaPath through per-(vertex,
// label) tables, a GPU-only sampler (see Engine.labelTables).
const samplerLabelTables = 6

// task mirrors ws::Task: one walk of the global task pool.
type task struct {
	start uint32
	job   uint32
	walk  uint64
}

// algorithmParams fills the algorithm part of the launch parameters; the
// thresholds are computed exactly as walk's stepper computes them, so the
// integer comparisons on the device decide the same way.
func algorithmParams(p *walkParams, a walk.Algorithm, warpThreshold uint32) {
	p.kind = uint64(a.Kind)
	p.sampler = uint64(a.ResolvedStepper())
	p.length = uint64(a.Length)
	p.stride = uint64(rowPitch(a.Length))
	p.weighted = 0
	if a.Weighted {
		p.weighted = 1
	}
	p.stopThreshold = 0
	if a.Kind == walk.PPR {
		p.stopThreshold = walk.Threshold(a.StopProb)
	}
	p.accept = [3]uint64{}
	p.bias = [3]float64{1, 1, 1}
	if a.Kind == walk.Node2Vec || a.Kind == walk.Temporal && a.P != 0 {
		// Temporal Node2Vec reads the factors (temporal_n2v_step), as
		// walk/cpu's stepper sets them.
		p.bias, p.accept = walk.Node2VecFactors(a)
	}
	temporalParams(p, a.Time)
	p.warpThreshold = uint64(warpThreshold)
	p.schemaLen = uint64(len(a.Schema))
	p.schema = [walk.MaxSchemaLen]uint8{}
	copy(p.schema[:], a.Schema)
}

// temporalParams fills the time part of the launch parameters (zero for
// other kinds): the bias, the first step's bound, the gap and, for the
// exponential bias, walk's width of its time cells (the cell sums' device
// pointer is the engine's, set at launch).
func temporalParams(p *walkParams, t walk.TimeParams) {
	p.timeBias, p.timeFlags, p.timeStart, p.maxGap, p.timeScale = uint64(t.Bias), 0, t.Bound(), t.MaxGap, t.Scale
	if t.HasStart {
		p.timeFlags |= timeHasStart
	}
	if t.HasMaxGap {
		p.timeFlags |= timeHasMaxGap
	}
	if t.Backward {
		p.timeFlags |= timeBackward
	}
	p.expCell = 0
	if t.Bias == walk.TimeExponential {
		p.expCell = walk.ExpCell(t.Scale)
	}
}
