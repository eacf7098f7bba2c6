package graph

import (
	"cmp"
	"math/bits"
	"slices"
)

// kv is a run record's sort key and its position in the run.
type kv struct {
	key uint64
	idx uint32
}

// runSorter sorts runs by (src, dst, position). When the run's id ranges
// fit a 64-bit key ((src - min src) above (dst - min dst)), it uses a
// stable LSD radix sort of (key, position) pairs: several times faster than
// a comparison sort of 32-byte records, and stability gives the position
// order for free. Wider ranges radix sort by source only and finish each
// source's group with a comparison sort. Its buffers are reused from run to
// run.
type runSorter struct {
	a, b []kv
}

// sort returns the sorted order of recs: order[i] is the index of the i-th
// record, or order is nil when recs itself was sorted in place.
func (rs *runSorter) sort(recs []rec) []kv {
	n := len(recs)
	if inOrder(recs) {
		// Edge lists are often written sorted (exports in CSR order, a
		// database's ordered dump): one cheap pass saves the sort and the
		// spill's random gathers.
		return nil
	}
	if n < 1024 {
		slices.SortFunc(recs, cmpRec)
		return nil
	}
	minS, maxS, minD, maxD := recs[0].s, recs[0].s, recs[0].d, recs[0].d
	for i := range recs {
		r := &recs[i]
		minS, maxS = min(minS, r.s), max(maxS, r.s)
		minD, maxD = min(minD, r.d), max(maxD, r.d)
	}
	dbits := bits.Len64(uint64(maxD) - uint64(minD))
	sbits := bits.Len64(uint64(maxS) - uint64(minS))
	if cap(rs.a) < n {
		rs.a, rs.b = make([]kv, n), make([]kv, n)
	}
	a, b := rs.a[:n], rs.b[:n]
	if sbits+dbits <= 64 {
		for i := range recs {
			r := &recs[i]
			a[i] = kv{key: (uint64(r.s)-uint64(minS))<<dbits | (uint64(r.d) - uint64(minD)), idx: uint32(i)}
		}
		return radixSortKV(a, b, sbits+dbits)
	}
	// Ids too wide for one key (hashed 64-bit ids, say): radix sort by
	// source, then sort each source's group by (target, position). Groups
	// are adjacency lists, mostly short.
	for i := range recs {
		a[i] = kv{key: uint64(recs[i].s) - uint64(minS), idx: uint32(i)}
	}
	a = radixSortKV(a, b, sbits)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && a[hi].key == a[lo].key {
			hi++
		}
		if hi-lo > 1 {
			g := a[lo:hi]
			for j := range g {
				g[j].key = uint64(recs[g[j].idx].d) - uint64(minD)
			}
			slices.SortFunc(g, func(x, y kv) int {
				if x.key != y.key {
					return cmp.Compare(x.key, y.key)
				}
				return cmp.Compare(x.idx, y.idx)
			})
		}
		lo = hi
	}
	return a
}

// inOrder reports whether recs are sorted by (src, dst); positions rise
// with the index, so they are then sorted by (src, dst, position) too.
func inOrder(recs []rec) bool {
	for i := 1; i < len(recs); i++ {
		a, b := &recs[i-1], &recs[i]
		if a.s > b.s || a.s == b.s && a.d > b.d {
			return false
		}
	}
	return true
}

// radixSortKV stably sorts a by the low kbits of key, using b as scratch;
// it returns whichever of the two holds the result.
func radixSortKV(a, b []kv, kbits int) []kv {
	n := len(a)
	const digit = 11
	const buckets = 1 << digit
	passes := (kbits + digit - 1) / digit
	counts := make([][buckets]int, passes)
	for i := range a {
		k := a[i].key
		for p := 0; p < passes; p++ {
			counts[p][(k>>(p*digit))&(buckets-1)]++
		}
	}
	for p := 0; p < passes; p++ {
		c := &counts[p]
		if slices.Contains(c[:], n) {
			continue // every key has the same digit here
		}
		sum := 0
		for i := range c {
			c[i], sum = sum, sum+c[i]
		}
		shift := p * digit
		for _, x := range a {
			d := (x.key >> shift) & (buckets - 1)
			b[c[d]] = x
			c[d]++
		}
		a, b = b, a
	}
	return a
}

// at returns the i-th record in sorted order.
func at(recs []rec, order []kv, i int) *rec {
	if order == nil {
		return &recs[i]
	}
	return &recs[order[i].idx]
}
