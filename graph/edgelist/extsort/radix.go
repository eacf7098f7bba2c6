package extsort

import (
	"cmp"
	"math/bits"
	"slices"
	"sync/atomic"
)

// KV is a run record's sort key and its position in the run.
type KV struct {
	Key uint64
	Idx uint32
}

// Sorter sorts runs by (src, dst, time, position). When the run's id ranges
// fit a 64-bit key ((src - min src) above (dst - min dst)), it uses a
// stable LSD radix sort of (key, position) pairs: several times faster than
// a comparison sort of 32-byte records, and stability gives the position
// order for free. Wider ranges radix sort by source only and finish each
// source's group with a comparison sort. Its buffers are reused from run to
// run.
type Sorter struct {
	a, b []KV
	Par  int // goroutines a sort may use
}

// Sort returns the sorted order of recs (with their times, by position,
// when timed): order[i] is the index of the i-th record, or order is nil
// when recs itself was sorted in place.
func (rs *Sorter) Sort(recs []Rec, times []int64) []KV {
	n := len(recs)
	if rs.inOrder(recs, times) {
		// Edge lists are often written sorted (exports in CSR order, a
		// database's ordered dump): one cheap pass saves the sort and the
		// spill's random gathers.
		return nil
	}
	if n < 1024 {
		if times != nil {
			slices.SortFunc(recs, cmpTimed(times))
		} else {
			slices.SortFunc(recs, cmpRec)
		}
		return nil
	}
	minS, maxS, minD, maxD := rs.bounds(recs)
	var minT, maxT int64
	if times != nil {
		minT, maxT = slices.Min(times), slices.Max(times)
	}
	dbits := bits.Len64(uint64(maxD) - uint64(minD))
	sbits := bits.Len64(uint64(maxS) - uint64(minS))
	if cap(rs.a) < n {
		rs.a, rs.b = make([]KV, n), make([]KV, n)
	}
	tbits := bits.Len64(uint64(maxT) - uint64(minT))
	if tbits > 0 && sbits+dbits > 64 {
		return rs.sortTimed(recs, []sortField{
			{tbits, func(r *Rec) uint64 { return uint64(times[r.Seq]) - uint64(minT) }},
			{dbits, func(r *Rec) uint64 { return uint64(r.D) - uint64(minD) }},
			{sbits, func(r *Rec) uint64 { return uint64(r.S) - uint64(minS) }},
		})
	}
	a, b := rs.a[:n], rs.b[:n]
	if sbits+dbits <= 64 {
		rs.ForBlocks(n, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				r := &recs[i]
				a[i] = KV{Key: (uint64(r.S)-uint64(minS))<<dbits | (uint64(r.D) - uint64(minD)), Idx: uint32(i)}
			}
		})
		sorted := radixSortKV(a, b, sbits+dbits, rs.Par)
		if tbits > 0 {
			timeTies(recs, times, sorted)
		}
		return sorted
	}
	// Ids too wide for one key (hashed 64-bit ids, say): radix sort by
	// source, then sort each source's group by (target, position). Groups
	// are adjacency lists, mostly short.
	for i := range recs {
		a[i] = KV{Key: uint64(recs[i].S) - uint64(minS), Idx: uint32(i)}
	}
	a = radixSortKV(a, b, sbits, rs.Par)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && a[hi].Key == a[lo].Key {
			hi++
		}
		if hi-lo > 1 {
			g := a[lo:hi]
			for j := range g {
				g[j].Key = uint64(recs[g[j].Idx].D) - uint64(minD)
			}
			slices.SortFunc(g, func(x, y KV) int {
				if x.Key != y.Key {
					return cmp.Compare(x.Key, y.Key)
				}
				return cmp.Compare(x.Idx, y.Idx)
			})
		}
		lo = hi
	}
	return a
}

// timeTies finishes a timed run sorted by (src, dst, position): the
// records of a repeated pair, few in most inputs, are ordered by time
// (then position). Cheaper than a radix sort by time over the whole run.
func timeTies(recs []Rec, times []int64, a []KV) {
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j].Key == a[i].Key {
			j++
		}
		if j-i > 1 {
			slices.SortStableFunc(a[i:j], func(x, y KV) int { return cmp.Compare(times[recs[x.Idx].Seq], times[recs[y.Idx].Seq]) })
		}
		i = j
	}
}

