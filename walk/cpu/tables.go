package cpu

import (
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/walk"
)

// PrepareTables builds the alias table of a weighted graph now rather than
// on first use: the fused table when it fits its limit, else the packed one.
func (e *Engine) PrepareTables() {
	if e.fusedOK {
		e.fusedTable()
	} else {
		e.packedTable()
	}
}

// TableBytes is the memory the sampling tables built so far take.
func (e *Engine) TableBytes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tableBytes()
}

func (e *Engine) tableBytes() int64 {
	n := int64(len(e.alias))*int64(unsafe.Sizeof(aliasEntry{})) + int64(len(e.fused))*fusedBytesPerEdge +
		e.fence.bytes() + e.labels.bytes() + int64(len(e.labelSums))*8
	// Temporal walks' tables: the coarse index, the weights' prefix sums,
	// the records (timeRecords, timeNextRecords) and the exponential
	// bias's records.
	n += int64(len(e.coarse))*8 + int64(len(e.cumw))*8 + int64(len(e.recs))*int64(unsafe.Sizeof(timeRec{}))
	for _, r := range e.nextRecs {
		n += int64(len(r)) * int64(unsafe.Sizeof(timeRec{}))
	}
	for _, t := range e.expTabs {
		n += int64(len(t.rec))*int64(unsafe.Sizeof(timeRec{})) + int64(len(t.verts))*int64(unsafe.Sizeof(vertRec{}))
	}
	return n
}

// fusedFor reports whether a walks on the fused table: every walk that
// would otherwise draw from the packed table, and uniform DeepWalk and PPR,
// which find each edge's target and the target's edge range in the entry's
// keep fields (one load per step instead of the offsets and then the target).
func (e *Engine) fusedFor(a walk.Algorithm) bool {
	uniform := (a.Kind == walk.DeepWalk || a.Kind == walk.PPR) && a.ResolvedStepper() == walk.StepperUniform
	return e.fusedOK && (needsAlias(a) && (a.Kind == walk.DeepWalk || a.Kind == walk.PPR || a.Kind == walk.Node2Vec) || uniform)
}

// recordBuild publishes a table built since t0 (set stores it) and adds its
// build time, under the lock that LastRunStats and TableBytes read under.
func (e *Engine) recordBuild(t0 time.Time, set func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	set()
	e.tableBuild += time.Since(t0)
}

// fusedTable returns the fused table, built on first use.
func (e *Engine) fusedTable() []fusedEntry {
	e.fusedOnce.Do(func() {
		t0 := time.Now()
		tab := buildFused(e.g, e)
		e.recordBuild(t0, func() { e.fused = tab })
	})
	return e.fused
}

// packedTable returns the packed alias table, built on first use.
func (e *Engine) packedTable() []aliasEntry {
	e.aliasOnce.Do(func() {
		if !e.g.Weighted() {
			return
		}
		t0 := time.Now()
		tab := buildPacked(e.g, e)
		e.recordBuild(t0, func() { e.alias = tab })
	})
	return e.alias
}

// fences returns the fence index, built on first use.
func (e *Engine) fences() *fenceIndex {
	e.fenceOnce.Do(func() {
		fi := buildFences(e.g.Targets)
		e.mu.Lock()
		e.fence = fi
		e.mu.Unlock()
	})
	return e.fence
}

// PrepareLabelTables builds MetaPath's label tables now rather than on the
// first MetaPath run, and reports whether the graph has them (labels, no
// more than MaxTableLabels of them).
func (e *Engine) PrepareLabelTables() bool {
	if e.g.NumLabels == 0 || !walk.UsesLabelTables(walk.Algorithm{Kind: walk.MetaPath, Schema: []uint8{0}}, e.g) {
		return false
	}
	e.labelTables()
	return true
}

// labelTables returns MetaPath's label tables, built on first use.
func (e *Engine) labelTables() *labelTables {
	e.labelOnce.Do(func() {
		t0 := time.Now()
		lt := buildLabelTables(e.g, e)
		e.recordBuild(t0, func() { e.labels = lt })
	})
	return e.labels
}

// labelWeightSums returns the weight sum of every label segment of every
// vertex (index v*NumLabels+l, dead edges of a delta included: the base's),
// built on first use: weighted MetaPath's overlay step weighs the base side
// with it, where summing the segment at each step cost O(degree) and made
// walks on a delta 70x slower than on the compacted graph
// (BenchmarkOverlayMetaPath). A pass over the edges, 8 bytes per
// (vertex, label) as the label tables' offsets; only walks on a delta ask.
func (e *Engine) labelWeightSums() []float64 {
	e.labelSumOnce.Do(func() {
		t0 := time.Now()
		g, nl := e.g, e.g.NumLabels
		sums := hugemem.Alloc[float64](e, g.NumVertices()*nl)
		walk.ForVertexRanges(g, func(lo, hi int) {
			for v := lo; v < hi; v++ {
				row := sums[v*nl : (v+1)*nl]
				for i := g.Offsets[v]; i < g.Offsets[v+1]; i++ {
					row[g.Labels[i]] += float64(g.Weights[i])
				}
			}
		})
		e.recordBuild(t0, func() { e.labelSums = sums })
	})
	return e.labelSums
}

// TableSizes is what the CPU engine's sampling tables take for a graph, in
// bytes, for sizing a deployment before building them. Zero where the graph
// has no use for a table (no weights, no labels).
type TableSizes struct {
	Packed int64 // packed alias table (12 bytes per edge): weighted walks without the fused table
	Fused  int64 // fused alias table (32 bytes per edge), used in place of Packed when it fits the limit
	Fences int64 // Node2Vec's neighbour-test index
	Labels int64 // MetaPath's per-(vertex, label) tables
	// LabelSums is weighted MetaPath's weight sum per (vertex, label),
	// built only for walks on a live graph's delta (labelWeightSums).
	LabelSums int64
}

// EstimateTables returns the sizes of g's CPU sampling tables.
func EstimateTables(g *graph.Graph) TableSizes {
	e := int64(g.NumEdges())
	var t TableSizes
	if g.Weighted() {
		t.Packed = e * int64(unsafe.Sizeof(aliasEntry{}))
		if fusable(g) {
			t.Fused = e * fusedBytesPerEdge
		}
	}
	f1 := (e + fenceStride - 1) / fenceStride
	t.Fences = 4 * (f1 + (f1+fenceStride-1)/fenceStride)
	if nl := int64(g.NumLabels); nl > 0 {
		t.Labels = (int64(g.NumVertices())*nl+1)*8 + e*4
		if g.Weighted() {
			t.Labels += e * int64(unsafe.Sizeof(aliasEntry{}))
			t.LabelSums = int64(g.NumVertices()) * nl * 8
		}
	}
	return t
}
