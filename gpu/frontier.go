package gpu

import (
	"runtime"
	"sync"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// DeviceSamples says whether the device kernels sample p: neighbour
// sampling without replacement, layer sampling, forest fire, snowball and
// the frontier walk, unbiased or by edge weight. (An engine also needs the
// whole graph in its device's memory: Engine.SamplesOnDevice.)
func DeviceSamples(p walk.SampleParams) bool {
	switch p.Kind {
	case walk.NeighborSampling:
		if p.Replace {
			return false
		}
	case walk.LayerSampling, walk.ForestFire, walk.Snowball, walk.FrontierWalk:
	default:
		return false
	}
	return p.EdgeBias.Kind == walk.BiasConstant || p.EdgeBias.Kind == walk.BiasEdgeWeight
}

// nextFrontier appends hop h's sampled edges to out, by instance (instance
// i at out[i-first]), and
// returns the next frontier's tasks: every pick's target, in task order
// (instance, then slot), its slot its position in the instance's frontier.
// Tasks come in instance order, so the work is cut at instance boundaries
// into one range per core: each range owns its instances' outputs, and its
// share of the next frontier starts at the sum of the counts before it.
// (One goroutine with a map of slots held the whole call to about 4 M
// sampled edges/s behind kernels a thousand times faster.)
func nextFrontier(g *graph.Graph, out [][]walk.SampledEdge, first uint32, h, k int, inst, vert, picks, counts []uint32) (ninst, nslot, nvert []uint32) {
	ranges := instanceRanges(inst, runtime.GOMAXPROCS(0)*4)
	starts := make([]int, len(ranges)+1)
	for r, rg := range ranges {
		n := 0
		for _, c := range counts[rg[0]:rg[1]] {
			n += int(c)
		}
		starts[r+1] = starts[r] + n
	}
	total := starts[len(ranges)]
	ninst, nslot, nvert = make([]uint32, total), make([]uint32, total), make([]uint32, total)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for r, rg := range ranges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			at, slotIn, prev := starts[r], uint32(0), ^uint32(0)
			for t := rg[0]; t < rg[1]; t++ {
				v, i := vert[t], inst[t]
				if i != prev {
					slotIn, prev = 0, i
				}
				base := g.Offsets[v]
				for _, c := range picks[t*k : t*k+int(counts[t])] {
					ed := base + uint64(c)
					u := g.Targets[ed]
					out[i-first] = append(out[i-first], walk.SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: ed})
					ninst[at], nslot[at], nvert[at] = i, slotIn, u
					at++
					slotIn++
				}
			}
		}()
	}
	wg.Wait()
	return ninst, nslot, nvert
}

// instanceRanges cuts task indices [0, len(inst)) into at most parts
// ranges of about equal size that never split an instance (inst is
// ascending).
func instanceRanges(inst []uint32, parts int) [][2]int {
	n := len(inst)
	var out [][2]int
	per := max((n+parts-1)/parts, 1)
	for lo := 0; lo < n; {
		hi := min(lo+per, n)
		for hi < n && inst[hi] == inst[hi-1] {
			hi++
		}
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}
