package walk

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
)

// MaxTableLabels bounds the label count for which MetaPath samples from
// label tables: the build makes one pass over each adjacency per label.
// Both engines use the same rule.
const MaxTableLabels = 16

// UsesLabelTables says whether an engine samples algorithm a on graph g
// through label tables. MetaPath's bias (label indicator times static
// weight) is static per (vertex, label), so unless a reservoir sampler is
// forced each step is an O(1) draw inside the segment of the wanted label,
// like a first-order walk, instead of a scan of the whole adjacency.
func UsesLabelTables(a Algorithm, g *graph.Graph) bool {
	return a.Kind == MetaPath && a.Stepper == StepperAuto && g.NumLabels <= MaxTableLabels
}

// StepperName names the stepper an engine runs a with on g: the resolved
// stepper, or for MetaPath on label tables "label-alias" (weighted) or
// "label-uniform". Logs, bench tables and output metadata use it, so they
// say what actually ran.
func StepperName(a Algorithm, g *graph.Graph) string {
	if UsesLabelTables(a, g) {
		if a.Weighted {
			return "label-alias"
		}
		return "label-uniform"
	}
	return a.ResolvedStepper().String()
}

// labelTables hold every adjacency regrouped by label: segment l of vertex
// v is [off[v*L+l], off[v*L+l+1]) of tgt, sorted by target (the regrouping
// is stable), with alias entries over the segment's weights when the graph
// is weighted. This is the layout of the GPU's label_tables_build.
type labelTables struct {
	numLabels int
	off       []uint64
	tgt       []uint32
	alias     []aliasEntry // nil for an unweighted graph
}

// buildLabelTables builds them outside the Go heap, for as long as owner
// lives (hugemem.Alloc).
func buildLabelTables(g *graph.Graph, owner *CPU) *labelTables {
	nl := g.NumLabels
	lt := &labelTables{numLabels: nl,
		off: hugemem.Alloc[uint64](owner, g.NumVertices()*nl+1),
		tgt: hugemem.Alloc[uint32](owner, int(g.NumEdges()))}
	if g.Weighted() {
		lt.alias = hugemem.Alloc[aliasEntry](owner, int(g.NumEdges()))
	}
	lt.off[len(lt.off)-1] = uint64(g.NumEdges())
	ForLabelSegments(g, lt.alias != nil, func(v, l int, seg uint64, adj []uint32, prob []float32, alias []uint32) {
		lt.off[v*nl+l] = seg
		copy(lt.tgt[seg:], adj)
		for i := range prob {
			lt.alias[seg+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[alias[i]]}
		}
	})
	return lt
}

// ForLabelSegments regroups every vertex's edges by label, stably (so each
// segment stays sorted by target), on all cores, and calls fn for each
// (vertex v, label l), empty segments included, with the segment's start in
// the original edge order (seg: vertex v's segments fill its edge range in
// label order), its targets and, when weighted, its alias table over the
// segment's weights (prob and alias empty otherwise). The slices are
// reused after fn returns. This is the layout of the CPU engine's label
// tables and of the GPU's (label_tables_build, and a placement plan's).
func ForLabelSegments(g *graph.Graph, weighted bool, fn func(v, l int, seg uint64, adj []uint32, prob []float32, alias []uint32)) {
	nl := g.NumLabels
	forVertexRanges(g, func(lo, hi int) {
		var adj []uint32
		var w, prob []float32
		var alias []uint32
		var scaled []float64
		var small, large []uint32
		for v := lo; v < hi; v++ {
			a, b := g.Offsets[v], g.Offsets[v+1]
			seg := a
			for l := 0; l < nl; l++ {
				adj, w = adj[:0], w[:0]
				for e := a; e < b; e++ {
					if int(g.Labels[e]) == l {
						adj = append(adj, g.Targets[e])
						if weighted {
							w = append(w, g.Weights[e])
						}
					}
				}
				prob, alias = prob[:0], alias[:0]
				if weighted && len(w) > 0 {
					d := len(w)
					if cap(prob) < d {
						prob, alias = make([]float32, d), make([]uint32, d)
					}
					prob, alias = prob[:d], alias[:d]
					scaled, small, large = aliasVertex(w, prob, alias, scaled, small, large)
				}
				fn(v, l, seg, adj, prob, alias)
				seg += uint64(len(adj))
			}
		}
	})
}

// bytes is the tables' memory.
func (lt *labelTables) bytes() int64 {
	if lt == nil {
		return 0
	}
	return int64(len(lt.off))*8 + int64(len(lt.tgt))*4 + int64(len(lt.alias))*12
}
