package gpu

import (
	"runtime"
	"sync"

	"github.com/walkstage/walkstage/graphsample"
)

// DeviceSamples says whether the device kernels sample p: neighbour
// sampling without replacement, layer sampling, forest fire, snowball and
// the frontier walk, unbiased or by edge weight. (An engine also needs the
// whole graph in its device's memory: Engine.SamplesOnDevice.)
func DeviceSamples(p graphsample.SampleParams) bool {
	switch p.Kind {
	case graphsample.NeighborSampling:
		if p.Replace {
			return false
		}
	case graphsample.LayerSampling, graphsample.ForestFire, graphsample.Snowball, graphsample.FrontierWalk:
	default:
		return false
	}
	return p.EdgeBias.Kind == graphsample.BiasConstant || p.EdgeBias.Kind == graphsample.BiasEdgeWeight
}

// hopEdges is one hop's sampled edges in task order (instance, then
// slot), and how many of them each instance of the wave has.
type hopEdges struct {
	edges   []graphsample.SampledEdge
	perInst []uint32 // by instance - first
}

// nextFrontier collects hop h's sampled edges, resolved on the device
// (sample_neighbor_targets: the edges' indices and targets, counts[t] for
// task t, packed in task order), and returns the next frontier's tasks: every
// pick's target, in task order, its slot its position in the instance's
// frontier. Tasks come in instance order, so the work is cut at instance
// boundaries into one range per core: each range owns its instances, and
// its share of the edges and of the next frontier starts at the sum of the
// counts before it. (One goroutine with a map of slots held the whole call
// to about 4 M sampled edges/s behind kernels a thousand times faster;
// then each edge's two random reads of the graph and its append to the
// instance's slice were a third of a 1 M-seed sample's host time.)
func nextFrontier(n int, first uint32, h int, inst, vert, counts []uint32, edge []uint64, dst []uint32) (he hopEdges, ninst, nslot, nvert []uint32) {
	ranges := instanceRanges(inst, runtime.GOMAXPROCS(0)*4)
	starts := make([]int, len(ranges)+1)
	for r, rg := range ranges {
		c := 0
		for _, x := range counts[rg[0]:rg[1]] {
			c += int(x)
		}
		starts[r+1] = starts[r] + c
	}
	total := starts[len(ranges)]
	ninst, nslot, nvert = make([]uint32, total), make([]uint32, total), make([]uint32, total)
	he = hopEdges{edges: make([]graphsample.SampledEdge, total), perInst: make([]uint32, n)}
	parallelRanges(ranges, func(r int, rg [2]int) {
		at, slotIn, prev := starts[r], uint32(0), ^uint32(0)
		for t := rg[0]; t < rg[1]; t++ {
			v, i := vert[t], inst[t]
			if i != prev {
				slotIn, prev = 0, i
			}
			c := int(counts[t])
			for range c {
				u := dst[at]
				he.edges[at] = graphsample.SampledEdge{Hop: int32(h), Src: v, Dst: u, Edge: edge[at]}
				ninst[at], nslot[at], nvert[at] = i, slotIn, u
				at++
				slotIn++
			}
			he.perInst[i-first] += uint32(c)
		}
	})
	return he, ninst, nslot, nvert
}

// instanceEdges lays the hops' edges out by instance, each instance's in
// hop order, in one array: out[i] is instance first+i's (nil when it has
// none, as on the CPU).
func instanceEdges(n int, hops []hopEdges) [][]graphsample.SampledEdge {
	out := make([][]graphsample.SampledEdge, n)
	// off[i]: where instance i's edges start; at[h][i]: where hop h's
	// edges of instance i start in that hop's array.
	off := make([]int, n+1)
	at := make([][]int, len(hops))
	for h, he := range hops {
		at[h] = make([]int, n+1)
		for i, c := range he.perInst {
			at[h][i+1] = at[h][i] + int(c)
			off[i+1] += int(c)
		}
	}
	for i := range n {
		off[i+1] += off[i]
	}
	all := make([]graphsample.SampledEdge, off[n])
	sumRanges(n, func(lo, hi int) int64 {
		for i := lo; i < hi; i++ {
			if off[i] == off[i+1] {
				continue
			}
			dst := all[off[i]:off[i]:off[i+1]]
			for h, he := range hops {
				dst = append(dst, he.edges[at[h][i]:at[h][i+1]]...)
			}
			out[i] = dst
		}
		return 0
	})
	return out
}

// sumRanges cuts [0, n) into about four ranges a core, runs f on each
// (parallelRanges) and returns the sum of what f returns: how the samplers
// turn their kernels' rows into per-instance edges on every core.
func sumRanges(n int, f func(lo, hi int) int64) int64 {
	parts := min(n, runtime.GOMAXPROCS(0)*4)
	ranges := make([][2]int, 0, parts)
	for p := range parts {
		ranges = append(ranges, [2]int{n * p / parts, n * (p + 1) / parts})
	}
	sums := make([]int64, len(ranges))
	parallelRanges(ranges, func(r int, rg [2]int) { sums[r] = f(rg[0], rg[1]) })
	var total int64
	for _, v := range sums {
		total += v
	}
	return total
}

// parallelRanges runs f on every range, at most GOMAXPROCS at once.
func parallelRanges(ranges [][2]int, f func(r int, rg [2]int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for r, rg := range ranges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(r, rg)
		}()
	}
	wg.Wait()
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
