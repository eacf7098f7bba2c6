package graphsample

// The C-SAW samplers' CPU side: one instance at a time, per SampleKind
// (sample.go describes the kinds and their parameters).

import (
	"math"
	"slices"
	"sort"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// sampler holds one worker's scratch space.
type sampler struct {
	g       *graph.Graph
	p       SampleParams
	sel     selector
	visited map[uint32]struct{}
	cands   []uint64 // layer: candidate edges of the whole frontier
	slots   []uint32 // layer: frontier slot of each candidate
	offs    []uint32 // layer: candidate index within its vertex
	picked  []uint32
	pre     []float64 // layer: cumulative degrees (weights) of the frontier
}

func newSampler(g *graph.Graph, p SampleParams) *sampler {
	return &sampler{g: g, p: p, visited: map[uint32]struct{}{}}
}

// instance samples instance id from seeds.
func (s *sampler) instance(id uint32, seeds []uint32) []SampledEdge {
	switch s.p.Kind {
	case NeighborSampling:
		return s.neighbor(id, seeds[0])
	case LayerSampling:
		return s.layer(id, seeds[0])
	case ForestFire, Snowball:
		return s.fire(id, seeds[0])
	case FrontierWalk:
		return s.frontier(id, seeds)
	}
	return nil
}

func (s *sampler) neighbor(id uint32, seed uint32) []SampledEdge {
	g, p := s.g, s.p
	var out []SampledEdge
	frontier := []uint32{seed}
	var next []uint32
	for h, k := range p.Fanouts {
		next = next[:0]
		for j, v := range frontier {
			base := g.Offsets[v]
			n := int(g.Offsets[v+1] - base)
			key := SampleKey{Seed: p.Seed, Instance: id, Slot: uint32(j), Hop: uint32(h)}
			var picked []uint32
			if p.Replace {
				picked = s.sel.withReplacement(g, p.EdgeBias, base, n, k, key)
			} else {
				picked = s.sel.selectK(g, p.EdgeBias, base, n, k, key)
			}
			for _, c := range picked {
				e := base + uint64(c)
				u := g.Targets[e]
				out = append(out, SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: e})
				next = append(next, u)
			}
		}
		frontier, next = next, frontier
		if len(frontier) == 0 {
			break
		}
	}
	return out
}

// layerPick is one selected edge of a layer: its frontier slot and its
// index in that vertex's adjacency.
type layerPick struct{ slot, off uint32 }

// layerSlot is the counter slot of a layer's rejection draws: no frontier
// position reaches it.
const layerSlot = 0xFFFFFFFF

func (s *sampler) layer(id uint32, seed uint32) []SampledEdge {
	g, p := s.g, s.p
	var out []SampledEdge
	frontier := []uint32{seed}
	for h, k := range p.LayerSizes {
		picks, ok := s.layerRejection(id, uint32(h), k, frontier)
		if !ok {
			picks = s.layerKeys(id, uint32(h), k, frontier)
		}
		clear(s.visited)
		next := make([]uint32, 0, len(picks))
		for _, pk := range picks {
			v := frontier[pk.slot]
			e := g.Offsets[v] + uint64(pk.off)
			u := g.Targets[e]
			out = append(out, SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: e})
			// The next frontier is the distinct targets in candidate order
			// (frontier, then adjacency).
			if _, ok := s.visited[u]; !ok {
				s.visited[u] = struct{}{}
				next = append(next, u)
			}
		}
		frontier = next
		if len(frontier) == 0 {
			break
		}
	}
	return out
}

// layerKeys selects k of the frontier's edges by reservoir keys.
func (s *sampler) layerKeys(id, h uint32, k int, frontier []uint32) []layerPick {
	g, p := s.g, s.p
	s.cands, s.slots, s.offs = s.cands[:0], s.slots[:0], s.offs[:0]
	for j, v := range frontier {
		for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
			s.cands = append(s.cands, e)
			s.slots = append(s.slots, uint32(j))
			s.offs = append(s.offs, uint32(e-g.Offsets[v]))
		}
	}
	keyOf := func(c int) SampleKey {
		return SampleKey{Seed: p.Seed, Instance: id, Slot: s.slots[c], Hop: h, Candidate: s.offs[c]}
	}
	picked := s.sel.selectFunc(len(s.cands), k, p.EdgeBias.Kind != BiasConstant,
		func(c int) float64 { return p.EdgeBias.edge(g, s.cands[c]) }, keyOf)
	picks := make([]layerPick, len(picked))
	for i, c := range picked {
		picks[i] = layerPick{s.slots[c], s.offs[c]}
	}
	return picks
}

