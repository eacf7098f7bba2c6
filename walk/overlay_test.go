package walk

import (
	"math/rand/v2"
	"slices"
	"testing"
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
	if !slices.Equal(got.bits, want.bits) || !slices.Equal(got.rank, want.rank) || !slices.Equal(got.dvs, want.dvs) ||
		!slices.Equal(got.heads, want.heads) {
		t.Fatalf("spans: %d deltas, the one-pass build %d; marks, ranks, deltas or heads differ", got.Len(), want.Len())
	}
	for v := range uint32(n) {
		if got.Vertex(v) != dvs[v] {
			t.Fatalf("vertex %d: %p, want %p", v, got.Vertex(v), dvs[v])
		}
	}
}
