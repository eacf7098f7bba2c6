// Package graph holds what a graph is for walkstage: the in-memory CSR
// (Graph) with its validation and content checksum, the mapping between
// dense and external vertex ids, the binary file format (Save, Load, Decode,
// and FileLayout for writers that fill a file in place), the in-memory
// builder FromEdges and the R-MAT generator. It knows nothing of walks,
// Kafka or GPUs.
//
// Importing edge lists (SNAP text, Parquet) too large for memory, and
// exporting a graph back to them, is the subpackage graph/edgelist.
package graph

import (
	"fmt"
	"math"
	"sort"
)

// MaxVertices is the largest vertex count a Graph can hold: dense ids are
// 32-bit and the value math.MaxUint32 is reserved as "no vertex".
const MaxVertices = math.MaxUint32 - 1

// NoVertex marks the absence of a vertex (for example "no previous vertex").
const NoVertex = math.MaxUint32

// Graph is a directed graph in compressed sparse row form. Vertex v's
// out-edges are Targets[Offsets[v]:Offsets[v+1]], sorted by target id so that
// membership tests can binary search. Weights and Labels, when present, run
// parallel to Targets. Undirected graphs are stored with both directions.
//
// A Graph is immutable once built and safe for concurrent readers. Its slices
// may point into a read-only memory mapping (see Load): never write to them.
type Graph struct {
	// Name and Version identify the graph in walk output metadata. Version is
	// derived from the content checksum so two graphs with equal content
	// have the same version.
	Name    string
	Version string

	Offsets []uint64  // len V+1, Offsets[0] == 0, non-decreasing
	Targets []uint32  // len E, dense ids
	Weights []float32 // nil, or len E, each finite and > 0
	Labels  []uint8   // nil, or len E
	// NumLabels is one more than the largest label (0 when unlabelled).
	NumLabels int

	// IDs maps dense id -> external id. Nil means the identity mapping.
	IDs []int64
	// byExt lists dense ids ordered by external id, for DenseID lookups when
	// IDs is not the identity. Built by Finish or loaded from the file.
	byExt []uint32

	closer func() error // releases a memory mapping, if any
}

// NumVertices returns V.
func (g *Graph) NumVertices() int { return len(g.Offsets) - 1 }

// NumEdges returns E (directed edges as stored).
func (g *Graph) NumEdges() int64 { return int64(len(g.Targets)) }

// Degree returns the out-degree of dense vertex v.
func (g *Graph) Degree(v uint32) int { return int(g.Offsets[v+1] - g.Offsets[v]) }

// Neighbors returns v's out-neighbours, sorted ascending.
func (g *Graph) Neighbors(v uint32) []uint32 { return g.Targets[g.Offsets[v]:g.Offsets[v+1]] }

// Weighted reports whether edge weights are present.
func (g *Graph) Weighted() bool { return g.Weights != nil }

// Labelled reports whether edge labels are present.
func (g *Graph) Labelled() bool { return g.Labels != nil }

// HasEdge reports whether u -> v exists, by binary search on u's adjacency.
func (g *Graph) HasEdge(u, v uint32) bool {
	adj := g.Neighbors(u)
	i := sort.Search(len(adj), func(i int) bool { return adj[i] >= v })
	return i < len(adj) && adj[i] == v
}

// ExternalID converts a dense id to the user's external id.
func (g *Graph) ExternalID(v uint32) int64 {
	if g.IDs == nil {
		return int64(v)
	}
	return g.IDs[v]
}

// DenseID converts an external id to a dense id; ok is false for an id the
// graph does not contain.
func (g *Graph) DenseID(ext int64) (v uint32, ok bool) {
	if g.IDs == nil {
		if ext < 0 || ext >= int64(g.NumVertices()) {
			return 0, false
		}
		return uint32(ext), true
	}
	ids, idx := g.IDs, g.byExt
	i := sort.Search(len(idx), func(i int) bool { return ids[idx[i]] >= ext })
	if i < len(idx) && ids[idx[i]] == ext {
		return idx[i], true
	}
	return 0, false
}

// MaxDegree returns the largest out-degree and a vertex that has it.
func (g *Graph) MaxDegree() (deg int, v uint32) {
	for u := 0; u < g.NumVertices(); u++ {
		if d := int(g.Offsets[u+1] - g.Offsets[u]); d > deg {
			deg, v = d, uint32(u)
		}
	}
	return deg, v
}

