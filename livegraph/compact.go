package livegraph

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/walkstage/walkstage/graph"
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
// It reads the snapshot only, so it runs beside the applier.
func Compact(ctx context.Context, s *Snapshot) (*graph.Graph, error) {
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

	type edge struct {
		d uint32
		w float32
		l uint8
		t int64
	}
	g := &graph.Graph{Name: b.Name, Offsets: make([]uint64, n+1), IDs: ids}
	var targets []uint32
	var weights []float32
	var labels []uint8
	var times []int64
	var bytime []uint32
	var adj []edge
	var baseTime []int64
	maxLabel := -1
	for nv := 0; nv < n; nv++ {
		if nv%4096 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("compact %s: %w", b.Name, ctx.Err())
		}
		ov := uint32(nv)
		if oldOf != nil {
			ov = oldOf[nv]
		}
		vs := findState(s.top, ov)
		adj = adj[:0]
		if int(ov) < baseV {
			lo, hi := b.Offsets[ov], b.Offsets[ov+1]
			if b.Times != nil {
				baseTime = slices.Grow(baseTime[:0], int(hi-lo))[:hi-lo]
				for k, j := range b.ByTime[lo:hi] {
					baseTime[j] = b.Times[lo+uint64(k)]
				}
			}
			for e := lo; e < hi; e++ {
				t := b.Targets[e]
				if vs != nil && vs.view.BaseDead(t) {
					continue
				}
				x := edge{d: re(t), w: 1}
				if b.Weights != nil {
					x.w = b.Weights[e]
				}
				if b.Labels != nil {
					x.l = b.Labels[e]
				}
				if b.Times != nil {
					x.t = baseTime[e-lo]
				}
				adj = append(adj, x)
			}
		}
		if vs != nil {
			dv := &vs.view
			for i, de := range dv.Edges {
				if dv.DeltaDead(i) {
					continue
				}
				x := edge{d: re(de.Target), w: de.Weight}
				if b.Labels != nil {
					x.l = vs.ext.labels[i]
				}
				if b.Times != nil {
					x.t = vs.ext.times[i]
				}
				adj = append(adj, x)
			}
		}
		// graph.FromEdges orders a vertex's edges by (target, time),
		// stably: base edges before inserted ones, inserts in order.
		slices.SortStableFunc(adj, func(x, y edge) int {
			if c := cmp.Compare(x.d, y.d); c != 0 {
				return c
			}
			return cmp.Compare(x.t, y.t)
		})
		for _, x := range adj {
			targets = append(targets, x.d)
			if b.Weights != nil {
				weights = append(weights, x.w)
			}
			if b.Labels != nil {
				labels = append(labels, x.l)
				maxLabel = max(maxLabel, int(x.l))
			}
		}
		if b.Times != nil {
			order := make([]uint32, len(adj))
			for j := range order {
				order[j] = uint32(j)
			}
			slices.SortStableFunc(order, func(p, q uint32) int { return cmp.Compare(adj[p].t, adj[q].t) })
			for _, j := range order {
				times = append(times, adj[j].t)
			}
			bytime = append(bytime, order...)
		}
		g.Offsets[nv+1] = uint64(len(targets))
	}
	g.Targets = targets
	if g.Targets == nil {
		g.Targets = []uint32{}
	}
	if b.Weights != nil {
		g.Weights = orEmpty(weights)
	}
	if b.Labels != nil {
		g.Labels = orEmpty(labels)
		g.NumLabels = max(b.NumLabels, maxLabel+1)
	}
	if b.Times != nil {
		g.Times, g.ByTime = orEmpty(times), orEmpty(bytime)
	}
	if err := g.Finish(); err != nil {
		return nil, fmt.Errorf("compact %s: %w", b.Name, err)
	}
	return g, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
