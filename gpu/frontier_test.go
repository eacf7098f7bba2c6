package gpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graphsample"
)

// TestNextFrontier: the parallel frontier step and the layout by instance
// give what a plain loop over the tasks gives: each instance's edges in hop
// then task order (nil for an instance without any), and each hop's next
// frontier with its tasks' instance, slot and vertex. The instances start
// at first (a wave of a batch), their edges at out[0]; a hop's picks come
// packed in task order, as sample_neighbor_targets leaves them.
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
		want := make([][]graphsample.SampledEdge, nInst)
		var hops []hopEdges
		for h := range 3 {
			counts := make([]uint32, len(vert))
			var edges []uint64
			var dsts []uint32
			var wi, ws, wv []uint32
			slot := map[uint32]uint32{}
			for ti, v := range vert {
				counts[ti] = uint32(r.IntN(min(k, g.Degree(v)) + 1))
				for range int(counts[ti]) {
					ed := g.Offsets[v] + uint64(r.IntN(g.Degree(v)))
					u := g.Targets[ed]
					edges, dsts = append(edges, ed), append(dsts, u)
					want[inst[ti]-first] = append(want[inst[ti]-first], graphsample.SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: ed})
					if g.Degree(u) > 0 {
						wi, ws, wv = append(wi, inst[ti]), append(ws, slot[inst[ti]]), append(wv, u)
					}
					slot[inst[ti]]++
				}
			}
			he, gi, gs, gv := nextFrontier(nInst, first, h, inst, vert, counts, edges, dsts)
			hops = append(hops, he)
			// The next hop's tasks: the picks with out-edges (the test's
			// own choice, to keep degrees positive).
			inst, vert = inst[:0:0], vert[:0:0]
			var fi, fs []uint32
			for j := range gi {
				if g.Degree(gv[j]) > 0 {
					inst, vert = append(inst, gi[j]), append(vert, gv[j])
					fi, fs = append(fi, gi[j]), append(fs, gs[j])
				}
			}
			if !slices.Equal(fi, wi) || !slices.Equal(fs, ws) || !slices.Equal(vert, wv) {
				t.Fatalf("%d instances, hop %d: next frontier differs", nInst, h)
			}
		}
		got := instanceEdges(nInst, hops)
		for i := range want {
			if !slices.Equal(got[i], want[i]) || (got[i] == nil) != (want[i] == nil) {
				t.Fatalf("%d instances: instance %d edges differ (%d against %d)", nInst, i, len(got[i]), len(want[i]))
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
