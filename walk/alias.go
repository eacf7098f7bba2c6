package walk

import (
	"runtime"
	"sync"

	"github.com/walkstage/walkstage/graph"
)

// AliasVertex fills prob and alias (both len(w)) with Vose's alias table for
// the weights w. The construction is sequential and fixed to the letter —
// float64 arithmetic in edge order, LIFO work lists filled by one scan — so
// the GPU's table build (kernels/alias.cuh) yields the very same bits and
// weighted walks match the CPU engine walk by walk. small and large are
// scratch of capacity len(w); they are returned for reuse.
func AliasVertex(w []float32, prob []float32, alias []uint32, scaled []float64, small, large []uint32) ([]float64, []uint32, []uint32) {
	d := len(w)
	if cap(scaled) < d {
		scaled = make([]float64, d)
	}
	if cap(small) < d {
		small, large = make([]uint32, d), make([]uint32, d)
	}
	scaled, small, large = scaled[:d], small[:d], large[:d]
	prob, alias = prob[:d], alias[:d]
	var sum float64
	for _, x := range w {
		sum += float64(x)
	}
	fd := float64(d)
	// The lists are filled without a branch on the random test s < 1
	// (half of them mispredicted): every index is written to the top of
	// both and only the list it belongs to grows, which keeps the order.
	ns, nl := 0, 0
	for i, x := range w {
		s := float64(x) * fd / sum
		scaled[i] = s
		small[ns], large[nl] = uint32(i), uint32(i)
		lt := below1(s)
		ns, nl = ns+lt, nl+1-lt
	}
	for ns > 0 && nl > 0 {
		ns, nl = ns-1, nl-1
		s, l := small[ns], large[nl]
		prob[s] = float32(scaled[s])
		alias[s] = l
		r := (scaled[l] + scaled[s]) - 1
		scaled[l] = r
		// l goes back on the list it now belongs to; both tops are free.
		small[ns], large[nl] = l, l
		lt := below1(r)
		ns, nl = ns+lt, nl+1-lt
	}
	for _, i := range small[:ns] {
		prob[i], alias[i] = 1, i
	}
	for _, i := range large[:nl] {
		prob[i], alias[i] = 1, i
	}
	return scaled, small, large
}

// below1 is 1 when s < 1, else 0 (a flag set, not a branch).
func below1(s float64) int {
	b := 0
	if s < 1 {
		b = 1
	}
	return b
}

// BuildAlias returns the alias tables of a weighted graph as the GPU holds
// them: Prob[e] is the chance to keep column e-off of the vertex's adjacency,
// Alias[e] the local column taken otherwise. Tests compare the GPU's tables
// with these.
func BuildAlias(g *graph.Graph) (prob []float32, alias []uint32) {
	prob = make([]float32, g.NumEdges())
	alias = make([]uint32, g.NumEdges())
	forVertexRanges(g, func(lo, hi int) {
		var scaled []float64
		var small, large []uint32
		for v := lo; v < hi; v++ {
			a, b := g.Offsets[v], g.Offsets[v+1]
			if a == b {
				continue
			}
			scaled, small, large = AliasVertex(g.Weights[a:b], prob[a:b], alias[a:b], scaled, small, large)
		}
	})
	return prob, alias
}

// forAliasVertices computes the alias table (AliasVertex) of every vertex
// with out-edges, on all cores, and hands fn the vertex v, its first edge a, its
// adjacency and the table; prob and alias are reused after fn returns.
func forAliasVertices(g *graph.Graph, workers int, fn func(v int, a uint64, adj []uint32, prob []float32, alias []uint32)) {
	forVertexRangesOn(g, workers, func(lo, hi int) {
		var scaled []float64
		var small, large []uint32
		var prob []float32
		var alias []uint32
		for v := lo; v < hi; v++ {
			a, b := g.Offsets[v], g.Offsets[v+1]
			d := int(b - a)
			if d == 0 {
				continue
			}
			if cap(prob) < d {
				prob, alias = make([]float32, d), make([]uint32, d)
			}
			prob, alias = prob[:d], alias[:d]
			scaled, small, large = AliasVertex(g.Weights[a:b], prob, alias, scaled, small, large)
			fn(v, a, g.Targets[a:b], prob, alias)
		}
	})
}

// forVertexRanges splits the vertices into contiguous ranges of similar edge
// counts and runs fn on them on all cores.
func forVertexRanges(g *graph.Graph, fn func(lo, hi int)) { forVertexRangesOn(g, 0, fn) }

// forVertexRangesOn is forVertexRanges on at most workers goroutines at a
// time (0: GOMAXPROCS).
func forVertexRangesOn(g *graph.Graph, workers int, fn func(lo, hi int)) {
	n := g.NumVertices()
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := runtime.GOMAXPROCS(0) * 8
	per := (uint64(g.NumEdges()) + uint64(n) + uint64(parts) - 1) / uint64(parts)
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	lo := 0
	for lo < n {
		hi, acc := lo, uint64(0)
		for hi < n && acc < per {
			acc += g.Offsets[hi+1] - g.Offsets[hi] + 1
			hi++
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(lo, hi int) {
			defer func() { <-sem; wg.Done() }()
			fn(lo, hi)
		}(lo, hi)
		lo = hi
	}
	wg.Wait()
}
