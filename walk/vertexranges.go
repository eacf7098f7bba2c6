package walk

import "github.com/walkstage/walkstage/graph"

// ForVertexRanges calls fn on disjoint vertex ranges [lo, hi) covering g, of
// about equal work (edges plus vertices), on all cores, and returns when
// every call has: for callers that lay tables out themselves, such as the
// GPU engine's placement plan.
func ForVertexRanges(g *graph.Graph, fn func(lo, hi int)) { forVertexRanges(g, fn) }

// ForAliasVertices computes the alias table of every vertex of a weighted
// graph with out-edges, as BuildAlias does, on all cores, and hands fn the
// vertex, its first edge, its adjacency and the table (prob and alias are
// reused after fn returns).
func ForAliasVertices(g *graph.Graph, fn func(v int, first uint64, adj []uint32, prob []float32, alias []uint32)) {
	forAliasVertices(g, 0, fn)
}

// ForAliasVerticesOn is ForAliasVertices on at most workers goroutines at
// a time (0: all cores): a table built beside other work, such as a live
// graph's compaction beside its applier, leaves it the other cores.
func ForAliasVerticesOn(g *graph.Graph, workers int, fn func(v int, first uint64, adj []uint32, prob []float32, alias []uint32)) {
	forAliasVertices(g, workers, fn)
}
