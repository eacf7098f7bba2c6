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
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
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
	// byExt lists dense ids ordered by external id (integer or string), for
	// DenseID and DenseIDString lookups when ids are not the identity. Built
	// by Finish or loaded from the file.
	byExt []uint32

	// Times and ByTime hold edge times (format version 2; nil when the graph
	// is untimed). They are in time order, not target order, so a temporal
	// step finds its window by a binary search over contiguous times:
	// Times[Offsets[v]:Offsets[v+1]] is non-decreasing, and ByTime[Offsets[v]+k]
	// is the local index j of the edge (Targets[Offsets[v]+j]) whose time is
	// Times[Offsets[v]+k], a permutation of [0, deg) with ties ordered by j.
	// Targets stay sorted by target, so every other algorithm is unaffected.
	Times  []int64
	ByTime []uint32

	// StrOffsets and StrBytes hold string external ids (format version 2;
	// nil for integer ids): vertex v's id is StrBytes[StrOffsets[v]:StrOffsets[v+1]].
	// IDs is nil when they are set.
	StrOffsets []uint64
	StrBytes   []byte

	closer func() error // releases a memory mapping, if any
	// file is the path Load read the graph from ("" for a graph built in
	// memory): the out-of-core engine reads its partitions from it.
	file string
}

// File is the path of the graph file the graph was loaded from, or "" for
// a graph built or decoded in memory. An engine that reads the file itself
// rather than through the mapping (walk/ooc, for a graph larger than
// memory) opens this path.
func (g *Graph) File() string { return g.file }

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

// Timed reports whether the graph holds edge times.
func (g *Graph) Timed() bool { return g.Times != nil }

// TimeRange returns the smallest and largest edge time (0, 0 when the graph
// is untimed or has no edges). It is O(V): each vertex's times are sorted.
func (g *Graph) TimeRange() (lo, hi int64) {
	first := true
	for v := 0; v < g.NumVertices(); v++ {
		a, b := g.Offsets[v], g.Offsets[v+1]
		if a == b || g.Times == nil {
			continue
		}
		if first {
			lo, hi, first = g.Times[a], g.Times[b-1], false
			continue
		}
		lo, hi = min(lo, g.Times[a]), max(hi, g.Times[b-1])
	}
	return lo, hi
}

// EdgeTime returns the time of edge e (an index into Targets). It searches
// e's vertex and its ByTime entries, O(log V + deg): for tests and exports,
// not for walking.
func (g *Graph) EdgeTime(e uint64) int64 {
	v := sort.Search(g.NumVertices(), func(v int) bool { return g.Offsets[v+1] > e })
	lo := g.Offsets[v]
	j := uint32(e - lo)
	for k, bj := range g.ByTime[lo:g.Offsets[v+1]] {
		if bj == j {
			return g.Times[lo+uint64(k)]
		}
	}
	panic(fmt.Sprintf("graph: edge %d missing from the time order of vertex %d", e, v))
}

// HasStringIDs reports whether the graph's external ids are strings.
func (g *Graph) HasStringIDs() bool { return g.StrOffsets != nil }

// ExternalString returns dense vertex v's external id as a string: the
// string id, or the integer id in decimal.
func (g *Graph) ExternalString(v uint32) string {
	if g.StrOffsets == nil {
		return strconv.FormatInt(g.ExternalID(v), 10)
	}
	return string(g.stringID(v))
}

// stringID is v's string id, aliasing the graph's memory.
func (g *Graph) stringID(v uint32) []byte { return g.StrBytes[g.StrOffsets[v]:g.StrOffsets[v+1]] }

func (g *Graph) compareStrings(a, b uint32) int { return bytes.Compare(g.stringID(a), g.stringID(b)) }

// DenseIDString converts an external id written as a string to a dense id:
// a string id, or a decimal integer id for a graph with integer ids. ok is
// false for an id the graph does not contain (or, for integer ids, one that
// is not a decimal integer).
func (g *Graph) DenseIDString(s string) (v uint32, ok bool) {
	if g.StrOffsets == nil {
		ext, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		return g.DenseID(ext)
	}
	idx := g.byExt
	i := sort.Search(len(idx), func(i int) bool { return string(g.stringID(idx[i])) >= s })
	if i < len(idx) && string(g.stringID(idx[i])) == s {
		return idx[i], true
	}
	return 0, false
}

// ExternalID converts a dense id to the user's external id. For a graph
// with string ids it returns the dense id: output that names vertices must
// use ExternalString there (HasStringIDs says which).
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
		int64(len(g.Labels)) + int64(len(g.IDs))*8 + int64(len(g.byExt))*4 +
		int64(len(g.Times))*8 + int64(len(g.ByTime))*4 + int64(len(g.StrOffsets))*8 + int64(len(g.StrBytes))
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
	if g.StrOffsets != nil && g.byExt == nil {
		idx, err := stringIndex(g.StrOffsets, g.StrBytes)
		if err != nil {
			return err
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
	if err := g.validateShape(); err != nil {
		return err
	}
	return g.validateRange(0, n)
}
