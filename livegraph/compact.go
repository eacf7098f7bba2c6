package livegraph

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Compact merges a snapshot's base and delta into a new graph: the live
// edges of every vertex, deleted ones dropped, added vertices numbered with
// the base's in ascending order of external id, as `graph import` numbers
// them. The result is the graph that graph.FromEdges (and `graph import
// --duplicates keep-all --self-loops`) builds from the same edges — base
// edges in CSR order, then the inserted ones in the order applied — so walks
// on it are those on the offline import, byte for byte. Every vertex is
// kept, edgeless ones too. The graph keeps the base's name; its Version is
// its content's, as always.
//
// It reads the snapshot only, so it runs beside the applier, on as many
// goroutines as WithWorkers and WithCores allow (the other options are
// ignored).
func Compact(ctx context.Context, s *Snapshot, opts ...Option) (*graph.Graph, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := s.base
	n := int(s.n)
	baseV := b.NumVertices()
	ext := func(v int) int64 {
		if v >= baseV {
			return s.added[v-baseV]
		}
		return b.ExternalID(uint32(v))
	}
	// newOf maps an old dense id to its compacted one; nil is the identity,
	// which holds when the base has no id map and every added id is the
	// dense id it got.
	var newOf, oldOf []uint32
	var ids []int64
	identity := b.IDs == nil
	for k, x := range s.added {
		identity = identity && x == int64(baseV+k)
	}
	if !identity {
		oldOf = make([]uint32, n)
		for i := range oldOf {
			oldOf[i] = uint32(i)
		}
		slices.SortFunc(oldOf, func(x, y uint32) int { return cmp.Compare(ext(int(x)), ext(int(y))) })
		newOf = make([]uint32, n)
		ids = make([]int64, n)
		for nv, ov := range oldOf {
			newOf[ov] = uint32(nv)
			ids[nv] = ext(int(ov))
		}
	}
	re := func(v uint32) uint32 {
		if newOf == nil {
			return v
		}
		return newOf[v]
	}

	oldAt := func(nv int) uint32 {
		if oldOf != nil {
			return oldOf[nv]
		}
		return uint32(nv)
	}
	// Every vertex's live degree is known without reading its edges (a
	// delta's Live count, else the base degree), so the offsets come
	// first and the vertices are then filled in parallel, each at its
	// place.
	g := &graph.Graph{Name: b.Name, Offsets: make([]uint64, n+1), IDs: ids}
	for nv := range n {
		ov := oldAt(nv)
		d := 0
		if dv := s.Vertex(ov); dv != nil {
			d = int(dv.Live)
		} else {
			d = b.Degree(ov)
		}
		g.Offsets[nv+1] = g.Offsets[nv] + uint64(d)
	}
	e := g.Offsets[n]
	g.Targets = make([]uint32, e)
	if b.Weights != nil {
		g.Weights = make([]float32, e)
	}
	if b.Labels != nil {
		g.Labels = make([]uint8, e)
	}
	if b.Times != nil {
		g.Times, g.ByTime = make([]int64, e), make([]uint32, e)
	}
	var next atomic.Int64
	var maxLabel atomic.Int32
	maxLabel.Store(-1)
	var wg sync.WaitGroup
	// Every goroutine WithWorkers allows starts; those above what
	// WithCores allows now wait at each chunk (options.wait).
	done := func() bool { return next.Load() >= int64(n) }
	for i := range o.most() {
		wg.Go(func() {
			w := compactor{s: s, g: g, re: re, maxLabel: -1}
			first := true
			for ctx.Err() == nil && o.wait(ctx, i, done) {
				lo := int(next.Add(compactChunk) - compactChunk)
				if lo >= n {
					break
				}
				if first {
					o.started()
					first = false
				}
				for nv := lo; nv < min(lo+compactChunk, n); nv++ {
					w.vertex(nv, oldAt(nv))
				}
			}
			for {
				m := maxLabel.Load()
				if int32(w.maxLabel) <= m || maxLabel.CompareAndSwap(m, int32(w.maxLabel)) {
					break
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("compact %s: %w", b.Name, ctx.Err())
	}
	if b.Labels != nil {
		g.NumLabels = max(b.NumLabels, int(maxLabel.Load())+1)
	}
	if err := g.Finish(); err != nil {
		return nil, fmt.Errorf("compact %s: %w", b.Name, err)
	}
	return g, nil
}

// compactChunk is how many vertices a compacting goroutine takes at a time
// from the shared cursor (a hub's edges take one goroutine while the
// others go on).
const compactChunk = 1024

// compactEdge is one live edge of the vertex being compacted.
type compactEdge struct {
	d uint32
	w float32
	l uint8
	t int64
}

// compactor is one compacting goroutine's scratch.
type compactor struct {
	s        *Snapshot
	g        *graph.Graph
	re       func(uint32) uint32
	adj      []compactEdge
	baseTime []int64
	order    []uint32
	maxLabel int
}

// vertex writes the compacted adjacency of new vertex nv (old dense id ov)
// at its place in g.
func (c *compactor) vertex(nv int, ov uint32) {
	b, g := c.s.base, c.g
	dv := c.s.Vertex(ov)
	if b.Times == nil && c.direct(nv, ov, dv) {
		return
	}
	adj := c.adj[:0]
	if int(ov) < b.NumVertices() {
		lo, hi := b.Offsets[ov], b.Offsets[ov+1]
		if b.Times != nil {
			c.baseTime = slices.Grow(c.baseTime[:0], int(hi-lo))[:hi-lo]
			for k, j := range b.ByTime[lo:hi] {
				c.baseTime[j] = b.Times[lo+uint64(k)]
			}
		}
		for e := lo; e < hi; e++ {
			t := b.Targets[e]
			if dv != nil && dv.BaseDead(t) {
				continue
			}
			x := compactEdge{d: c.re(t), w: 1}
			if b.Weights != nil {
				x.w = b.Weights[e]
			}
			if b.Labels != nil {
				x.l = b.Labels[e]
			}
			if b.Times != nil {
				x.t = c.baseTime[e-lo]
			}
			adj = append(adj, x)
		}
	}
	if dv != nil {
		var times []int64
		if b.Times != nil {
			times = c.s.DeltaTimes(ov)
		}
		adj = c.liveInserts(adj, dv, times)
	}
	c.adj = adj
	at := g.Offsets[nv]
	// graph.FromEdges orders a vertex's edges by (target, time), stably:
	// base edges before inserted ones, inserts in order.
	slices.SortStableFunc(adj, func(x, y compactEdge) int {
		if d := cmp.Compare(x.d, y.d); d != 0 {
			return d
		}
		return cmp.Compare(x.t, y.t)
	})
	if uint64(len(adj)) != g.Offsets[nv+1]-at {
		panic(fmt.Sprintf("livegraph: vertex %d has %d live edges, its live count says %d", ov, len(adj), g.Offsets[nv+1]-at))
	}
	for i, x := range adj {
		g.Targets[at+uint64(i)] = x.d
		if g.Weights != nil {
			g.Weights[at+uint64(i)] = x.w
		}
		if g.Labels != nil {
			g.Labels[at+uint64(i)] = x.l
			c.maxLabel = max(c.maxLabel, int(x.l))
		}
	}
	if g.Times != nil {
		order := slices.Grow(c.order[:0], len(adj))[:len(adj)]
		for j := range order {
			order[j] = uint32(j)
		}
		slices.SortStableFunc(order, func(p, q uint32) int { return cmp.Compare(adj[p].t, adj[q].t) })
		for k, j := range order {
			g.Times[at+uint64(k)] = adj[j].t
		}
		copy(g.ByTime[at:], order)
		c.order = order
	}
}

// direct writes the compacted adjacency of new vertex nv (old ov, its
// delta dv or nil) on a graph without edge times, in graph.FromEdges's
// order, when the base's edges of ov (renumbered) are in target order, as
// a graph's are (Finish checks it; direct checks again, as a renumbering
// could break it): its live inserts alone are sorted, stably, and merged
// into the base edges as they are read, base edges first among equal
// targets, which is the stable sort of all of them. A vertex without a
// delta is a copy. It reports false when the base edges are out of order,
// having written only what the general path then overwrites.
//
// Why: the general path copied every live edge into a 24-byte record and
// sorted them all; a compaction at a 5% delta leaves most of a vertex's
// edges as they were, and its CPU is taken from walks beside the ingest
// (issue 37).
func (c *compactor) direct(nv int, ov uint32, dv *walk.DeltaVertex) bool {
	b, g := c.s.base, c.g
	at, end := g.Offsets[nv], g.Offsets[nv+1]
	var lo, hi uint64
	if int(ov) < b.NumVertices() {
		lo, hi = b.Offsets[ov], b.Offsets[ov+1]
	}
	ins := c.adj[:0]
	if dv != nil {
		ins = c.liveInserts(ins, dv, nil)
		c.adj = ins
		slices.SortStableFunc(ins, func(x, y compactEdge) int { return cmp.Compare(x.d, y.d) })
	}
	k, j := at, 0
	var last uint32
	for e := lo; e < hi; e++ {
		t := b.Targets[e]
		if dv != nil && dv.BaseDead(t) {
			continue
		}
		d := c.re(t)
		if d < last {
			return false
		}
		last = d
		for ; j < len(ins) && ins[j].d < d; j++ {
			if k == end {
				return false // more live edges than the count: the general path says so
			}
			c.put(k, ins[j])
			k++
		}
		if k == end {
			return false
		}
		g.Targets[k] = d
		if g.Weights != nil {
			g.Weights[k] = b.Weights[e]
		}
		if g.Labels != nil {
			g.Labels[k] = b.Labels[e] // below the base's NumLabels, which Compact keeps
		}
		k++
	}
	for ; j < len(ins) && k < end; j++ {
		c.put(k, ins[j])
		k++
	}
	return k == end && j == len(ins)
}

// put writes x as edge k of the compacted graph (without edge times).
func (c *compactor) put(k uint64, x compactEdge) {
	c.g.Targets[k] = x.d
	if c.g.Weights != nil {
		c.g.Weights[k] = x.w
	}
	if c.g.Labels != nil {
		c.g.Labels[k] = x.l
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// liveInserts appends dv's live appended edges to adj, oldest first, their
// targets renumbered, with their labels on a labelled graph and their
// times when times is not nil (a timed graph's), and keeps c.maxLabel:
// both of a compaction's paths take a vertex's inserts this way.
func (c *compactor) liveInserts(adj []compactEdge, dv *walk.DeltaVertex, times []int64) []compactEdge {
	labelled := c.s.base.Labels != nil
	for i, de := range dv.Edges() {
		if dv.DeltaDead(i) {
			continue
		}
		x := compactEdge{d: c.re(de.Target), w: de.Weight}
		if labelled {
			x.l = dv.Labels()[i]
			c.maxLabel = max(c.maxLabel, int(x.l))
		}
		if times != nil {
			x.t = times[i]
		}
		adj = append(adj, x)
	}
	return adj
}
