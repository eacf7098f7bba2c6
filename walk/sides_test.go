package walk

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Side words made from an older index's (Sides on an index of Update or
// UpdateFold, sideFrom) equal a whole build's, after random sequences of
// updates: indexes walked (their words asked for) at random, some kinds
// never, several asked at once from goroutines, chains longer than
// maxSideChain and past a quarter of the vertices, added vertices past a
// word, folds, and a new base's offsets (a rebase, and new offsets under
// an index made by Update), under which words are not patched. An index whose words are copied keeps its own.
func TestSidesFromOlderMatchWholeBuild(t *testing.T) {
	for _, tc := range []struct {
		n, steps, perStep int
		seed              uint64
	}{{3000, 80, 60, 1}, {3000, 40, 900, 2}, {70_000, 25, 3000, 3}} {
		t.Run(fmt.Sprint(tc.n, "/", tc.perStep), func(t *testing.T) { testSidesFromOlder(t, tc.n, tc.steps, tc.perStep, tc.seed) })
	}
}

func testSidesFromOlder(t *testing.T, n, steps, perStep int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	baseV := n - 50 // the last vertices are added ones
	newOff := func() []uint64 {
		off := make([]uint64, baseV+1)
		for v := range baseV {
			off[v+1] = off[v] + uint64(rng.IntN(8))
		}
		return off
	}
	off := newOff()
	dvs := make([]*DeltaVertex, n)
	newDV := func(v int) *DeltaVertex {
		dv := &DeltaVertex{BaseWeight: float64(rng.IntN(40)) * 0.75, Live: uint32(rng.IntN(4))}
		for range rng.IntN(4) {
			w := float32(1 + rng.IntN(4))
			dv.SetEdges(append(dv.Edges(), DeltaEdge{Target: uint32(rng.IntN(n)), Weight: w}))
			dv.MaxWeight = max(dv.MaxWeight, w)
		}
		if rng.IntN(3) == 0 {
			dv.SetDead([]Tombstone{{Target: uint32(rng.IntN(n)), Upto: 1}})
		}
		return dv
	}
	for v := range dvs {
		if rng.IntN(4) == 0 {
			dvs[v] = newDV(v)
		}
	}
	whole := func() *DeltaIndex {
		return NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {
			for v, dv := range dvs {
				if dv != nil && !yield(uint32(v), dv) {
					return
				}
			}
		})
	}
	type kept struct {
		x     *DeltaIndex
		off   []uint64
		words [2][]uint64 // a whole build's, at the step it was made
	}
	check := func(step int, k kept) {
		t.Helper()
		for kind, weighted := range []bool{false, true} {
			got := k.x.Sides(weighted, k.off)
			if !slices.Equal(got, k.words[kind]) {
				for v := range got {
					if got[v] != k.words[kind][v] {
						t.Fatalf("step %d, weighted %v: vertex %d's side word %#x, a whole build's %#x", step, weighted, v, got[v], k.words[kind][v])
					}
				}
				t.Fatalf("step %d, weighted %v: %d side words, a whole build's %d", step, weighted, len(got), len(k.words[kind]))
			}
		}
	}
	x := whole()
	var all []kept
	for step := range steps {
		if step%11 == 5 {
			n += rng.IntN(130)
			dvs = append(dvs, make([]*DeltaVertex, n-len(dvs))...)
		}
		switch {
		case step%17 == 16:
			// A rebase: a new base's offsets, the index made whole.
			off = newOff()
			x = whole()
		case step%17 == 8:
			// New offsets under an index made by Update (no caller does
			// this; the words must not be patched across it all the same).
			off = newOff()
			fallthrough
		default:
			var changes []DeltaChange
			for range perStep {
				v := rng.IntN(n)
				if step%11 == 5 && rng.IntN(2) == 0 {
					v = n - 1 - rng.IntN(3) // an added vertex
				}
				dvs[v] = newDV(v)
				changes = append(changes, DeltaChange{V: uint32(v), D: dvs[v]})
			}
			slices.SortFunc(changes, func(a, b DeltaChange) int { return cmpU32(a.V, b.V) })
			changes = slices.CompactFunc(changes, func(a, b DeltaChange) bool { return a.V == b.V })
			for i := range changes {
				changes[i].D = dvs[changes[i].V]
			}
			if rng.IntN(4) == 0 {
				x = x.UpdateFold(n, changes)
			} else {
				x = x.Update(n, changes)
			}
			clear(changes) // the live graph reuses its list
		}
		w := whole()
		k := kept{x: x, off: off}
		k.words[0] = slices.Clone(w.Sides(false, off))
		k.words[1] = slices.Clone(w.Sides(true, off))
		all = append(all, k)
		// Walked at random: the weighted kind most steps, the unweighted
		// one now and then, some snapshots never; several at once.
		switch r := rng.IntN(6); {
		case r < 3:
			x.Sides(true, off)
		case r == 3:
			x.Sides(false, off)
		case r == 4 && len(all) >= 3:
			var wg sync.WaitGroup
			for _, o := range all[len(all)-3:] {
				wg.Go(func() { o.x.Sides(true, o.off); o.x.Sides(false, o.off) })
			}
			wg.Wait()
		}
	}
	// Every index, in random order, as walkers of old snapshots ask late.
	for _, i := range rng.Perm(len(all)) {
		check(i, all[i])
	}
}

