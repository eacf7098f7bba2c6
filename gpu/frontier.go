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