// sortField is one field of a timed run's sort key: its width in bits and
// its value as an offset from the run's smallest.
type sortField struct {
	bits int
	val  func(r *Rec) uint64
}

// sortTimed sorts a timed run by its fields, given from the least
// significant (time, target, source): consecutive fields that fit 64 bits
// share a key, and a stable radix sort per key from the least significant
// key on gives the order of all of them, ties in position order.
func (rs *Sorter) sortTimed(recs []Rec, fields []sortField) []KV {
	n := len(recs)
	a, b := rs.a[:n], rs.b[:n]
	first := true
	for lo := 0; lo < len(fields); {
		hi, kbits := lo, 0
		for hi < len(fields) && (hi == lo || kbits+fields[hi].bits <= 64) {
			kbits += fields[hi].bits
			hi++
		}
		fs := fields[lo:hi]
		rs.ForBlocks(n, func(_, from, to int) {
			for i := from; i < to; i++ {
				idx := uint32(i)
				if !first {
					idx = a[i].Idx
				}
				var key uint64
				shift := 0
				for _, f := range fs {
					key |= f.val(&recs[idx]) << shift
					shift += f.bits
				}
				a[i] = KV{Key: key, Idx: idx}
			}
		})
		if got := radixSortKV(a, b, kbits, rs.Par); &got[0] != &a[0] {
			a, b = b, a
		}
		first, lo = false, hi
	}
	return a
}

// bounds returns the smallest and largest source and target of recs,
// which is not empty.
func (rs *Sorter) bounds(recs []Rec) (minS, maxS, minD, maxD int64) {
	type box struct{ minS, maxS, minD, maxD int64 }
	r0 := recs[0]
	boxes := make([]box, max(rs.Par, 1))
	for t := range boxes {
		boxes[t] = box{r0.S, r0.S, r0.D, r0.D} // blocks left empty change nothing
	}
	rs.ForBlocks(len(recs), func(t, lo, hi int) {
		x := boxes[t]
		for i := lo; i < hi; i++ {
			r := &recs[i]
			x.minS, x.maxS = min(x.minS, r.S), max(x.maxS, r.S)
			x.minD, x.maxD = min(x.minD, r.D), max(x.maxD, r.D)
		}
		boxes[t] = x
	})
	x := boxes[0]
	for _, y := range boxes[1:] {
		x = box{min(x.minS, y.minS), max(x.maxS, y.maxS), min(x.minD, y.minD), max(x.maxD, y.maxD)}
	}
	return x.minS, x.maxS, x.minD, x.maxD
}

// ForBlocks calls f on consecutive blocks t = [lo, hi) of 0..n, one
// goroutine a block, as many blocks as the sorter may use goroutines (one
// for a small n).
func (rs *Sorter) ForBlocks(n int, f func(t, lo, hi int)) {
	par := rs.Par
	if par < 2 || n < parallelRadixMin {
		par = 1
	}
	span := (n + par - 1) / par
	ParallelFor(par, func(t int) {
		if lo := t * span; lo < n {
			f(t, lo, min(n, lo+span))
		}
	})
}

// inOrder is the package's inOrder checked in blocks on the sorter's
// goroutines: a sorted input (an export) skips the sort, and a serial scan
// of a run would hold the sorter, and with it the decoders, on one core.
func (rs *Sorter) inOrder(recs []Rec, times []int64) bool {
	var unsorted atomic.Bool
	rs.ForBlocks(len(recs), func(_, lo, hi int) {
		// A block also checks the pair across its lower edge.
		if !inOrder(recs[max(lo-1, 0):hi], times) {
			unsorted.Store(true)
		}
	})
	return !unsorted.Load()
}

// inOrder reports whether recs are sorted by (src, dst, time); positions
// rise with the index, so they are then sorted by (src, dst, time,
// position) too.
func inOrder(recs []Rec, times []int64) bool {
	for i := 1; i < len(recs); i++ {
		a, b := &recs[i-1], &recs[i]
		if a.S > b.S || a.S == b.S && a.D > b.D {
			return false
		}
		if times != nil && a.S == b.S && a.D == b.D && times[a.Seq] > times[b.Seq] {
			return false
		}
	}
	return true
}

