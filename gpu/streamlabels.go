package gpu

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// MetaPath under streaming (issue 35): a step at v takes label
// Schema[step % len] and draws inside v's segment of that label, as the
// label tables do (walk.UsesLabelTables; walk/draws.go). So a streamed
// partition carries its edges in a second layout, the label layout: each
// vertex's edges regrouped by label, stably (walk.ForLabelSegments'
// order), an entry an edge in the plain layout's format (12-byte {prob,
// keep, alt} of the segment's alias table for a weighted graph, the
// target for an unweighted one), so a partition's edges keep their range
// [ELo, EHi) and the buffers and resident share fit either layout. Where a
// segment starts and ends within its vertex's range is the resident
// segment ends array (streamLabelBytes); the walker's place in the schema
// is its step, which it carries already. The walks are the label tables'
// walks, those of the all-device engine and of walk/cpu, byte for byte.
//
// This file builds the label layout on the host (the pinned path from the
// graph in memory, the disk path from the graph file's sections in
// buildEntriesFile); stream_cuda.go and kernels/stream.cuh walk it.

// labelScratch is one worker's buffers for putLabelEntries, reused from
// vertex to vertex.
type labelScratch struct {
	adj, col, small, large []uint32
	w, prob                []float32
	scaled                 []float64
}

// putLabelEntries writes one vertex's edges (targets adj, weights wts or
// nil, labels lab) regrouped by label into dst, 3 words an edge when wts
// is not nil (putStreamEntries over each segment's alias table, built as
// walk.AliasVertex builds it), else 1 (the target), and the ends of its
// first nl-1 segments, relative to its first edge, into ends.
func putLabelEntries(dst, ends []uint32, adj []uint32, wts []float32, lab []uint8, nl int, sc *labelScratch) {
	at := 0
	for l := range nl {
		sc.adj, sc.w = sc.adj[:0], sc.w[:0]
		for i, x := range lab {
			if int(x) != l {
				continue
			}
			sc.adj = append(sc.adj, adj[i])
			if wts != nil {
				sc.w = append(sc.w, wts[i])
			}
		}
		d := len(sc.adj)
		if wts != nil && d > 0 {
			sc.prob, sc.col = grow(sc.prob, d), grow(sc.col, d)
			sc.scaled, sc.small, sc.large = walk.AliasVertex(sc.w, sc.prob, sc.col, sc.scaled, sc.small, sc.large)
			putStreamEntries(dst[3*at:3*(at+d)], sc.adj, sc.prob, sc.col)
		} else if wts == nil {
			copy(dst[at:at+d], sc.adj)
		}
		at += d
		if l < nl-1 {
			ends[l] = uint32(at)
		}
	}
}

// fillLabelEntries writes g's label layout into ent (3 words an edge for
// a weighted graph, else 1) and its segment ends into ends (nl-1 a
// vertex), on all cores, from the graph's arrays in memory (the pinned
// path).
func fillLabelEntries(g *graph.Graph, nl int, ent, ends []uint32) {
	per := uint64(1)
	if g.Weighted() {
		per = 3
	}
	k := nl - 1
	walk.ForVertexRanges(g, func(lo, hi int) {
		var sc labelScratch
		for v := lo; v < hi; v++ {
			a, b := g.Offsets[v], g.Offsets[v+1]
			var wts []float32
			if g.Weighted() {
				wts = g.Weights[a:b]
			}
			putLabelEntries(ent[per*a:per*b], ends[v*k:(v+1)*k], g.Targets[a:b], wts, g.Labels[a:b], nl, &sc)
		}
	})
}
