package gpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// TestNextFrontier: the parallel frontier step gives what a plain loop
// over the tasks gives: each instance's edges in task order, and the next
// frontier's tasks with their instance, slot and vertex. The instances
// start at first (a wave of a batch), their edges at out[0].
func TestNextFrontier(t *testing.T) {
	g := placementGraph(t)
	r := rand.New(rand.NewPCG(3, 4))
	const k, first = 5, 7
	for _, nInst := range []int{1, 3, 1000} {
		var inst, vert []uint32
		for i := range nInst {
			for range r.IntN(40) {
				v := uint32(r.IntN(g.NumVertices()))
				if g.Degree(v) == 0 {
					continue
				}
				inst, vert = append(inst, first+uint32(i)), append(vert, v)
			}
		}
		picks, counts := make([]uint32, len(vert)*k), make([]uint32, len(vert))
		for ti, v := range vert {
			counts[ti] = uint32(r.IntN(min(k, g.Degree(v)) + 1))
			for j := range int(counts[ti]) {
				picks[ti*k+j] = uint32(r.IntN(g.Degree(v)))
			}
		}
		got := make([][]walk.SampledEdge, nInst)
		want := make([][]walk.SampledEdge, nInst)
		gi, gs, gv := nextFrontier(g, got, first, 1, k, inst, vert, picks, counts)
		var wi, ws, wv []uint32
		slot := map[uint32]uint32{}
		for ti, v := range vert {
			for _, c := range picks[ti*k : ti*k+int(counts[ti])] {
				ed := g.Offsets[v] + uint64(c)
				u := g.Targets[ed]
				want[inst[ti]-first] = append(want[inst[ti]-first], walk.SampledEdge{Hop: 1, Src: v, Dst: u, Edge: ed})
				wi, ws, wv = append(wi, inst[ti]), append(ws, slot[inst[ti]]), append(wv, u)
				slot[inst[ti]]++
			}
		}
		if !slices.Equal(gi, wi) || !slices.Equal(gs, ws) || !slices.Equal(gv, wv) {
			t.Fatalf("%d instances: next frontier differs", nInst)
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%d instances: instance %d edges differ", nInst, i)
			}
		}
	}
}

func TestInstanceRanges(t *testing.T) {
	inst := []uint32{0, 0, 0, 1, 2, 2, 2, 2, 3, 4, 4}
	for parts := 1; parts < 15; parts++ {
		rs := instanceRanges(inst, parts)
		at := 0
		for _, rg := range rs {
			if rg[0] != at || rg[1] <= rg[0] || (rg[1] < len(inst) && inst[rg[1]] == inst[rg[1]-1]) {
				t.Fatalf("parts %d: ranges %v", parts, rs)
			}
			at = rg[1]
		}
		if at != len(inst) {
			t.Fatalf("parts %d: ranges %v end at %d", parts, rs, at)
		}
	}
	if rs := instanceRanges(nil, 4); len(rs) != 0 {
		t.Fatalf("no tasks: %v", rs)
	}
}