// BenchmarkDeltaIndexSidesPatched makes the side words of an index of
// 2^22 vertices (every one with a delta, as BenchmarkDeltaIndexSides) from
// the last index's after changes to 2^16 or 2^18 of them: what a walked
// snapshot of a live graph publishing 10-20 times a second pays, against
// the whole build's ns/vertex.
func BenchmarkDeltaIndexSidesPatched(b *testing.B) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(9, 9))
	off := randomOffsets(rng, n, 64)
	mk := func() DeltaVertex {
		var dv DeltaVertex
		dv.SetEdges([]DeltaEdge{{Target: rng.Uint32() % n, Weight: 1}, {Target: rng.Uint32() % n, Weight: 2}, {Target: rng.Uint32() % n, Weight: 3}})
		dv.MaxWeight, dv.BaseWeight, dv.Live = 3, float64(rng.IntN(64))*2.5, 3
		return dv
	}
	dvs := make([]DeltaVertex, n)
	for v := range dvs {
		dvs[v] = mk()
	}
	x := NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {
		for v := range dvs {
			if !yield(uint32(v), &dvs[v]) {
				return
			}
		}
	})
	for _, changed := range []int{1 << 16, 1 << 18} {
		b.Run(fmt.Sprint("changed=", changed), func(b *testing.B) {
			x.Sides(true, off)
			var changes []DeltaChange
			for _, v := range rng.Perm(n)[:changed] {
				dv := mk()
				changes = append(changes, DeltaChange{V: uint32(v), D: &dv})
			}
			slices.SortFunc(changes, func(a, b DeltaChange) int { return cmpU32(a.V, b.V) })
			var took time.Duration
			for b.Loop() {
				y := x.Update(n, changes)
				t0 := time.Now()
				y.Sides(true, off)
				took += time.Since(t0)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N)/n, "ns/vertex")
		})
	}
}

// A chain of indexes whose weighted side words are built at every step
// and whose unweighted ones never are keeps no old weighted words alive:
// an index's link to an older one's unweighted set (kept until the chain
// is cut) must not hold the older one's weighted words, nor a built set's
// link its older words.
func TestSidesChainKeepsNoOldWords(t *testing.T) {
	const n, steps = 1 << 14, 40
	rng := rand.New(rand.NewPCG(4, 4))
	off := randomOffsets(rng, n, 8)
	dvs := make([]DeltaVertex, n)
	x := NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {})
	var freed atomic.Int64
	for range steps {
		var changes []DeltaChange
		for _, v := range rng.Perm(n)[:64] {
			dvs[v] = DeltaVertex{BaseWeight: 1, Live: 1}
			changes = append(changes, DeltaChange{V: uint32(v), D: &dvs[v]})
		}
		slices.SortFunc(changes, func(a, b DeltaChange) int { return cmpU32(a.V, b.V) })
		x = x.Update(n, changes)
		words := x.Sides(true, off)
		runtime.AddCleanup(&words[0], func(int) { freed.Add(1) }, 0)
	}
	for range 100 {
		runtime.GC()
		if freed.Load() >= steps-1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := freed.Load(); got < steps-1 {
		t.Fatalf("%d of the %d older indexes' weighted side words were collected, want all", got, steps-1)
	}
	runtime.KeepAlive(x)
}