// Close releases a memory mapping backing the graph. It is a no-op for graphs
// built in memory. The graph must not be used afterwards.
func (g *Graph) Close() error {
	if g.closer == nil {
		return nil
	}
	c := g.closer
	g.closer = nil
	return c()
}

// MemoryBytes is the size of the graph's arrays.
func (g *Graph) MemoryBytes() int64 {
	return int64(len(g.Offsets))*8 + int64(len(g.Targets))*4 + int64(len(g.Weights))*4 +
		int64(len(g.Labels)) + int64(len(g.IDs))*8 + int64(len(g.byExt))*4
}

// Finish validates the structure, derives NumLabels and the external-id
// index, and sets Version from the content when it is empty. Builders call
// it once; it is linear in V+E (plus V log V when IDs are set).
func (g *Graph) Finish() error {
	if err := g.Validate(); err != nil {
		return err
	}
	if g.Labels != nil && g.NumLabels == 0 {
		maxL := -1
		for _, l := range g.Labels {
			if int(l) > maxL {
				maxL = int(l)
			}
		}
		g.NumLabels = maxL + 1
	}
	if g.IDs != nil && g.byExt == nil {
		idx := make([]uint32, len(g.IDs))
		for i := range idx {
			idx[i] = uint32(i)
		}
		ids := g.IDs
		sort.Slice(idx, func(a, b int) bool { return ids[idx[a]] < ids[idx[b]] })
		for i := 1; i < len(idx); i++ {
			if ids[idx[i]] == ids[idx[i-1]] {
				return fmt.Errorf("%w: external id %d used by dense ids %d and %d", ErrInvalid, ids[idx[i]], idx[i-1], idx[i])
			}
		}
		g.byExt = idx
	}
	if g.Version == "" {
		g.Version = fmt.Sprintf("%016x", g.Checksum())
	}
	return nil
}

// Validate checks the CSR invariants: offsets monotone and in range, targets
// in range and sorted per vertex, weights finite and positive, parallel
// arrays of the right length.
func (g *Graph) Validate() error {
	if len(g.Offsets) == 0 {
		return fmt.Errorf("%w: no offsets", ErrInvalid)
	}
	n := len(g.Offsets) - 1
	if n > MaxVertices {
		return fmt.Errorf("%w: %d vertices exceeds the limit %d", ErrInvalid, n, MaxVertices)
	}
	if g.Offsets[0] != 0 || g.Offsets[n] != uint64(len(g.Targets)) {
		return fmt.Errorf("%w: offsets span [%d,%d], want [0,%d]", ErrInvalid, g.Offsets[0], g.Offsets[n], len(g.Targets))
	}
	if g.Weights != nil && len(g.Weights) != len(g.Targets) {
		return fmt.Errorf("%w: %d weights for %d edges", ErrInvalid, len(g.Weights), len(g.Targets))
	}
	if g.Labels != nil && len(g.Labels) != len(g.Targets) {
		return fmt.Errorf("%w: %d labels for %d edges", ErrInvalid, len(g.Labels), len(g.Targets))
	}
	if g.IDs != nil && len(g.IDs) != n {
		return fmt.Errorf("%w: %d external ids for %d vertices", ErrInvalid, len(g.IDs), n)
	}
	for v := 0; v < n; v++ {
		lo, hi := g.Offsets[v], g.Offsets[v+1]
		if hi < lo {
			return fmt.Errorf("%w: offsets decrease at vertex %d", ErrInvalid, v)
		}
		for e := lo; e < hi; e++ {
			t := g.Targets[e]
			if int(t) >= n {
				return fmt.Errorf("%w: edge %d of vertex %d targets %d, beyond %d vertices", ErrInvalid, e, v, t, n)
			}
			if e > lo && g.Targets[e-1] > t {
				return fmt.Errorf("%w: adjacency of vertex %d not sorted at edge %d", ErrInvalid, v, e)
			}
		}
	}
	for e, w := range g.Weights {
		if !(w > 0) || math.IsInf(float64(w), 0) {
			return fmt.Errorf("%w: edge %d has weight %v, want finite and > 0", ErrInvalid, e, w)
		}
	}
	return nil
}
