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
		dv := &DeltaVertex{BaseWeight: float64(v), MaxWeight: float32(v % 7), Live: uint32(v % 5)}
		for range rng.IntN(3) {
			dv.SetEdges(append(dv.Edges(), DeltaEdge{Target: uint32(rng.IntN(n)), Weight: 1}))
		}
		if rng.IntN(2) == 0 {
			dv.SetDead([]Tombstone{{Target: uint32(v)}})
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
	if !slices.Equal(got.words, want.words) || !slices.Equal(got.heads, want.heads) {
		t.Fatalf("spans: %d deltas, the one-pass build %d; marks, ranks, deltas or heads differ", got.Len(), want.Len())
	}
	for v := range uint32(n) {
		if !sameDelta(got.Vertex(v), dvs[v]) {
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
		dv := &DeltaVertex{BaseWeight: float64(rng.IntN(100)), MaxWeight: float32(rng.IntN(9)), Live: uint32(rng.IntN(4))}
		for range rng.IntN(3) {
			dv.SetEdges(append(dv.Edges(), DeltaEdge{Target: uint32(rng.IntN(n)), Weight: 1}))
		}
		if rng.IntN(2) == 0 {
			dv.SetDead([]Tombstone{{Target: uint32(v), Upto: uint32(rng.IntN(4))}})
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
			if got.Has(v) != want.Has(v) || (k < 0) != (kw < 0) || !sameDelta(got.Vertex(v), want.Vertex(v)) {
				t.Fatalf("step %d vertex %d: has %v rank %d delta %p, a whole build %v %d %p", step, v, got.Has(v), k, got.Vertex(v), want.Has(v), kw, want.Vertex(v))
			}
			if (got.Marks(int(v>>6))>>(v&63)&1 != 0) != got.Has(v) {
				t.Fatalf("step %d vertex %d: Marks says %v, Has %v", step, v, !got.Has(v), got.Has(v))
			}
			if k >= 0 && (*got.Head(k) != *want.Head(kw) || got.At(k) != got.Head(k)) {
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
		pend, length := x.Preview(changes)
		uf := x.UpdateFold(n, changes)
		x = x.Update(n, changes)
		if x.Pending() != pend || x.Len() != length {
			t.Fatalf("step %d: Preview said %d pending of %d, Update made %d of %d", step, pend, length, x.Pending(), x.Len())
		}
		if f := x.Fold(); !slices.Equal(uf.words, f.words) || !slices.Equal(uf.heads, f.heads) || uf.Pending() != 0 || uf.Len() != f.Len() {
			t.Fatalf("step %d: UpdateFold's index differs from Update's folded", step)
		}
		if step%9 == 8 || steps < 20 && step%4 == 3 {
			x = x.Fold()
			if want := build(); !slices.Equal(x.words, want.words) || !slices.Equal(x.heads, want.heads) || x.Pending() != 0 {
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
				if k >= f.Len() || !sameDelta(f.At(k), x.Vertex(v)) {
					t.Fatalf("step %d vertex %d: the flat rank %d does not name its delta", step, v, k)
				}
			}
		}
		if !slices.Equal(prevWords, prev.words) {
			t.Fatalf("step %d: Update or UpdateFold changed the index it started from", step)
		}
	}
}

// SideThreshold agrees bit for bit with the test the overlay walkers make
// (x takes the base side when float64(x) * 2^-32 * (wb+wd) < wb): every x
// below it takes the base side and none at or above it, checked at the
// boundary and at random draws, for sides of every proportion, empty ones
// included.
func TestSideThresholdIsTheWalkersTest(t *testing.T) {
	base := func(x uint64, wb, wd float64) bool { return float64(uint32(x))*(1.0/(1<<32))*(wb+wd) < wb }
	rng := rand.New(rand.NewPCG(5, 6))
	cases := [][2]float64{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {3, 1}, {1, 3}, {1e-30, 1}, {1, 1e-30}, {7, 3 * 4.5}, {1 << 40, 1}, {1, 1 << 40}}
	for range 2000 {
		cases = append(cases, [2]float64{float64(rng.IntN(1000)), float64(rng.IntN(100)) * float64(float32(rng.Float64()*4))})
		cases = append(cases, [2]float64{rng.Float64() * 1e6, rng.Float64() * 1e5})
	}
	for _, c := range cases {
		wb, wd := c[0], c[1]
		th := SideThreshold(wb, wd)
		if th > 1<<32 {
			t.Fatalf("wb %g wd %g: threshold %d above 2^32", wb, wd, th)
		}
		if th > 0 && !base(th-1, wb, wd) || th < 1<<32 && base(th, wb, wd) {
			t.Fatalf("wb %g wd %g: threshold %d is not the boundary of the walkers' test", wb, wd, th)
		}
		for range 20 {
			x := uint64(rng.Uint32())
			if (x < th) != base(x, wb, wd) {
				t.Fatalf("wb %g wd %g: draw %d: below the threshold %d %v, the walkers' test %v", wb, wd, x, th, x < th, base(x, wb, wd))
			}
		}
	}
}

// An index's side words say what its heads say: a vertex without a delta
// takes the base side at every draw but the cap and has no tombstone bit;
// one with a delta has its sides' threshold (0 without a live edge), by
// weight or, for an unweighted walk, by base degree and appended count,
// and a bit for every tombstone's target. Built once per kind and shared.
func TestDeltaIndexSidesMatchHeads(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(7, 8))
	off := make([]uint64, n-40+1) // the last 40 vertices are added ones
	for v := range n - 40 {
		off[v+1] = off[v] + uint64(rng.IntN(6))
	}
	dvs := make([]*DeltaVertex, n)
	for v := range dvs {
		if v < n-40 && rng.IntN(3) == 0 {
			continue
		}
		dv := &DeltaVertex{BaseWeight: float64(off[min(v+1, n-40)]-off[min(v, n-40)]) * 1.5, Live: uint32(rng.IntN(4))}
		for range rng.IntN(4) {
			w := float32(1 + rng.IntN(4))
			dv.SetEdges(append(dv.Edges(), DeltaEdge{Target: uint32(rng.IntN(n)), Weight: w}))
			dv.MaxWeight = max(dv.MaxWeight, w)
		}
		for tg := range uint32(n) {
			if rng.IntN(1000) == 0 {
				dv.SetDead(append(dv.Dead(), Tombstone{Target: tg, Upto: 1}))
			}
		}
		dvs[v] = dv
	}
	x := NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {
		for v, dv := range dvs {
			if dv != nil && !yield(uint32(v), dv) {
				return
			}
		}
	})
	for _, weighted := range []bool{false, true} {
		sides := x.Sides(weighted, off)
		if again := x.Sides(weighted, off); &again[0] != &sides[0] {
			t.Fatalf("weighted %v: a second call built the side words again", weighted)
		}
		if len(sides) < n {
			t.Fatalf("weighted %v: %d side words for %d vertices", weighted, len(sides), n)
		}
		for v, dv := range dvs {
			sw := sides[v]
			if dv == nil {
				if sw != SideThresholdMask {
					t.Fatalf("weighted %v: vertex %d without a delta: side word %#x", weighted, v, sw)
				}
				continue
			}
			var want uint64
			if dv.Live > 0 {
				wb, wd := dv.BaseWeight, float64(len(dv.Edges()))*float64(dv.MaxWeight)
				if !weighted {
					var d uint64
					if v < n-40 {
						d = off[v+1] - off[v]
					}
					wb, wd = float64(d), float64(len(dv.Edges()))
				}
				want = min(SideThreshold(wb, wd), SideThresholdMask)
			}
			if sw&SideThresholdMask != want {
				t.Fatalf("weighted %v: vertex %d: threshold %d, want %d", weighted, v, sw&SideThresholdMask, want)
			}
			for _, ts := range dv.Dead() {
				if sw&SideDead(ts.Target) == 0 {
					t.Fatalf("weighted %v: vertex %d: no bit for the tombstone of %d", weighted, v, ts.Target)
				}
			}
			if len(dv.Dead()) == 0 && sw>>32 != 0 {
				t.Fatalf("weighted %v: vertex %d without tombstones: bits %#x", weighted, v, sw>>32)
			}
		}
	}
	if got, want := x.SidesBytes(), int64(2*8*((n+63)/64*64)); got != want {
		t.Fatalf("SidesBytes %d, want %d", got, want)
	}
}

// BenchmarkDeltaIndexSides builds the side words of an index of 2^22
// vertices (every one with a delta of three appended edges, one in eight
// with a tombstone: a 10% delta at scale 22 reaches nearly every vertex),
// the cost a snapshot's first DeepWalk job pays for each kind (uniform,
// weighted).
func BenchmarkDeltaIndexSides(b *testing.B) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(9, 9))
	off := randomOffsets(rng, n, 64)
	dvs := make([]DeltaVertex, n)
	for v := range dvs {
		dv := &dvs[v]
		dv.SetEdges([]DeltaEdge{{Target: rng.Uint32() % n, Weight: 1}, {Target: rng.Uint32() % n, Weight: 2}, {Target: rng.Uint32() % n, Weight: 3}})
		dv.MaxWeight, dv.BaseWeight, dv.Live = 3, float64(off[v+1]-off[v])*2.5, 3
		if v%8 == 0 {
			dv.SetDead([]Tombstone{{Target: rng.Uint32() % n, Upto: 1}})
		}
	}
	x := NewDeltaIndex(n, func(yield func(uint32, *DeltaVertex) bool) {
		for v := range dvs {
			if !yield(uint32(v), &dvs[v]) {
				return
			}
		}
	})
	for b.Loop() {
		x.sides = [2]*sideSet{new(sideSet), new(sideSet)}
		x.Sides(true, off)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/vertex")
}

