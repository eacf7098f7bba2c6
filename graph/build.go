package graph

import (
	"cmp"
	"fmt"
	"hash/crc64"
	"slices"
	"unsafe"
)

// Edge is one input edge in external ids.
type Edge struct {
	Src, Dst int64
	Weight   float32 // ignored unless the builder is weighted
	Label    uint8   // ignored unless the builder is labelled
	Time     int64   // ignored unless the builder is timed
}

// StringEdge is one input edge between string ids.
type StringEdge struct {
	Src, Dst string
	Weight   float32
	Label    uint8
	Time     int64
}

// DuplicatePolicy says what to do with repeated (src, dst) pairs.
type DuplicatePolicy uint8

const (
	DupKeepFirst  DuplicatePolicy = iota // keep the first occurrence's weight and label
	DupSumWeights                        // merge into one edge, weights added
	DupKeepAll                           // keep every copy (a multigraph)
	DupError                             // fail on the first duplicate
)

// DuplicatePolicy names, as the CLI and documentation spell them.
var duplicateNames = map[DuplicatePolicy]string{
	DupKeepFirst: "keep-first", DupSumWeights: "sum", DupKeepAll: "keep-all", DupError: "error",
}

// String returns the policy's CLI name.
func (p DuplicatePolicy) String() string {
	if s, ok := duplicateNames[p]; ok {
		return s
	}
	return fmt.Sprintf("DuplicatePolicy(%d)", uint8(p))
}

