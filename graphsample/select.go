package graphsample

// C-SAW's Select: k of n candidates by bias, without replacement, as
// reservoir keys (Efraimidis and Spirakis, "Weighted random sampling with a
// reservoir", IPL 2006). Candidate c with bias w_c and random word x_c gets
// the key -ln(u_c) / w_c, u_c = (x_c + 1) / 2^32 in (0, 1]; the k smallest
// keys win, ties to the lower index. That is exactly successive sampling:
// the first pick is c with probability w_c / W, the next among the rest by
// the rest's biases, and so on. Unbiased selection compares the words
// themselves (no logarithm), so every engine selects the very same
// candidates; the weighted keys need a float64 log, which a GPU computes to
// within an ulp (ties of different candidates are then possible but
// vanishingly rare).
//
// Every key is a pure function of (seed, instance, slot, hop, candidate),
// so a warp per frontier vertex can compute its candidates' keys in any
// order and reduce them to the same k winners as this code.
//
// Keys cost a random word per candidate, O(degree) per frontier vertex,
// which dominates at R-MAT hubs. Per-vertex selection (neighbour sampling)
// of k edges out of n > 4k by constant or edge-weight bias therefore draws
// instead, as C-SAW does (repeated sampling with collision detection): draw
// t (t = 0, 1, ...) takes the word at Candidate = t and picks an edge with
// replacement — uniformly by multiply-high, or by weight through the
// vertex's cumulative weights (binary search, WeightCDF) — and a drawn edge
// already taken is drawn again. Drawing from the full distribution and
// rejecting the taken ones is drawing from the rest by their weights:
// successive sampling again, so the distribution is the keys' one. After
// maxDraws(k) draws without k distinct edges (very skewed weights) the
// vertex falls back to the keys, so every engine still selects the same.

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// SampleKey addresses one random word of a sample: Philox4x32-10 under key
// Seed, counter {Instance, Slot, Hop, Candidate / 4}, word Candidate % 4.
type SampleKey struct {
	Seed      uint64
	Instance  uint32
	Slot      uint32
	Hop       uint32
	Candidate uint32
}

// Words is the Philox block holding the key's word.
func (k SampleKey) Words() [4]uint32 {
	return walk.Philox4x32([4]uint32{k.Instance, k.Slot, k.Hop, k.Candidate / 4}, [2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)})
}

// Word is the key's random word.
func (k SampleKey) Word() uint32 { return k.Words()[k.Candidate%4] }

// SelectKey is the reservoir key of a candidate with bias w and word x:
// smaller keys win. Unbiased selection (uniform) orders by x alone.
func SelectKey(x uint32, w float64) float64 {
	if !(w > 0) {
		return math.Inf(1)
	}
	u := (float64(x) + 1) / (1 << 32)
	return -math.Log(u) / w
}

type keyed struct {
	k float64
	i int32
}

func (a keyed) less(b keyed) bool { return a.k < b.k || a.k == b.k && a.i < b.i }

// selector is one worker's Select scratch: a max-heap of the k best keys.
type selector struct {
	heap  []keyed
	out   []int
	out32 []uint32
	// the Philox block last computed, reused for the next 3 candidates;
	// its key too, since a merged call's instances differ in key
	// (Segment) and two requests' instances may share a counter.
	have  bool
	ctr   [4]uint32
	seed  uint64
	words [4]uint32
}

func (s *selector) word(k SampleKey) uint32 {
	c := [4]uint32{k.Instance, k.Slot, k.Hop, k.Candidate / 4}
	if !s.have || c != s.ctr || k.Seed != s.seed {
		s.words = walk.Philox4x32(c, [2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)})
		s.ctr, s.seed, s.have = c, k.Seed, true
	}
	return s.words[k.Candidate%4]
}

// selectFunc selects k of n candidates: bias(c) when weighted (else 1),
// the word of keyOf(c). It returns the winners' indices in ascending order.
// Candidates of zero bias are never selected.
func (s *selector) selectFunc(n, k int, weighted bool, bias func(c int) float64, keyOf func(c int) SampleKey) []int {
	s.out = s.out[:0]
	s.have = false
	if k <= 0 || n == 0 {
		return s.out
	}
	if k >= n && !weighted {
		for c := range n {
			s.out = append(s.out, c)
		}
		return s.out
	}
	h := s.heap[:0]
	for c := range n {
		var kk float64
		if weighted {
			w := bias(c)
			if !(w > 0) {
				continue
			}
			if k >= n { // every positive candidate is taken: no draw needed
				s.out = append(s.out, c)
				continue
			}
			kk = SelectKey(s.word(keyOf(c)), w)
		} else {
			kk = float64(s.word(keyOf(c)))
		}
		e := keyed{kk, int32(c)}
		if len(h) < k {
			h = append(h, e)
			up(h, len(h)-1)
		} else if e.less(h[0]) {
			h[0] = e
			down(h, 0)
		}
	}
	s.heap = h
	if k >= n {
		return s.out
	}
	for _, e := range h {
		s.out = append(s.out, int(e.i))
	}
	sort.Ints(s.out)
	return s.out
}