// radixDigit is the bits sorted per pass: 2048 buckets of counts fit the
// L1 cache and 2048 output streams still write-combine well.
const radixDigit = 11

// parallelRadixMin is the fewest records worth splitting a sort or a spill
// over several goroutines.
const parallelRadixMin = 1 << 16

// radixSortKV stably sorts a by the low kbits of key, using b as scratch
// and up to par goroutines; it returns whichever of the two holds the
// result.
//
// A run is far larger than the caches, so every pass over it is a trip to
// memory. Only the first pass goes over the whole run: it scatters by the
// top digit into buckets, most of which fit the L2 cache, and each bucket
// is then sorted on the remaining bits where it lies (by independent
// goroutines). Both steps are stable, so the whole sort is.
func radixSortKV(a, b []KV, kbits, par int) []KV {
	n := len(a)
	if par < 2 || n < parallelRadixMin {
		par = 1
	}
	if kbits <= 2*radixDigit {
		return lsdSortKV(a, b, 0, kbits, par)
	}
	low := kbits - radixDigit
	counts := digitCounts(a, low, par)
	scatter(a, b, low, counts, par)
	// counts[0] now holds where each bucket starts.
	starts := counts[0]
	var next atomic.Int64
	ParallelFor(par, func(int) {
		for d := int(next.Add(1) - 1); d < len(starts); d = int(next.Add(1) - 1) {
			lo, hi := starts[d], n
			if d+1 < len(starts) {
				hi = starts[d+1]
			}
			if hi-lo < 2 {
				continue
			}
			var got []KV
			if hi-lo <= bucketInCache {
				got = sortBucket(b[lo:hi], a[lo:hi], low)
			} else {
				got = lsdSortKV(b[lo:hi], a[lo:hi], 0, low, 1) // a hub's bucket
			}
			if &got[0] != &b[lo] {
				copy(b[lo:hi], got)
			}
		}
	})
	return b
}

// lsdSortKV stably sorts a by bits from..to of key, one digit per pass from
// the lowest, using b as scratch and up to par goroutines; it returns
// whichever of the two holds the result. Passes where every key has the
// same digit are skipped.
func lsdSortKV(a, b []KV, from, to, par int) []KV {
	n := len(a)
	for shift := from; shift < to; shift += radixDigit {
		counts := digitCounts(a, shift, par)
		first, same := (a[0].Key>>shift)&(radixBuckets-1), 0
		for t := range counts {
			same += counts[t][first]
		}
		if same == n {
			continue // every key has the same digit here
		}
		scatter(a, b, shift, counts, par)
		a, b = b, a
	}
	return a
}

// radixBuckets is the number of distinct digits.
const radixBuckets = 1 << radixDigit

// radixBlock returns block t of par consecutive blocks of a.
func radixBlock(a []KV, t, par int) []KV {
	span := (len(a) + par - 1) / par
	return a[min(len(a), t*span):min(len(a), (t+1)*span)]
}

// digitCounts counts the digits at shift in each of par blocks of a.
func digitCounts(a []KV, shift, par int) [][radixBuckets]int {
	counts := make([][radixBuckets]int, par)
	ParallelFor(par, func(t int) {
		c := &counts[t]
		for _, x := range radixBlock(a, t, par) {
			c[(x.Key>>shift)&(radixBuckets-1)]++
		}
	})
	return counts
}

// scatter stably moves a into b by the digit at shift, given each block's
// digit counts: block t's records go after those of blocks 0..t-1 with the
// same digit. On return counts[t][d] is where block t's records with digit
// d start, so counts[0][d] is where digit d starts.
func scatter(a, b []KV, shift int, counts [][radixBuckets]int, par int) {
	sum := 0
	for d := range radixBuckets {
		for t := range counts {
			counts[t][d], sum = sum, sum+counts[t][d]
		}
	}
	ParallelFor(par, func(t int) {
		c := counts[t] // a copy, so counts keeps the starts
		for _, x := range radixBlock(a, t, par) {
			d := (x.Key >> shift) & (radixBuckets - 1)
			b[c[d]] = x
			c[d]++
		}
	})
}