// ParseDuplicatePolicy parses keep-first, sum, keep-all or error.
func ParseDuplicatePolicy(s string) (DuplicatePolicy, error) {
	for p, n := range duplicateNames {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown duplicate policy %q (want keep-first, sum, keep-all or error)", s)
}

// Valid reports whether p is one of the defined policies; it is exported so
// an importer (graph/edgelist) can refuse an undefined policy before reading
// its input.
func (p DuplicatePolicy) Valid() bool {
	_, ok := duplicateNames[p]
	return ok
}

// BuildOptions configure FromEdges.
type BuildOptions struct {
	Name       string
	Undirected bool // add the reverse of every edge
	Weighted   bool
	Labelled   bool
	// Timed keeps edge times (Edge.Time). Duplicates are then edges equal
	// in source, target and time: the same pair at two times is two edges.
	Timed      bool
	SelfLoops  bool // keep self-loops (dropped by default)
	Duplicates DuplicatePolicy
	// DenseIDs says external ids are already 0..V-1 (V = NumVertices, or the
	// largest id + 1 when NumVertices is 0); no id map is stored.
	DenseIDs    bool
	NumVertices int
}

// FromEdges builds a graph from an in-memory edge list. It is the simple
// builder used by tests and generators; the importers stream instead.
func FromEdges(edges []Edge, o BuildOptions) (*Graph, error) {
	var ids []int64
	dense := func(x int64) uint32 { return uint32(x) }
	if o.DenseIDs {
		n := o.NumVertices
		for _, e := range edges {
			if e.Src < 0 || e.Dst < 0 {
				return nil, fmt.Errorf("build %s: negative id in dense mode (%d -> %d)", o.Name, e.Src, e.Dst)
			}
			if o.NumVertices == 0 {
				n = max(n, int(e.Src)+1, int(e.Dst)+1)
			} else if e.Src >= int64(n) || e.Dst >= int64(n) {
				return nil, fmt.Errorf("build %s: edge %d -> %d beyond %d vertices", o.Name, e.Src, e.Dst, n)
			}
		}
		o.NumVertices = n
	} else {
		ids = make([]int64, 0, 2*len(edges))
		for _, e := range edges {
			ids = append(ids, e.Src, e.Dst)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		o.NumVertices = len(ids)
		dense = func(x int64) uint32 { i, _ := slices.BinarySearch(ids, x); return uint32(i) }
	}
	if o.NumVertices > MaxVertices {
		return nil, fmt.Errorf("build %s: %d vertices exceeds %d", o.Name, o.NumVertices, MaxVertices)
	}
	type rec struct {
		s, d uint32
		w    float32
		l    uint8
		t    int64
	}
	recs := make([]rec, 0, len(edges)*(1+btoi(o.Undirected)))
	for _, e := range edges {
		s, d := dense(e.Src), dense(e.Dst)
		if s == d && !o.SelfLoops {
			continue
		}
		w := e.Weight
		if !o.Weighted {
			w = 1
		}
		t := e.Time
		if !o.Timed {
			t = 0
		}
		recs = append(recs, rec{s, d, w, e.Label, t})
		if o.Undirected && s != d {
			recs = append(recs, rec{d, s, w, e.Label, t})
		}
	}
	slices.SortStableFunc(recs, func(a, b rec) int {
		if a.s != b.s {
			return int(a.s) - int(b.s)
		}
		if a.d != b.d {
			return int(a.d) - int(b.d)
		}
		return cmp.Compare(a.t, b.t)
	})
	out := recs[:0]
	for _, r := range recs {
		if n := len(out); n > 0 && out[n-1].s == r.s && out[n-1].d == r.d && out[n-1].t == r.t {
			switch o.Duplicates {
			case DupKeepFirst:
				continue
			case DupSumWeights:
				out[n-1].w += r.w
				continue
			case DupError:
				return nil, fmt.Errorf("build %s: duplicate edge %d -> %d", o.Name, ext(ids, r.s), ext(ids, r.d))
			}
		}
		out = append(out, r)
	}
	g := &Graph{Name: o.Name, Offsets: make([]uint64, o.NumVertices+1), Targets: make([]uint32, len(out)), IDs: nil}
	if !o.DenseIDs {
		g.IDs = ids
	}
	if o.Weighted {
		g.Weights = make([]float32, len(out))
	}
	if o.Labelled {
		g.Labels = make([]uint8, len(out))
	}
	if o.Timed {
		g.Times, g.ByTime = make([]int64, len(out)), make([]uint32, len(out))
	}
	for i, r := range out {
		g.Offsets[r.s+1]++
		g.Targets[i] = r.d
		if g.Weights != nil {
			g.Weights[i] = r.w
		}
		if g.Labels != nil {
			g.Labels[i] = r.l
		}
	}
	for v := 0; v < o.NumVertices; v++ {
		g.Offsets[v+1] += g.Offsets[v]
	}
	if o.Timed {
		for v := 0; v < o.NumVertices; v++ {
			lo, hi := g.Offsets[v], g.Offsets[v+1]
			order := g.ByTime[lo:hi]
			for j := range order {
				order[j] = uint32(j)
			}
			adj := out[lo:hi]
			slices.SortStableFunc(order, func(a, b uint32) int { return cmp.Compare(adj[a].t, adj[b].t) })
			for k, j := range order {
				g.Times[lo+uint64(k)] = adj[j].t
			}
		}
	}
	if err := g.Finish(); err != nil {
		return nil, fmt.Errorf("build %s: %w", o.Name, err)
	}
	return g, nil
}

// FromStringEdges builds a graph whose external ids are strings. Dense ids
// are numbered in ascending bytewise order of the strings, as the importers
// number them, so the result does not depend on the input order.
// o.DenseIDs and o.NumVertices are ignored.
func FromStringEdges(edges []StringEdge, o BuildOptions) (*Graph, error) {
	strs := make([]string, 0, 2*len(edges))
	for _, e := range edges {
		strs = append(strs, e.Src, e.Dst)
	}
	slices.Sort(strs)
	strs = slices.Compact(strs)
	dense := make([]Edge, len(edges))
	for i, e := range edges {
		s, _ := slices.BinarySearch(strs, e.Src)
		d, _ := slices.BinarySearch(strs, e.Dst)
		dense[i] = Edge{Src: int64(s), Dst: int64(d), Weight: e.Weight, Label: e.Label, Time: e.Time}
	}
	o.DenseIDs, o.NumVertices = true, len(strs)
	if len(strs) == 0 {
		o.NumVertices = 0
	}
	g, err := FromEdges(dense, o)
	if err != nil {
		return nil, err
	}
	g.StrOffsets = make([]uint64, len(strs)+1)
	for i, s := range strs {
		g.StrBytes = append(g.StrBytes, s...)
		g.StrOffsets[i+1] = uint64(len(g.StrBytes))
	}
	if g.StrBytes == nil {
		g.StrBytes = []byte{}
	}
	g.Version, g.byExt = "", nil
	if err := g.Finish(); err != nil {
		return nil, fmt.Errorf("build %s: %w", o.Name, err)
	}
	return g, nil
}

func ext(ids []int64, v uint32) int64 {
	if ids == nil {
		return int64(v)
	}
	return ids[v]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Checksum is a CRC-64 (ECMA) over the graph's arrays in their little-endian
// in-memory form; the binary format stores it and Version derives from it.
func (g *Graph) Checksum() uint64 {
	t := crc64.MakeTable(crc64.ECMA)
	var c uint64
	c = crc64.Update(c, t, bytesOf(g.Offsets))
	c = crc64.Update(c, t, bytesOf(g.Targets))
	c = crc64.Update(c, t, bytesOf(g.Weights))
	c = crc64.Update(c, t, bytesOf(g.Labels))
	c = crc64.Update(c, t, bytesOf(g.IDs))
	c = crc64.Update(c, t, bytesOf(g.Times))
	c = crc64.Update(c, t, bytesOf(g.ByTime))
	c = crc64.Update(c, t, bytesOf(g.StrOffsets))
	c = crc64.Update(c, t, g.StrBytes)
	return c
}

// bytesOf views a slice of fixed-size numbers as bytes (host order; walkstage
// supports little-endian hosts only, see the format documentation).
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
