package walk

import (
	"slices"
	"sync"
	"sync/atomic"
)

// AppendedScan is the most appended edges HasAppended scans (a few cache
// lines, read in order); a vertex with more is looked up in its sorted
// copy.
const AppendedScan = 32

// appendedSets holds, per vertex with more than AppendedScan appended
// edges that a walk asked about, their targets sorted, each with the
// largest index among its copies: target<<32 | index, by the vertex's rank
// in the index. Made vertex by vertex as walks ask (HasAppended) and kept
// with the index, so every job on the snapshot shares them.
//
// Why: Node2Vec's step asks whether the previous vertex has a live edge to
// the proposal, and that vertex is most often a hub, which on a live
// graph collects most of the inserts: at scale 22 with a 10% delta a hub
// holds hundreds of thousands of appended edges, and a scan of them on
// every acceptance test walked the delta on the GPU at 3% of the base's
// rate (docs/benchmarks/live-graph.md, "Node2Vec on a delta on the GPU").
// A copy below a tombstone's upto is dead, so a vertex has a live copy of
// a target when its newest copy is live: one index a target is enough.
type appendedSets struct {
	once sync.Once
	sets []atomic.Pointer[[]uint64]
}

// HasAppended reports whether the vertex at rank k of x (Rank) has a live
// appended edge to v (an appended copy no tombstone of it kills).
func (x *DeltaIndex) HasAppended(k int, v uint32) bool {
	d := x.At(k)
	e := d.Edges()
	if len(e) <= AppendedScan || x.appended == nil {
		for i := range e {
			if e[i].Target == v && !d.DeltaDeadTarget(uint32(i), v) {
				return true
			}
		}
		return false
	}
	set := x.appendedSet(k, e)
	lo, hi := 0, len(set)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint32(set[m]>>32) < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(set) || uint32(set[lo]>>32) != v {
		return false
	}
	return !d.DeltaDeadTarget(uint32(set[lo]), v)
}

// appendedSet is the sorted targets of appended edges e of the vertex at
// rank k, with their newest copies' indexes, made on the first ask (two
// goroutines asking at once may both make it; one is kept).
func (x *DeltaIndex) appendedSet(k int, e []DeltaEdge) []uint64 {
	a := x.appended
	a.once.Do(func() { a.sets = make([]atomic.Pointer[[]uint64], len(x.heads)+len(x.pheads)) }) // every rank At takes
	if s := a.sets[k].Load(); s != nil {
		return *s
	}
	keys := make([]uint64, len(e))
	for i := range e {
		keys[i] = uint64(e[i].Target)<<32 | uint64(i)
	}
	slices.Sort(keys)
	out := keys[:0]
	for j, key := range keys {
		if j+1 < len(keys) && keys[j+1]>>32 == key>>32 {
			continue // an older copy: the newest decides
		}
		out = append(out, key)
	}
	out = slices.Clip(out)
	if !a.sets[k].CompareAndSwap(nil, &out) {
		return *a.sets[k].Load()
	}
	return out
}