// layerRejection selects k of the frontier's n edges (n > 4k, constant or
// edge-weight bias) by draws with replacement over the whole frontier,
// redrawing taken edges: draw t is the word at {instance, layerSlot, hop,
// t}, mapped to a frontier slot through the slots' cumulative degrees
// (weights) and to an edge within it (uniformly, or through the vertex's
// cumulative weights). ok is false when it does not apply or after
// maxDraws(k) draws.
func (s *sampler) layerRejection(id, h uint32, k int, frontier []uint32) ([]layerPick, bool) {
	g, p := s.g, s.p
	if p.EdgeBias.Kind != BiasConstant && p.EdgeBias.Kind != BiasEdgeWeight {
		return nil, false
	}
	var cum []float64
	if p.EdgeBias.Kind == BiasEdgeWeight {
		cum = WeightCDF(g)
	}
	pre := s.pre[:0]
	var n uint64
	var total float64
	for _, v := range frontier {
		d := g.Offsets[v+1] - g.Offsets[v]
		n += d
		if cum != nil && d > 0 {
			total += cum[g.Offsets[v+1]-1]
		}
		pre = append(pre, float64(n))
		if cum != nil {
			pre[len(pre)-1] = total
		}
	}
	s.pre = pre
	if n <= 4*uint64(k) || n > math.MaxUint32 {
		return nil, false
	}
	picks := make([]layerPick, 0, k)
	for t := 0; t < maxDraws(k); t++ {
		x := s.sel.word(SampleKey{Seed: p.Seed, Instance: id, Slot: layerSlot, Hop: h, Candidate: uint32(t)})
		var pk layerPick
		if cum == nil {
			i := uint64(walk.Bounded(x, uint32(n)))
			j := sort.Search(len(pre), func(j int) bool { return float64(i) < pre[j] })
			lo := uint64(0)
			if j > 0 {
				lo = uint64(pre[j-1])
			}
			pk = layerPick{uint32(j), uint32(i - lo)}
		} else {
			target := float64(x) / (1 << 32) * total
			j := min(sort.Search(len(pre), func(j int) bool { return target < pre[j] }), len(pre)-1)
			for j > 0 && pre[j] == pre[j-1] { // a vertex without edges: none of the mass
				j--
			}
			lo := 0.0
			if j > 0 {
				lo = pre[j-1]
			}
			v := frontier[j]
			vc := cum[g.Offsets[v]:g.Offsets[v+1]]
			r := target - lo
			c := min(sort.Search(len(vc), func(c int) bool { return r < vc[c] }), len(vc)-1)
			pk = layerPick{uint32(j), uint32(c)}
		}
		if !slices.Contains(picks, pk) {
			picks = append(picks, pk)
			if len(picks) == k {
				slices.SortFunc(picks, func(a, b layerPick) int {
					if a.slot != b.slot {
						return int(a.slot) - int(b.slot)
					}
					return int(a.off) - int(b.off)
				})
				return picks, true
			}
		}
	}
	return nil, false
}

// burnCount is the forest-fire burn count of a frontier vertex: geometric
// with success probability p (mean p/(1-p)), from the word at candidate
// 0xFFFFFFFC (counter word 3 of draw 0x3FFFFFFF).
func burnCount(word uint32, p float64) int {
	u := (float64(word) + 1) / (1 << 32) // (0, 1]
	x := math.Floor(math.Log(u) / math.Log(p))
	if x > MaxSampleVertices {
		return MaxSampleVertices
	}
	return int(x)
}

// burnCandidate is the candidate index whose word is a vertex's burn draw.
const burnCandidate = 0xFFFFFFFF