// max-heap by key (the worst of the k best at the root).
func up(h []keyed, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[p].less(h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func down(h []keyed, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[l].less(h[r]) {
			m = r
		}
		if !h[i].less(h[m]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// maxDraws bounds the draws of a rejection selection of k edges.
func maxDraws(k int) int { return 16*k + 64 }

// selectK selects k of the n edges at g.Targets[base:base+n] by bias b,
// candidate c keyed by key with Candidate = c (see the file comment for
// when it draws with rejection instead).
func (s *selector) selectK(g *graph.Graph, b Bias, base uint64, n, k int, key SampleKey) []uint32 {
	if n > 4*k && (b.Kind == BiasConstant || b.Kind == BiasEdgeWeight) {
		if out, ok := s.rejection(g, b, base, n, k, key); ok {
			return out
		}
	}
	picked := s.selectFunc(n, k, b.Kind != BiasConstant,
		func(c int) float64 { return b.edge(g, base+uint64(c)) },
		func(c int) SampleKey { kk := key; kk.Candidate = uint32(c); return kk })
	s.out32 = s.out32[:0]
	for _, c := range picked {
		s.out32 = append(s.out32, uint32(c))
	}
	return s.out32
}

// rejection draws k distinct edges of n (n > 4k) with replacement,
// redrawing taken ones; ok is false after maxDraws(k) draws.
func (s *selector) rejection(g *graph.Graph, b Bias, base uint64, n, k int, key SampleKey) (out []uint32, ok bool) {
	return s.rejectionWhere(g, b, base, n, k, key, nil)
}

// rejectionWhere is rejection that also redraws edges that are not
// candidates (forest fire: edges to vertices already sampled); candidate
// nil takes every edge.
func (s *selector) rejectionWhere(g *graph.Graph, b Bias, base uint64, n, k int, key SampleKey, candidate func(c int) bool) (out []uint32, ok bool) {
	s.out32 = s.out32[:0]
	s.have = false
	var cum []float64
	if b.Kind == BiasEdgeWeight {
		cum = WeightCDF(g)[base : base+uint64(n)]
	}
	for t := 0; t < maxDraws(k); t++ {
		kk := key
		kk.Candidate = uint32(t)
		x := s.word(kk)
		var c uint32
		if cum == nil {
			c = walk.Bounded(x, uint32(n))
		} else {
			c = cdfSearch(cum, x)
		}
		if !slices.Contains(s.out32, c) && (candidate == nil || candidate(int(c))) {
			s.out32 = append(s.out32, c)
			if len(s.out32) == k {
				slices.Sort(s.out32)
				return s.out32, true
			}
		}
	}
	return nil, false
}

// cdfSearch picks the index of cum (inclusive cumulative weights) that the
// word x falls in: the first i with target < cum[i], target = x/2^32 * total.
func cdfSearch(cum []float64, x uint32) uint32 {
	target := float64(x) / (1 << 32) * cum[len(cum)-1]
	i := sort.Search(len(cum), func(i int) bool { return target < cum[i] })
	return uint32(min(i, len(cum)-1))
}

// WeightCDF returns, per edge, the inclusive cumulative weight of its
// vertex's edges up to it (float64: exact enough for any degree). It is
// built once per graph and kept for the last graph asked for: a stage
// serves one graph at a time. The GPU engine uploads it as it is.
func WeightCDF(g *graph.Graph) []float64 {
	cdfCache.Lock()
	defer cdfCache.Unlock()
	if cdfCache.g == g {
		return cdfCache.cum
	}
	cum := make([]float64, len(g.Targets))
	walk.ForVertexRanges(g, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			var sum float64
			for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
				sum += float64(g.Weights[e])
				cum[e] = sum
			}
		}
	})
	cdfCache.g, cdfCache.cum = g, cum
	return cum
}

var cdfCache struct {
	sync.Mutex
	g   *graph.Graph
	cum []float64
}

// withReplacement draws k of the n edges with replacement, draw t from the
// word at Candidate = t: uniform by multiply-high, weighted by inverse CDF.
// The draws are returned in draw order.
func (s *selector) withReplacement(g *graph.Graph, b Bias, base uint64, n, k int, key SampleKey) []uint32 {
	s.out32 = s.out32[:0]
	s.have = false
	if n == 0 {
		return s.out32
	}
	var total float64
	if b.Kind != BiasConstant {
		for c := range n {
			total += b.edge(g, base+uint64(c))
		}
		if !(total > 0) {
			return s.out32
		}
	}
	for t := range k {
		kk := key
		kk.Candidate = uint32(t)
		x := s.word(kk)
		switch b.Kind {
		case BiasConstant:
			s.out32 = append(s.out32, walk.Bounded(x, uint32(n)))
		case BiasEdgeWeight:
			s.out32 = append(s.out32, cdfSearch(WeightCDF(g)[base:base+uint64(n)], x))
		default:
			s.out32 = append(s.out32, pickWeighted(func(i int) float64 { return b.edge(g, base+uint64(i)) }, n, x))
		}
	}
	return s.out32
}

// pickWeighted picks i of n with probability bias(i) / sum by inverse CDF
// of the word x (linear scan; ties to the last positive candidate).
func pickWeighted(bias func(i int) float64, n int, x uint32) uint32 {
	var total float64
	for i := range n {
		total += bias(i)
	}
	target := float64(x) / (1 << 32) * total
	last := uint32(0)
	var cum float64
	for i := range n {
		w := bias(i)
		if !(w > 0) {
			continue
		}
		last = uint32(i)
		cum += w
		if target < cum {
			return uint32(i)
		}
	}
	return last
}

func mul64(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }
