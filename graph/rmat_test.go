package graph

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"testing"
)

func TestRMATDeterministicAcrossGOMAXPROCS(t *testing.T) {
	o := RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 42, Undirected: true, Weighted: true, Labels: 3, Name: "r"}
	var ref []byte
	for _, procs := range []int{1, 3, 8} {
		prev := runtime.GOMAXPROCS(procs)
		g, err := GenerateRMAT(context.Background(), o)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		b := savedBytes(t, g)
		if ref == nil {
			ref = b
		} else if !bytes.Equal(ref, b) {
			t.Fatalf("GOMAXPROCS=%d gives a different graph", procs)
		}
	}
	o.Seed = 43
	g, err := GenerateRMAT(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(ref, savedBytes(t, g)) {
		t.Fatal("seeds 42 and 43 give the same graph")
	}
}

func TestRMATShape(t *testing.T) {
	const scale, ef, labels = 14, 16, 5
	for _, undirected := range []bool{false, true} {
		g, err := GenerateRMAT(context.Background(), RMATOptions{Scale: scale, EdgeFactor: ef, Seed: 7, Undirected: undirected, Weighted: true, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		n := 1 << scale
		if g.NumVertices() != n || g.IDs != nil || g.NumLabels != labels {
			t.Fatalf("V=%d ids=%v labels=%d", g.NumVertices(), g.IDs != nil, g.NumLabels)
		}
		limit := int64(ef * n)
		if undirected {
			limit *= 2
		}
		// Duplicates and self-loops go, but most edges of a sparse R-MAT stay.
		if e := g.NumEdges(); e > limit || e < limit/2 {
			t.Fatalf("E=%d, want in (%d, %d]", e, limit/2, limit)
		}
		for v := 0; v < n; v++ {
			adj := g.Neighbors(uint32(v))
			for i, u := range adj {
				if u == uint32(v) {
					t.Fatalf("self-loop at %d", v)
				}
				if i > 0 && adj[i-1] >= u {
					t.Fatalf("duplicate or unsorted edge at %d", v)
				}
				e := g.Offsets[v] + uint64(i)
				if w := g.Weights[e]; w < 1 || w >= 5 {
					t.Fatalf("weight %v outside [1,5)", w)
				}
				if g.Labels[e] >= labels {
					t.Fatalf("label %d >= %d", g.Labels[e], labels)
				}
				if undirected {
					if !g.HasEdge(u, uint32(v)) {
						t.Fatalf("undirected graph lacks %d -> %d", u, v)
					}
					j := g.Offsets[u] + uint64(indexOf(g.Neighbors(u), uint32(v)))
					if g.Weights[j] != g.Weights[e] || g.Labels[j] != g.Labels[e] {
						t.Fatalf("the two directions of {%d,%d} disagree", u, v)
					}
				}
			}
		}
		// Skew: R-MAT's hubs are far above the mean degree.
		maxDeg, hub := g.MaxDegree()
		mean := float64(g.NumEdges()) / float64(n)
		if float64(maxDeg) < 20*mean {
			t.Fatalf("max degree %d is not skewed against mean %.1f", maxDeg, mean)
		}
		// Scrambling: without it vertex 0 is the hub and degree falls with
		// id; with it the two halves of the id space look alike.
		if hub == 0 {
			t.Fatal("vertex 0 is the hub: ids are not scrambled")
		}
		half := g.Offsets[n/2]
		lo, hi := float64(half), float64(g.NumEdges()-int64(half))
		if lo > 2*hi || hi > 2*lo {
			t.Fatalf("edges in low/high id halves %v/%v: degree follows id order", lo, hi)
		}
	}
}

func indexOf(s []uint32, x uint32) int {
	for i, y := range s {
		if y == x {
			return i
		}
	}
	return -1
}

func TestRMATWeightsCoverRange(t *testing.T) {
	g, err := GenerateRMAT(context.Background(), RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 1, Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	var buckets [4]int
	for _, w := range g.Weights {
		buckets[int(w)-1]++
	}
	for i, c := range buckets {
		if want := len(g.Weights) / 4; c < want*9/10 || c > want*11/10 {
			t.Fatalf("weights in [%d,%d): %d of %d, want about a quarter", i+1, i+2, c, len(g.Weights))
		}
	}
}

func TestRMATRejectsBadOptions(t *testing.T) {
	for _, o := range []RMATOptions{
		{Scale: 0, EdgeFactor: 1}, {Scale: 32, EdgeFactor: 1}, {Scale: 4, EdgeFactor: 0},
		{Scale: 4, EdgeFactor: 1, Labels: 257}, {Scale: 4, EdgeFactor: 1, A: 0.9, B: 0.2},
	} {
		if _, err := GenerateRMAT(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestRMATCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GenerateRMAT(ctx, RMATOptions{Scale: 16, EdgeFactor: 16}); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func BenchmarkGenerateRMAT(b *testing.B) {
	for _, scale := range []int{16, 18} {
		b.Run("scale"+string(rune('0'+scale/10))+string(rune('0'+scale%10)), func(b *testing.B) {
			var e int64
			for b.Loop() {
				g, err := GenerateRMAT(context.Background(), RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true})
				if err != nil {
					b.Fatal(err)
				}
				e = g.NumEdges()
			}
			b.ReportMetric(float64(e)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}

// TimeSpan makes a valid timed graph: times in [0, span), the same for
// both directions of an undirected edge, the same for any GOMAXPROCS, and
// a file round trip keeps them.
func TestRMATTimes(t *testing.T) {
	o := RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 5, Undirected: true, Weighted: true, TimeSpan: 1000}
	var ref []byte
	for _, procs := range []int{1, 3} {
		prev := runtime.GOMAXPROCS(procs)
		g, err := GenerateRMAT(context.Background(), o)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		if !g.Timed() {
			t.Fatal("not timed")
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		if lo, hi := g.TimeRange(); lo < 0 || hi >= 1000 || hi-lo < 900 {
			t.Fatalf("time range [%d, %d], want spread over [0, 1000)", lo, hi)
		}
		for u := range uint32(64) {
			for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
				v := g.Targets[e]
				back := g.Offsets[v] + uint64(slices.Index(g.Neighbors(v), u))
				if g.EdgeTime(e) != g.EdgeTime(back) {
					t.Fatalf("edge %d->%d at %d, its reverse at %d", u, v, g.EdgeTime(e), g.EdgeTime(back))
				}
			}
		}
		b := savedBytes(t, g)
		if ref == nil {
			ref = b
		} else if !bytes.Equal(ref, b) {
			t.Fatalf("GOMAXPROCS=%d gives a different graph", procs)
		}
	}
	if _, err := GenerateRMAT(context.Background(), RMATOptions{Scale: 4, EdgeFactor: 2, TimeSpan: -1}); err == nil {
		t.Fatal("negative time span accepted")
	}
}
