package walk

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// The parallel build by spans gives the index the one-pass build gives:
// the same marks, ranks, deltas and heads, for spans that end inside the
// vertex range and spans with no delta.
func TestDeltaIndexSpansMatches(t *testing.T) {
	const n, span = 5000, 1024
	rng := rand.New(rand.NewPCG(1, 2))
	dvs := make([]*DeltaVertex, n)
	for v := range dvs {
		if v >= 2048 && v < 3072 || rng.IntN(3) != 0 {
			continue // span 2 has none
		}
		dv := &DeltaVertex{BaseWeight: float64(v), MaxWeight: float32(v % 7), Live: v % 5}
		for range rng.IntN(3) {
			dv.Edges = append(dv.Edges, DeltaEdge{Target: uint32(rng.IntN(n)), Weight: 1})
		}
		if rng.IntN(2) == 0 {
			dv.Dead = []Tombstone{{Target: uint32(v)}}
		}
		dvs[v] = dv
	}
	list := func(lo, hi int, yield func(uint32, *DeltaVertex) bool) {
		for v := lo; v < hi; v++ {
			if dvs[v] != nil && !yield(uint32(v), dvs[v]) {
				return
			}
		}
	}
	want := NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) { list(0, n, yield) })
	got := NewDeltaIndexSpans(n, span, func(i int) int {
		c := 0
		list(i*span, min(n, (i+1)*span), func(uint32, *DeltaVertex) bool { c++; return true })
		return c
	}, func(i int, yield func(uint32, *DeltaVertex) bool) { list(i*span, min(n, (i+1)*span), yield) })
	if !slices.Equal(got.words, want.words) || !slices.Equal(got.dvs, want.dvs) ||
		!slices.Equal(got.heads, want.heads) {
		t.Fatalf("spans: %d deltas, the one-pass build %d; marks, ranks, deltas or heads differ", got.Len(), want.Len())
	}
	for v := range uint32(n) {
		if got.Vertex(v) != dvs[v] {
			t.Fatalf("vertex %d: %p, want %p", v, got.Vertex(v), dvs[v])
		}
	}
}

// An index kept by Update from snapshot to snapshot, folded now and then,
// answers as a whole build of each snapshot's deltas does (every vertex's
// mark, delta, head, the count), and a fold gives the whole build's arrays
// exactly. The snapshots grow (added vertices), change deltas already in
// the patch or the base level, and add new ones; x is checked unchanged
// after the next index is made from it, as its walkers still read it.
// The larger graph spans several of Update's and Fold's chunks.
func TestDeltaIndexUpdateMatchesBuild(t *testing.T) {
	for _, tc := range []struct{ n, steps int }{{3000, 60}, {150_000, 12}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) { testDeltaIndexUpdate(t, tc.n, tc.steps) })
	}
}

func testDeltaIndexUpdate(t *testing.T, n, steps int) {
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	dvs := make([]*DeltaVertex, n)
	newDV := func(v int) *DeltaVertex {
		dv := &DeltaVertex{BaseWeight: float64(rng.IntN(100)), MaxWeight: float32(rng.IntN(9)), Live: rng.IntN(4)}
		for range rng.IntN(3) {
			dv.Edges = append(dv.Edges, DeltaEdge{Target: uint32(rng.IntN(n)), Weight: 1})
		}
		if rng.IntN(2) == 0 {
			dv.Dead = []Tombstone{{Target: uint32(v), Upto: uint32(rng.IntN(4))}}
		}
		return dv
	}
	build := func() *DeltaIndex {
		return NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {
			for v, dv := range dvs {
				if dv != nil && !yield(uint32(v), dv) {
					return
				}
			}
		})
	}
	check := func(step int, got *DeltaIndex) {
		t.Helper()
		want := build()
		if got.Len() != want.Len() {
			t.Fatalf("step %d: %d deltas, a whole build %d", step, got.Len(), want.Len())
		}
		for v := range uint32(n + 200) {
			k, kw := got.Rank(v), want.Rank(v)
			if got.Has(v) != want.Has(v) || (k < 0) != (kw < 0) || got.Vertex(v) != want.Vertex(v) {
				t.Fatalf("step %d vertex %d: has %v rank %d delta %p, a whole build %v %d %p", step, v, got.Has(v), k, got.Vertex(v), want.Has(v), kw, want.Vertex(v))
			}
			if (got.Marks(int(v>>6))>>(v&63)&1 != 0) != got.Has(v) {
				t.Fatalf("step %d vertex %d: Marks says %v, Has %v", step, v, !got.Has(v), got.Has(v))
			}
			if k >= 0 && (*got.Head(k) != *want.Head(kw) || got.At(k) != want.At(kw)) {
				t.Fatalf("step %d vertex %d: head %+v, a whole build %+v", step, v, *got.Head(k), *want.Head(kw))
			}
			if int(v) < n {
				if has, kl := got.Lookup(v); has != uint64(max(0, min(1, k+1))) || has == 1 && kl != k {
					t.Fatalf("step %d vertex %d: Lookup %d %d, Rank %d", step, v, has, kl, k)
				}
			}
			if k >= 0 && got.HeadAddr(k) != uint64(uintptr(unsafe.Pointer(got.Head(k)))) {
				t.Fatalf("step %d vertex %d: HeadAddr(%d) is not Head's address", step, v, k)
			}
		}
	}
	x := build()
	for step := range steps {
		prev := *x
		prevWords := slices.Clone(x.words)
		if step%7 == 3 {
			n += rng.IntN(130) // added vertices, some past a word
			dvs = append(dvs, make([]*DeltaVertex, n-len(dvs))...)
		}
		var changes []DeltaChange
		for v := range n {
			// Few changes a step, some on vertices changed before.
			if rng.IntN(40) == 0 || v >= n-3 && step%7 == 3 {
				dvs[v] = newDV(v)
				changes = append(changes, DeltaChange{V: uint32(v), D: dvs[v]})
			}
		}
		x = x.Update(n, changes)
		if step%9 == 8 || steps < 20 && step%4 == 3 {
			x = x.Fold()
			if want := build(); !slices.Equal(x.words, want.words) || !slices.Equal(x.dvs, want.dvs) || !slices.Equal(x.heads, want.heads) || x.Pending() != 0 {
				t.Fatalf("step %d: the folded index differs from a whole build", step)
			}
		}
		check(step, x)
		if f := x.Flat(); f.Pending() != 0 || f.Len() != x.Len() {
			t.Fatalf("step %d: Flat left %d in the patch", step, f.Pending())
		} else if marks, rank := f.Words(); len(marks) != len(f.words) {
			t.Fatalf("step %d: Words gave %d words of %d", step, len(marks), len(f.words))
		} else {
			for v := range uint32(len(marks) * 64) {
				w, b := v/64, v%64
				if marks[w]>>b&1 == 0 {
					continue
				}
				k := int(rank[w]) + bits.OnesCount64(marks[w]&(1<<b-1))
				if k >= f.Len() || f.At(k) != x.Vertex(v) {
					t.Fatalf("step %d vertex %d: the flat rank %d does not name its delta", step, v, k)
				}
			}
		}
		if !slices.Equal(prevWords, prev.words) {
			t.Fatalf("step %d: Update changed the index it started from", step)
		}
	}
}
