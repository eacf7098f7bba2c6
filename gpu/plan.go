package gpu

import (
	"fmt"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// This file holds the engine's host-side planning, free of CUDA so default
// builds test it: grouping jobs into launches, cutting groups into batches,
// and the device memory plans checked before allocating.

// groupJobs groups jobs with equal algorithms on the same graph (the base,
// or one live graph snapshot), in order of first appearance.
func groupJobs(jobs []walk.Job) [][]*walk.Job {
	var groups [][]*walk.Job
outer:
	for i := range jobs {
		j := &jobs[i]
		for k, grp := range groups {
			if sameAlgorithm(grp[0].Algorithm, j.Algorithm) && sameOverlay(jobOverlay(grp[0]), jobOverlay(j)) {
				groups[k] = append(grp, j)
				continue outer
			}
		}
		groups = append(groups, []*walk.Job{j})
	}
	return groups
}

// sameAlgorithm says whether two jobs can share launches: equal parameters
// and the same sampler on this engine. MetaPath's automatic choice (label
// tables) differs from a forced ZPRS although both resolve to ZPRS.
func sameAlgorithm(a, b walk.Algorithm) bool {
	if a.Kind != b.Kind || a.Length != b.Length || a.Weighted != b.Weighted || a.StopProb != b.StopProb ||
		a.P != b.P || a.Q != b.Q || a.ResolvedStepper() != b.ResolvedStepper() || len(a.Schema) != len(b.Schema) {
		return false
	}
	if a.Kind == walk.MetaPath && a.Stepper != b.Stepper {
		return false
	}
	for i := range a.Schema {
		if a.Schema[i] != b.Schema[i] {
			return false
		}
	}
	return true
}

// batch is a run of consecutive walks of one algorithm group: segments of
// jobs, each a walk-id range.
type batch struct {
	segs  []segment
	walks int64
}

type segment struct {
	job    *walk.Job
	lo, hi int // walk ids [lo, hi)
	seed   uint32
}

// pipelinedSplitWalks is the least walks a group needs to be cut into at
// least four batches.
const pipelinedSplitWalks = 4 << 14

// pipelinedBatchWalks caps batches of per walks so that a group of total
// walks, when it has pipelinedSplitWalks or more, is at least four
// batches: then the two slots overlap one batch's kernel and copy with the
// previous one's unpacking and hand-over to the caller. A stage launch of
// 16 requests of 10,000 walks fitted one batch, so its walk, copy, unpack
// and hand-over ran one after another (an execution trace of a GPU
// backlog: the engine loop waited 4.8 ms a launch for the run).
func pipelinedBatchWalks(per, total int64) int64 {
	if total >= pipelinedSplitWalks {
		per = min(per, (total+3)/4)
	}
	return per
}

// cutBatches cuts a group's walks, job after job in walk-id order, into
// batches of at most per walks.
func cutBatches(grp []*walk.Job, per int64) []*batch {
	var batches []*batch
	cur := &batch{}
	for _, j := range grp {
		for lo := 0; lo < len(j.Starts); {
			take := min(int64(len(j.Starts)-lo), per-cur.walks)
			cur.segs = append(cur.segs, segment{job: j, lo: lo, hi: lo + int(take)})
			cur.walks += take
			lo += int(take)
			if cur.walks == per {
				batches = append(batches, cur)
				cur = &batch{}
			}
		}
	}
	if cur.walks > 0 {
		batches = append(batches, cur)
	}
	return batches
}

const packTile = 1024 // kPackTile in kernels/scan.cuh

// packTiles is the number of pack_rows tiles of a batch of n walks.
func packTiles(n int64) int64 { return (n + packTile - 1) / packTile }

// ------------------------------------------------------- device memory plan

// memPart is one device allocation a plan expects, named as the engine names
// the allocation (Allocations). A transient part is scratch that is freed
// once its table is built: a plan needs room for its resident parts plus the
// largest transient one.
type memPart struct {
	name      string
	bytes     int64
	transient bool
}

// memPlan lists the device memory a step of the engine will allocate, made
// before the first allocation so that a graph too large for the device fails
// with the list instead of an out-of-memory error halfway through.
type memPlan struct {
	what  string // "graph web", "label tables of graph web", "batch slots"
	parts []memPart
}

// need is the plan's peak: every resident part plus the largest transient
// one (transient parts are built and freed one table at a time).
func (p memPlan) need() int64 {
	var resident, transient int64
	for _, x := range p.parts {
		if x.transient {
			transient = max(transient, x.bytes)
		} else {
			resident += x.bytes
		}
	}
	return resident + transient
}

// check compares the plan with free device memory (cuMemGetInfo).
func (p memPlan) check(free int64) error {
	if need := p.need(); need > free {
		return &MemoryPlanError{What: p.what, Parts: p.Parts(), Need: need, Free: free}
	}
	return nil
}

// Parts lists the plan's parts for a MemoryPlanError.
func (p memPlan) Parts() []MemoryPart {
	out := make([]MemoryPart, len(p.parts))
	for i, x := range p.parts {
		out[i] = MemoryPart{Name: x.name, Bytes: x.bytes, Transient: x.transient}
	}
	return out
}

// MemoryPart is one part of a device memory plan.
type MemoryPart struct {
	Name      string
	Bytes     int64
	Transient bool // scratch freed after its table is built
}

// MemoryPlanError says that what the engine was about to allocate does not
// fit in the device's free memory, part by part. Nothing was allocated.
type MemoryPlanError struct {
	What  string
	Parts []MemoryPart
	Need  int64 // resident parts plus the largest transient part
	Free  int64 // cuMemGetInfo's free memory when the plan was checked
}

func (e *MemoryPlanError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpu: %s needs %s of device memory, %s free:", e.What, sizeString(e.Need), sizeString(e.Free))
	for i, p := range e.Parts {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s %s", sep, p.Name, sizeString(p.Bytes))
		if p.Transient {
			b.WriteString(" (scratch, freed after the build)")
		}
	}
	return b.String()
}

// sizeString writes n bytes for a person, exact below 1 KiB.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n)/unit, 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %s (%d B)", f, [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[u], n)
}

