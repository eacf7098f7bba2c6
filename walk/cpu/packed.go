package cpu

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/walk"
)

// aliasEntry packs what one alias draw needs into 12 bytes so a step costs
// one cache miss after the offsets: the keep probability and both possible
// targets (column and alias) as dense vertex ids.
type aliasEntry struct {
	prob float32
	keep uint32
	alt  uint32
}

// buildPacked builds the CPU engine's packed alias table, outside the Go
// heap as long as owner lives (hugemem.Alloc).
func buildPacked(g *graph.Graph, owner *Engine) []aliasEntry {
	tab := hugemem.Alloc[aliasEntry](owner, int(g.NumEdges()))
	walk.ForAliasVerticesOn(g, owner.cfg.tableWorkers, func(_ int, a uint64, adj []uint32, prob []float32, alias []uint32) {
		for i := range adj {
			tab[a+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[alias[i]]}
		}
	})
	return tab
}
