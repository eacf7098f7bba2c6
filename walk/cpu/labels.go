package cpu

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/walk"
)

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
func buildLabelTables(g *graph.Graph, owner *Engine) *labelTables {
	nl := g.NumLabels
	lt := &labelTables{numLabels: nl,
		off: hugemem.Alloc[uint64](owner, g.NumVertices()*nl+1),
		tgt: hugemem.Alloc[uint32](owner, int(g.NumEdges()))}
	if g.Weighted() {
		lt.alias = hugemem.Alloc[aliasEntry](owner, int(g.NumEdges()))
	}
	lt.off[len(lt.off)-1] = uint64(g.NumEdges())
	walk.ForLabelSegments(g, lt.alias != nil, func(v, l int, seg uint64, adj []uint32, prob []float32, alias []uint32) {
		lt.off[v*nl+l] = seg
		copy(lt.tgt[seg:], adj)
		for i := range prob {
			lt.alias[seg+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[alias[i]]}
		}
	})
	return lt
}

// bytes is the tables' memory.
func (lt *labelTables) bytes() int64 {
	if lt == nil {
		return 0
	}
	return int64(len(lt.off))*8 + int64(len(lt.tgt))*4 + int64(len(lt.alias))*12
}
