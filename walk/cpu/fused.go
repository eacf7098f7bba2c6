package cpu

import (
	"math"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/walk"
)

// fusedEntry is one alias draw together with the edge range of both vertices
// it can lead to (the keep side is also the plain edge, its target and the
// target's range, which is what a uniform walk takes). A weighted walk that
// reads it knows where the next step's
// adjacency starts and how long it is without loading the offsets, so a step
// costs one random cache line instead of two. That is what bounds a CPU walk:
// each step's loads depend on the previous step's, and a core keeps only so
// many misses in flight. The price is memory: 32 bytes per edge against the
// packed table's 12.
//
// Entries are 32 bytes and the table starts on a page, so no entry straddles
// two cache lines. Offsets are split into a low word and a 16-bit high part
// (graphs up to 2^48 edges); degrees must fit 32 bits (fusable checks both).
// The two vertices sit side by side (to[0] the column's own target, kept
// with probability prob; to[1] its alias), so a step picks one with an
// index rather than selecting three fields each.
type fusedEntry struct {
	prob   float32
	to     [2]fusedTarget
	loHigh uint32 // bits 32..47 of to[0]'s and to[1]'s first edge: to[0]'s | to[1]'s << 16
}

// fusedTarget is a vertex a fused entry leads to and the low word of its
// first edge and its degree.
type fusedTarget struct {
	v, deg, lo uint32
}

// pick returns the target of entry e that coin selects (0 keep, 1 alias).
func (e *fusedEntry) pick(coin uint32) uint32 {
	if walk.Unit24(coin) < e.prob {
		return 0
	}
	return 1
}

// lo64 is the first edge of target t's adjacency.
func (e *fusedEntry) lo64(t uint32) uint64 {
	return uint64(e.to[t&1].lo) | uint64(e.loHigh>>(16*(t&1))&0xffff)<<32
}

// fusedBytesPerEdge is the fused table's memory per edge.
const fusedBytesPerEdge = int64(unsafe.Sizeof(fusedEntry{}))

// fusable reports whether g's offsets and degrees fit a fusedEntry.
func fusable(g *graph.Graph) bool {
	if uint64(g.NumEdges()) >= 1<<48 {
		return false
	}
	for v := 0; v < g.NumVertices(); v++ {
		if g.Offsets[v+1]-g.Offsets[v] > math.MaxUint32 {
			return false
		}
	}
	return true
}

// buildFused builds the fused table from the same alias tables as
// buildPacked, so a fused walk is the packed walk, vertex for vertex. The
// table lives outside the Go heap as long as owner does (hugemem.Alloc).
func buildFused(g *graph.Graph, owner *Engine) []fusedEntry {
	tab := hugemem.Alloc[fusedEntry](owner, int(g.NumEdges()))
	fillFused(tab, g, owner.cfg.tableWorkers)
	return tab
}

// fillFused writes g's fused entries into tab (one per edge). An entry's
// keep side is its own edge's target and its alias side the keep side of
// another entry of the same vertex, so each target's range is read from
// the offsets once (a random read, the build's cost) and copied from
// there, from a segment of the table just written.
func fillFused(tab []fusedEntry, g *graph.Graph, workers int) {
	off := g.Offsets
	walk.ForAliasVerticesOn(g, workers, func(_ int, a uint64, adj []uint32, prob []float32, alias []uint32) {
		seg := tab[a : a+uint64(len(adj))]
		for i, k := range adj {
			lo := off[k]
			seg[i] = fusedEntry{
				prob:   prob[i],
				to:     [2]fusedTarget{{v: k, deg: uint32(off[k+1] - lo), lo: uint32(lo)}},
				loHigh: uint32(lo >> 32),
			}
		}
		for i, j := range alias[:len(seg)] {
			src := &seg[j]
			seg[i].to[1] = src.to[0]
			seg[i].loHigh |= (src.loHigh & 0xffff) << 16
		}
	})
}