// bucketInCache is the most records (16 bytes each, twice over with the
// scratch) that sortBucket takes: about what a core's L2 cache holds.
const bucketInCache = 32 << 10

// sortBucket stably sorts a, small enough to stay in cache, by the low
// bits of key with digits of bucketDigit bits, using b as scratch; it
// returns whichever of the two holds the result.
func sortBucket(a, b []KV, bits int) []KV {
	const buckets = 1 << bucketDigit
	var c [buckets]int
	for shift := 0; shift < bits; shift += bucketDigit {
		c = [buckets]int{}
		for _, x := range a {
			c[(x.Key>>shift)&(buckets-1)]++
		}
		if c[(a[0].Key>>shift)&(buckets-1)] == len(a) {
			continue // every key has the same digit here
		}
		sum := 0
		for d := range c {
			c[d], sum = sum, sum+c[d]
		}
		for _, x := range a {
			d := (x.Key >> shift) & (buckets - 1)
			b[c[d]] = x
			c[d]++
		}
		a, b = b, a
	}
	return a
}

// bucketDigit is sortBucket's digit: 8 KB of counts beside a bucket in
// cache, and three passes for the 29 bits left of a 40-bit key.
const bucketDigit = 10

// at returns the i-th record in sorted order.
func at(recs []Rec, order []KV, i int) *Rec {
	if order == nil {
		return &recs[i]
	}
	return &recs[order[i].Idx]
}

// RunIDs is the package's runIDs with the run's targets radix sorted on the
// sorter's goroutines (its buffers are free once the run is encoded): a
// comparison sort of a directed run's targets on the sorter's one
// goroutine held the whole import, decoders included, at about 2 M edges/s.
func (rs *Sorter) RunIDs(srcs []int64, recs []Rec, dropped []int64, undirected bool) []int64 {
	n := len(dropped)
	if !undirected {
		n += len(recs)
	}
	if n < parallelRadixMin || undirected && len(dropped) == 0 {
		return runIDs(srcs, recs, dropped, undirected)
	}
	// Keys are the ids' offsets from the smallest: targets, then the
	// dropped self-loops' ids.
	id := func(i int) int64 {
		if i < len(dropped) {
			return dropped[i]
		}
		return recs[i-len(dropped)].D
	}
	if undirected {
		id = func(i int) int64 { return dropped[i] }
	}
	lo, hi := id(0), id(0)
	boxes := make([][2]int64, max(rs.Par, 1))
	for t := range boxes {
		boxes[t] = [2]int64{lo, hi}
	}
	rs.ForBlocks(n, func(t, from, to int) {
		x := boxes[t]
		for i := from; i < to; i++ {
			v := id(i)
			x[0], x[1] = min(x[0], v), max(x[1], v)
		}
		boxes[t] = x
	})
	for _, x := range boxes {
		lo, hi = min(lo, x[0]), max(hi, x[1])
	}
	if cap(rs.a) < n {
		rs.a, rs.b = make([]KV, n), make([]KV, n)
	}
	a, b := rs.a[:n], rs.b[:n]
	rs.ForBlocks(n, func(_, from, to int) {
		for i := from; i < to; i++ {
			a[i] = KV{Key: uint64(id(i)) - uint64(lo)}
		}
	})
	sorted := radixSortKV(a, b, bits.Len64(uint64(hi)-uint64(lo)), rs.Par)
	// Merge the sorted, distinct sources with the sorted keys, dropping
	// repeats.
	out := make([]int64, 0, len(srcs)+n/2)
	i := 0
	for k := range sorted {
		v := int64(sorted[k].Key + uint64(lo))
		if k > 0 && sorted[k-1].Key == sorted[k].Key {
			continue
		}
		for i < len(srcs) && srcs[i] < v {
			out = append(out, srcs[i])
			i++
		}
		if i < len(srcs) && srcs[i] == v {
			i++
		}
		out = append(out, v)
	}
	return append(out, srcs[i:]...)
}