// graphShape is what the plans need to know of a graph.
type graphShape struct {
	name               string
	vertices, edges    int64
	weighted, labelled bool
	labels             int64
}

func shapeOf(g *graph.Graph) graphShape {
	return graphShape{name: g.Name, vertices: int64(g.NumVertices()), edges: g.NumEdges(),
		weighted: len(g.Weights) > 0, labelled: len(g.Labels) > 0, labels: int64(g.NumLabels)}
}

// uploadBytes is the device size of an uploaded array of n bytes: padded to
// 64 (upload), 0 for an empty array (nothing is allocated).
func uploadBytes(n int64) int64 { return (n + 63) &^ 63 }

// allocBytes is what alloc takes for n bytes (at least 8).
func allocBytes(n int64) int64 { return max(n, 8) }

// graphPlan is New's plan: the CSR, weights and labels, the alias table and
// its build scratch for a weighted graph, and the reserve left for batches
// and other users of the device (batch slots are sized from what is free
// after these, and planned by slotPlan).
func graphPlan(s graphShape, reserve int64) memPlan {
	p := memPlan{what: "graph " + s.name}
	add := func(name string, n int64, transient bool) {
		if n > 0 {
			p.parts = append(p.parts, memPart{name, n, transient})
		}
	}
	add("graph.offsets", uploadBytes((s.vertices+1)*8), false)
	add("graph.targets", uploadBytes(s.edges*4), false)
	if s.weighted {
		add("graph.weights", uploadBytes(s.edges*4), false)
	}
	if s.labelled {
		add("graph.labels", uploadBytes(s.edges), false)
	}
	if s.weighted && s.edges > 0 {
		add("alias.table", s.edges*16, false)
		add("alias.scratch", aliasScratchBytes(s.edges), true)
	}
	add("reserve", reserve, false)
	return p
}

// aliasScratchBytes is alias_build's float64 weights and work lists.
func aliasScratchBytes(edges int64) int64 { return allocBytes(edges*8) + allocBytes(edges*4) }

// labelTablePlan is the plan of MetaPath's label tables (labelTables): the
// per-(vertex, label) offsets, the regrouped targets and, for a weighted
// graph, the regrouped weights (scratch) and an alias table per segment.
func labelTablePlan(s graphShape) memPlan {
	p := memPlan{what: "label tables of graph " + s.name, parts: []memPart{
		{"labels.offsets", allocBytes((s.vertices*s.labels + 1) * 8), false},
		{"labels.targets", allocBytes(s.edges * 4), false},
	}}
	if s.weighted {
		// The regrouped weights live while the alias scratch does, so they
		// are one transient part.
		p.parts = append(p.parts, memPart{"labels.alias", allocBytes(s.edges * 16), false},
			memPart{"labels.scratch", allocBytes(s.edges*4) + aliasScratchBytes(s.edges), true})
	}
	return p
}

// slotOverhead bounds a slot's memory beyond its per-walk buffers: the
// cursor, the parameters, the seeds of a few jobs, the pack partials'
// extra word and allocation rounding.
const slotOverhead = 4 << 10

// slotParts are one batch slot's device buffers for walks walks, words
// result vertices and jobs seeds, named as ensureSlots names them.
func slotParts(walks, words, jobs int64) []memPart {
	return []memPart{
		{"tasks", allocBytes(walks * 16), false}, {"seeds", allocBytes(jobs * 8), false},
		{"result", allocBytes(words * 4), false}, {"lengths", allocBytes(walks * 4), false},
		{"cursor", 8, false}, {"params", paramsSize, false},
		{"dense", allocBytes(words * 4), false}, {"partials", allocBytes((packTiles(walks) + 1) * 4), false},
	}
}

// slotBytes is one slot's device memory.
func slotBytes(walks, words, jobs int64) int64 {
	var n int64
	for _, p := range slotParts(walks, words, jobs) {
		n += p.bytes
	}
	return n
}

// slotPlan is ensureSlots' plan for slot i.
func slotPlan(i int, walks, words, jobs int64) memPlan {
	p := memPlan{what: fmt.Sprintf("batch slot %d (%d walks, %d result vertices)", i, walks, words)}
	for _, x := range slotParts(walks, words, jobs) {
		x.name = fmt.Sprintf("slot%d.%s", i, x.name)
		p.parts = append(p.parts, x)
	}
	return p
}
