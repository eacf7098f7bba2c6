package graph

// Temporary stand-in for the string-id API of format version 2 (FORMAT-V2.md),
// so that the request and output side can be written before that commit
// lands in main; the merge of main replaces it.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"unsafe"
)

// StringEdge is one input edge in string external ids.
type StringEdge struct {
	SrcID, DstID string
	Weight       float32
	Label        uint8
	Time         int64
}

// HasStringIDs reports whether the graph's external ids are strings.
func (g *Graph) HasStringIDs() bool { return g.StrOffsets != nil }

// ExternalString is v's external id as a string: decimal for int graphs.
func (g *Graph) ExternalString(v uint32) string {
	if g.StrOffsets == nil {
		return strconv.FormatInt(g.ExternalID(v), 10)
	}
	b := g.StrBytes[g.StrOffsets[v]:g.StrOffsets[v+1]]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// DenseIDString maps a string external id to a dense id (decimal for int
// graphs).
func (g *Graph) DenseIDString(s string) (uint32, bool) {
	if g.StrOffsets == nil {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		return g.DenseID(x)
	}
	n := g.NumVertices()
	str := func(v uint32) []byte { return g.StrBytes[g.StrOffsets[v]:g.StrOffsets[v+1]] }
	i := sort.Search(n, func(i int) bool { return bytes.Compare(str(g.byExt[i]), []byte(s)) >= 0 })
	if i < n && string(str(g.byExt[i])) == s {
		return g.byExt[i], true
	}
	return 0, false
}

// FromStringEdges builds a graph whose external ids are strings.
func FromStringEdges(edges []StringEdge, o BuildOptions) (*Graph, error) {
	var names []string
	for _, e := range edges {
		names = append(names, e.SrcID, e.DstID)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	idx := make(map[string]int64, len(names))
	for i, s := range names {
		if s == "" || len(s) > 1024 {
			return nil, fmt.Errorf("build %s: bad string id %q", o.Name, s)
		}
		idx[s] = int64(i)
	}
	ie := make([]Edge, len(edges))
	for i, e := range edges {
		ie[i] = Edge{Src: idx[e.SrcID], Dst: idx[e.DstID], Weight: e.Weight, Label: e.Label}
	}
	o.DenseIDs, o.NumVertices = true, len(names)
	g, err := FromEdges(ie, o)
	if err != nil {
		return nil, err
	}
	g.StrOffsets = make([]uint64, len(names)+1)
	for i, s := range names {
		g.StrBytes = append(g.StrBytes, s...)
		g.StrOffsets[i+1] = uint64(len(g.StrBytes))
	}
	g.byExt = make([]uint32, len(names))
	for i := range g.byExt {
		g.byExt[i] = uint32(i)
	}
	return g, nil
}
