package walk

import "github.com/walkstage/walkstage/graph"

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
	ForVertexRanges(g, func(lo, hi int) {
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
					scaled, small, large = AliasVertex(w, prob, alias, scaled, small, large)
				}
				fn(v, l, seg, adj, prob, alias)
				seg += uint64(len(adj))
			}
		}
	})
}
