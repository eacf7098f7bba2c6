package visits

import "sort"

// visitTable counts visits per vertex: open addressing, linear probing,
// keys stored as vertex+1 (0 is empty), at most half full.
type visitTable struct {
	keys  []uint32
	vals  []int64
	n     int
	shift uint32 // 32 - log2(len(keys)): Fibonacci hashing keeps the product's top bits
}

func (t *visitTable) init(size int) {
	t.keys, t.vals, t.n = make([]uint32, size), make([]int64, size), 0
	t.shift = 32
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
}

func (t *visitTable) hash(v uint32) uint32 { return (v * 0x9E3779B1) >> t.shift }

// add counts one visit of v and returns its count.
func (t *visitTable) add(v uint32) int64 {
	mask := uint32(len(t.keys) - 1)
	key := v + 1
	for h := t.hash(v); ; h = (h + 1) & mask {
		switch t.keys[h] {
		case key:
			t.vals[h]++
			return t.vals[h]
		case 0:
			t.keys[h], t.vals[h] = key, 1
			t.n++
			if 2*t.n > len(t.keys) {
				t.grow()
			}
			return 1
		}
	}
}

func (t *visitTable) grow() {
	keys, vals := t.keys, t.vals
	t.init(2 * len(keys))
	mask := uint32(len(t.keys) - 1)
	for x, key := range keys {
		if key == 0 {
			continue
		}
		h := t.hash(key - 1)
		for t.keys[h] != 0 {
			h = (h + 1) & mask
		}
		t.keys[h], t.vals[h] = key, vals[x]
		t.n++
	}
}

// before orders candidates: more visits first, then the lower vertex id.
func before(a, b Candidate) bool {
	return a.Visits > b.Visits || a.Visits == b.Visits && a.Vertex < b.Vertex
}

// top selects the TopK candidates.
func (t *visitTable) top(p VisitParams, exclude map[uint32]bool) []Candidate {
	return topCandidates(p, exclude, len(t.keys), func(i int) (uint32, int64, bool) {
		return t.keys[i] - 1, t.vals[i], t.keys[i] != 0
	})
}

// topCandidates selects the TopK of n counted entries (at(i): vertex,
// visits, whether entry i is used) with a bounded heap whose root is the
// worst kept, then sorts them.
func topCandidates(p VisitParams, exclude map[uint32]bool, n int, at func(i int) (uint32, int64, bool)) []Candidate {
	h := make([]Candidate, 0, min(p.TopK, 1024))
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && before(h[w], h[l]) {
				w = l
			}
			if r < len(h) && before(h[w], h[r]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := range n {
		v, visits, used := at(i)
		if !used || visits < p.MinVisits || exclude[v] {
			continue
		}
		c := Candidate{Vertex: v, Visits: visits}
		if len(h) < p.TopK {
			h = append(h, c)
			for i := len(h) - 1; i > 0 && before(h[(i-1)/2], h[i]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
			continue
		}
		if before(c, h[0]) {
			h[0] = c
			down(0)
		}
	}
	sort.Slice(h, func(a, b int) bool { return before(h[a], h[b]) })
	return h
}
