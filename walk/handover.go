package walk

import "github.com/walkstage/walkstage/graph"

// Walker is a walk between two of its steps: what the partition split
// (walk/hybrid's PartSplit, issue 35, C-SAW §V and Garaph) hands from the
// engine that holds one part of the graph to the engine that holds the
// other. The walk's vertices so far are in its row of the job's rows
// (HandoverRows); only this state travels, 16 bytes a walker, so a queue
// of walkers costs the same whichever side the graph's edges are on.
//
// The next step's draws are keyed by (seed, FirstWalk+Slot, Step, draw)
// (draws.go), so the side that takes it walks it exactly as the side that
// handed it over would have.
type Walker struct {
	Slot   uint32 // the walk's index in its job (walk id FirstWalk+Slot)
	Vertex uint32 // current vertex: the walk's Step-th vertex after its start
	Step   uint32 // steps taken
	Prev   uint32 // vertex before Vertex (graph.NoVertex at the start)
}

// HandoverRows is where the sides of a partition split write a job's
// walks: walk Slot's vertex after step s at Rows[Slot*Stride+s]
// (Stride = Length+1; the start at s = 0), and its vertex count in
// Lens[Slot] once it ends. Each position is written by the one side that
// took the step, before it hands the walker on, so the hand-over orders
// the writes.
//
// Device, when set, is the rows the device side wrote on the device and
// copied back whole at the job's end (gpu.PartSide.Finish): the vertices
// of the steps it took, graph.NoVertex elsewhere; a walk's
// vertex at a position is Device's there unless that is NoVertex, else
// Rows'. So the device's vertices cross PCIe once, sequentially, not a
// few at every hand-over.
type HandoverRows struct {
	Rows   []uint32
	Lens   []uint32
	Stride int
	Device []uint32
}

// CopyWalk appends walk slot's vertices to dst, Device's where it wrote
// them.
func (h *HandoverRows) CopyWalk(dst []uint32, slot int) []uint32 {
	lo := slot * h.Stride
	r := h.Rows[lo : lo+int(h.Lens[slot])]
	if h.Device == nil {
		return append(dst, r...)
	}
	d := h.Device[lo : lo+len(r)]
	for i, v := range r {
		if d[i] != graph.NoVertex {
			v = d[i]
		}
		dst = append(dst, v)
	}
	return dst
}

// NewHandoverRows makes the rows of n walks of length steps, with every
// walk's start written.
func NewHandoverRows(starts []uint32, length int) *HandoverRows {
	h := &HandoverRows{Rows: make([]uint32, len(starts)*(length+1)), Lens: make([]uint32, len(starts)), Stride: length + 1}
	for i, s := range starts {
		h.Rows[i*h.Stride] = s
	}
	return h
}

// VertexSet is a set of vertices as a bitmap (bit v%64 of word v/64): the
// vertices whose edges a side of a partition split holds. A step's check
// reads one word of V/8 bytes, which stays in cache.
type VertexSet []uint64

// NewVertexSet is the empty set of n vertices.
func NewVertexSet(n int) VertexSet { return make(VertexSet, (n+63)/64) }

// Has reports whether v is in the set.
func (s VertexSet) Has(v uint32) bool { return s[v>>6]>>(v&63)&1 != 0 }

// AddRange adds the vertices [lo, hi).
func (s VertexSet) AddRange(lo, hi uint32) {
	for v := lo; v < hi; v++ {
		s[v>>6] |= 1 << (v & 63)
	}
}

// Complement is the set of the n vertices not in s.
func (s VertexSet) Complement(n int) VertexSet {
	c := make(VertexSet, len(s))
	for i, w := range s {
		c[i] = ^w
	}
	if r := n % 64; r != 0 {
		c[len(c)-1] &= 1<<r - 1
	}
	return c
}
