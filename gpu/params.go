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
	warpThreshold, schemaLen                 uint64
	schema                                   [walk.MaxSchemaLen]uint8
}

// paramsSize is sizeof(ws::WalkParams).
const paramsSize = 264

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
	p.sampler = uint64(a.ResolvedSampler())
	p.length = uint64(a.Length)
	p.stride = uint64(a.Length) + 1
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
	if a.Kind == walk.Node2Vec {
		f := [3]float64{1 / a.P, 1, 1 / a.Q}
		fmax := max(f[0], f[1], f[2])
		for i := range f {
			p.accept[i] = walk.Threshold(f[i] / fmax)
		}
		p.bias = f
	}
	p.warpThreshold = uint64(warpThreshold)
	p.schemaLen = uint64(len(a.Schema))
	p.schema = [walk.MaxSchemaLen]uint8{}
	copy(p.schema[:], a.Schema)
}