func (s *sampler) fire(id uint32, seed uint32) []SampledEdge {
	g, p := s.g, s.p
	var out []SampledEdge
	clear(s.visited)
	s.visited[seed] = struct{}{}
	frontier := []uint32{seed}
	full := func() bool { return p.MaxVertices > 0 && len(s.visited) >= p.MaxVertices }
	for h := 0; h < p.Depth && len(frontier) > 0 && !full(); h++ {
		var next []uint32
		for j, v := range frontier {
			if full() {
				break
			}
			base := g.Offsets[v]
			n := int(g.Offsets[v+1] - base)
			// candidate: an edge to a vertex not yet in the sample (the
			// first edge to it when there are several).
			candidate := func(c int) bool {
				u := g.Targets[base+uint64(c)]
				_, in := s.visited[u]
				return !in && (c == 0 || g.Targets[base+uint64(c-1)] != u)
			}
			key := SampleKey{Seed: p.Seed, Instance: id, Slot: uint32(j), Hop: uint32(h)}
			x := n // snowball: every candidate
			if p.Kind == ForestFire {
				bk := key
				bk.Candidate = burnCandidate
				if x = burnCount(bk.Word(), p.BurnProb); x == 0 {
					continue
				}
			}
			picked, ok := []uint32(nil), false
			if p.Kind == ForestFire && n > 4*x && p.EdgeBias.Kind != BiasLabel {
				picked, ok = s.sel.rejectionWhere(g, p.EdgeBias, base, n, x, key, candidate)
			}
			if !ok {
				s.offs = s.offs[:0]
				for c := 0; c < n; c++ {
					if candidate(c) {
						s.offs = append(s.offs, uint32(c))
					}
				}
				picked = s.offs
				if p.Kind == ForestFire {
					sel := s.sel.selectFunc(len(s.offs), x, p.EdgeBias.Kind != BiasConstant,
						func(c int) float64 { return p.EdgeBias.edge(g, base+uint64(s.offs[c])) },
						func(c int) SampleKey { k := key; k.Candidate = s.offs[c]; return k })
					s.picked = s.picked[:0]
					for _, c := range sel {
						s.picked = append(s.picked, s.offs[c])
					}
					picked = s.picked
				}
			}
			for _, c := range picked {
				if full() {
					break
				}
				e := base + uint64(c)
				u := g.Targets[e]
				s.visited[u] = struct{}{}
				out = append(out, SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: e})
				next = append(next, u)
			}
		}
		frontier = next
	}
	return out
}

func (s *sampler) frontier(id uint32, seeds []uint32) []SampledEdge {
	g, p := s.g, s.p
	slots := append([]uint32(nil), seeds...)
	// A Fenwick tree over the slots' degrees: pick by degree in O(log F).
	f := newFenwick(len(slots))
	for j, v := range slots {
		f.add(j, int64(g.Degree(v)))
	}
	out := make([]SampledEdge, 0, p.Samples)
	for t := 0; t < p.Samples; t++ {
		total := f.total()
		if total == 0 {
			break
		}
		w := SampleKey{Seed: p.Seed, Instance: id, Hop: uint32(t)}.Words()
		r := uint64(w[0])<<32 | uint64(w[1])
		hi, _ := mul64(r, uint64(total))
		j := f.find(int64(hi))
		v := slots[j]
		base := g.Offsets[v]
		n := uint32(g.Offsets[v+1] - base)
		var c uint32
		switch p.EdgeBias.Kind {
		case BiasConstant:
			c = walk.Bounded(w[2], n)
		case BiasEdgeWeight:
			c = cdfSearch(WeightCDF(g)[base:base+uint64(n)], w[2])
		default:
			c = pickWeighted(func(i int) float64 { return p.EdgeBias.edge(g, base+uint64(i)) }, int(n), w[2])
		}
		e := base + uint64(c)
		u := g.Targets[e]
		out = append(out, SampledEdge{Hop: int32(t), Src: v, Dst: u, Edge: e})
		f.add(j, int64(g.Degree(u))-int64(n))
		slots[j] = u
	}
	return out
}

// fenwick is a binary indexed tree of int64 over n slots.
type fenwick struct{ t []int64 }

func newFenwick(n int) *fenwick { return &fenwick{t: make([]int64, n+1)} }

func (f *fenwick) add(i int, d int64) {
	for i++; i < len(f.t); i += i & -i {
		f.t[i] += d
	}
}

func (f *fenwick) total() int64 {
	var s int64
	for i := len(f.t) - 1; i > 0; i -= i & -i {
		s += f.t[i]
	}
	return s
}

// find returns the slot j with prefix(j) <= x < prefix(j+1), for x in
// [0, total).
func (f *fenwick) find(x int64) int {
	pos := 0
	step := 1
	for step*2 < len(f.t) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if n := pos + step; n < len(f.t) && f.t[n] <= x {
			pos = n
			x -= f.t[n]
		}
	}
	return pos
}