// sameDelta says whether a and b are the same delta: both none, or equal
// records (their arrays shared, so equal values are the same delta).
func sameDelta(a, b *DeltaVertex) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestDeltaCap: the capacities step by halves to 16, each a whole Go size
// class of 8-byte edges, then double; an array made at DeltaCap(n) holds
// every count up to it at the same capacity (the applier grows it only
// when full, and the labels behind it stay where Labels looks).
func TestDeltaCap(t *testing.T) {
	want := []int{0, 1, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16, 32, 32}
	for n, c := range want {
		if got := DeltaCap(n); got != c {
			t.Errorf("DeltaCap(%d) = %d, want %d", n, got, c)
		}
	}
	for n := 1; n < 5000; n++ {
		c := DeltaCap(n)
		if c < n || DeltaCap(c) != c || c > 16 && c&(c-1) != 0 || DeltaCap(n-1) > c {
			t.Fatalf("DeltaCap(%d) = %d: not the next capacity at or above %d", n, c, n)
		}
	}
}

// randomOffsets is a CSR's offsets for n vertices of degrees drawn
// uniformly from [0, maxDeg), for the side-word tests and benchmarks.
func randomOffsets(rng *rand.Rand, n, maxDeg int) []uint64 {
	off := make([]uint64, n+1)
	for v := range n {
		off[v+1] = off[v] + uint64(rng.IntN(maxDeg))
	}
	return off
}
