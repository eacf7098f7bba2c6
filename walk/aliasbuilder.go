package walk

import "github.com/walkstage/walkstage/graph"

// AliasBuilder builds alias tables one adjacency at a time with the
// construction of BuildAlias (aliasVertex), reusing its scratch: for callers
// that lay tables out themselves, such as the GPU engine's placement plan,
// which writes them straight into relocated device and host arrays. One
// builder per goroutine.
type AliasBuilder struct {
	scaled       []float64
	small, large []uint32
}

// Build fills prob and alias (len(w) each) with the alias table of w.
func (b *AliasBuilder) Build(w []float32, prob []float32, alias []uint32) {
	b.scaled, b.small, b.large = aliasVertex(w, prob, alias, b.scaled, b.small, b.large)
}

// ForVertexRanges calls fn on disjoint vertex ranges [lo, hi) covering g, of
// about equal work (edges plus vertices), on all cores, and returns when
// every call has.
func ForVertexRanges(g *graph.Graph, fn func(lo, hi int)) { forVertexRanges(g, fn) }
