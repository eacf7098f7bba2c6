//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graphsample"
)

// Forest fire and snowball on the device (kernels/sample_fire.cuh): one
// launch a round, a warp an instance, every hop in the launch. A warp builds
// its instance in its own slice of scratch (the edges, a visited set, the
// picks) and copies the finished edges into one pool that the host copies
// back. An instance's size is known only once it is sampled, so a round
// runs the instances with slices of ecap edges and kcap picks; those that
// outgrow them, or find the pool full, run again in the next round with
// slices 16 times larger (up to what no instance can outgrow: max_vertices
// - 1 edges, or the graph's vertices - 1, and the largest degree's picks)
// or in a new pool. The
// samples equal graphsample.Sample's (unweighted exactly; weighted and the burn
// counts up to the last ulp of a logarithm).

const (
	// fireScratchBudget bounds the warps' scratch of one launch; the launch
	// runs fewer warps when a warp's slice would exceed it.
	fireScratchBudget = 1 << 30
	// firePoolBudget bounds a round's pool of edges (16 bytes an edge),
	// further bounded by half the device's free memory.
	firePoolBudget = 8 << 30
	// fireRounds bounds the rounds of one call.
	fireRounds = 64
)

// fireFirst sizes the first round: a warp's slices (edges, picks) and the
// pool, a slice an instance up to perInstance edges, at least pool edges
// (and at most half the free memory: a second round finishes the
// instances that find it full). Later rounds' pools hold what the
// instances that found the pool full asked for, plus a slice for each
// that outgrew its own. Tests lower them to force more rounds.
var fireFirst = struct{ edges, picks, perInstance, pool int64 }{1024, 256, 1024, 1 << 22}

// SampleFire runs graphsample.ForestFire (constant or edge-weight bias) or
// graphsample.Snowball for starts as graphsample.Sample does.
func (e *Engine) SampleFire(ctx context.Context, p graphsample.SampleParams, starts []uint32) ([][]graphsample.SampledEdge, SampleStats, error) {
	return e.SampleFireRange(ctx, p, starts, 0, -1)
}

// SampleFireRange is SampleFire for instances first .. first+count-1 only
// (count -1: to the last), as graphsample.SampleRange: SampleFireColumns,
// laid out per instance (with edge indices).
func (e *Engine) SampleFireRange(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, SampleStats, error) {
	c := graphsample.Columns{WithEdges: true}
	st, err := e.SampleFireColumns(ctx, p, starts, first, count, &c)
	if err != nil {
		return nil, SampleStats{}, err
	}
	return c.Edges(), st, nil
}

// SampleFireColumns runs forest fire or snowball for instances first ..
// first+count-1 (count -1: to the last) as graphsample.SampleRange into into
// (Reset by the call; Edge filled when into.WithEdges). Instances finish in
// different rounds; each round's pool comes back whole, and the columns
// are filled from the rounds' pools on every core once all have finished
// (an instance's edges are contiguous in its round's pool).
func (e *Engine) SampleFireColumns(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int, into *graphsample.Columns) (SampleStats, error) {
	var st SampleStats
	_, _, err := e.sampleFire(p, starts, first, count, func(n int) ([][]graphsample.SampledEdge, SampleStats, error) {
		var err error
		st, err = e.sampleFireColumns(ctx, p, starts, first, n, into)
		return nil, st, err
	})
	if err != nil {
		return SampleStats{}, err
	}
	return st, nil
}

// sampleFire is sampleLocked for forest fire or snowball (p.Kind).
func (e *Engine) sampleFire(p graphsample.SampleParams, starts []uint32, first, count int,
	body func(count int) ([][]graphsample.SampledEdge, SampleStats, error)) ([][]graphsample.SampledEdge, SampleStats, error) {
	kind := graphsample.ForestFire
	if p.Kind == graphsample.Snowball {
		kind = graphsample.Snowball
	}
	return e.sampleLocked(kind, p, starts, first, count, body)
}

// sampleFireColumns is SampleFireColumns' body, e.mu held.
func (e *Engine) sampleFireColumns(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, n int, into *graphsample.Columns) (SampleStats, error) {
	t0 := time.Now()
	st := SampleStats{SampleStats: graphsample.SampleStats{Instances: int64(n)}}
	if n == 0 {
		into.Reset(0, 0)
		into.Offsets[0] = 0
		return st, nil
	}
	g := e.g
	// No instance has more edges than edgeCap or more picks at one
	// vertex than pickCap.
	edgeCap := int64(g.NumVertices()) - 1
	if p.MaxVertices > 0 {
		edgeCap = int64(p.MaxVertices) - 1
	}
	edgeCap = max(1, min(edgeCap, int64(g.NumEdges()), math.MaxUint32/4))
	if e.maxDegree == 0 {
		e.maxDegree, _ = g.MaxDegree()
	}
	pickCap := int64(max(1, e.maxDegree))
	ecap, kcap := min(edgeCap, fireFirst.edges), min(pickCap, fireFirst.picks)
	want := max(fireFirst.pool, int64(n)*min(ecap, fireFirst.perInstance))
	list := make([]uint32, n)
	for i := range list {
		list[i] = uint32(i)
	}
	depth := p.Depth
	withEdges := into.WithEdges
	// Where each instance finished: its round and its place in that
	// round's list.
	var rounds []fireResult
	round := make([]uint16, n)
	place := make([]uint32, n)
	tq := time.Now()
	var queued time.Duration
	e.staging.times = stagedTimes{}
	err := e.dev.do(func() (err error) {
		queued = time.Since(tq)
		fn, err := e.mod.Function("sample_fire")
		if err != nil {
			return fmt.Errorf("gpu: kernel sample_fire: %w", err)
		}
		occ, err := fn.MaxActiveBlocksPerMultiProcessor(sampleThreads, 0)
		if err != nil {
			return fmt.Errorf("gpu: occupancy of sample_fire: %w", err)
		}
		var dCum, dStarts cu.DevicePtr
		defer e.free("sample.starts", &dStarts)
		var dWeights uint64
		if p.Weighted() {
			if dCum, err = e.sampleCDF(); err != nil {
				return err
			}
			dWeights = uint64(e.dWeights)
		}
		dSegs, nSegs, err := e.segmentTable("sample.segs", p)
		defer e.free("sample.segs", &dSegs)
		if err != nil {
			return err
		}
		if dStarts, err = upload(e, "sample.starts", starts); err != nil {
			return err
		}
		logp := 0.0
		if p.Kind == graphsample.ForestFire {
			logp = math.Log(p.BurnProb)
		}
		snowball := uint64(0)
		if p.Kind == graphsample.Snowball {
			snowball = 1
		}
		for ri := 0; len(list) > 0; ri++ {
			if ri == fireRounds {
				return fmt.Errorf("gpu: %s: %d instances unfinished after %d rounds", p, len(list), ri)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := e.fireRound(fn, occ, p, dWeights, dCum, dStarts, dSegs, nSegs, uint64(snowball), logp, first, list, ecap, kcap, want, withEdges)
			if err != nil {
				return err
			}
			st.Kernel += r.kernel
			st.Rounds++
			rounds = append(rounds, r)
			var again []uint32
			var asked, grown int64
			for i, s := range r.status {
				switch s {
				case fireDone:
					round[list[i]], place[list[i]] = uint16(ri), uint32(i)
				case firePoolFull:
					asked += int64(r.count[i])
				case fireGrow:
					grown++
				}
				if s != fireDone {
					again = append(again, list[i])
				}
			}
			if grown > 0 {
				ecap, kcap = min(edgeCap, ecap*16), min(pickCap, kcap*16)
			}
			want = asked + grown*ecap
			list = again
		}
		return nil
	})
	if err != nil {
		return SampleStats{}, err
	}
	tf := time.Now()
	st.Edges = fireColumns(into, depth, round, place, rounds)
	st.Wall = time.Since(t0)
	e.logSampleCall(p.Kind.String(), st, queued)
	e.cfg.logger.Debug("gpu sample columns filled on the host", "kind", p.Kind.String(), "duration", time.Since(tf))
	return st, nil
}

// An instance's status after a round (kFire*, kernels/sample_fire.cuh).
const (
	fireDone     = 0
	fireGrow     = 1
	firePoolFull = 2
)

// fireResult is one round's output, per list entry and in the pool.
type fireResult struct {
	status, count, hopEnd []uint32
	off                   []uint64
	edge                  []uint64
	src, dst              []uint32
	kernel                time.Duration
}

// fireRound runs sample_fire once over list with slices of ecap edges and
// kcap picks and a pool of want edges (at least ecap, at most what fits)
// (device thread).
func (e *Engine) fireRound(fn cu.Function, occ int, p graphsample.SampleParams, dWeights uint64, dCum, dStarts, dSegs cu.DevicePtr, nSegs, snowball uint64,
	logp float64, first int, list []uint32, ecap, kcap, want int64, withEdges bool) (fireResult, error) {
	nl := len(list)
	depth := p.Depth
	hlog := bits.Len64(uint64(2*(ecap+1) - 1)) // 2^hlog >= 2(ecap+1): at most half full
	perWarp := (ecap*16 + int64(4)<<hlog + kcap*8 + 127) &^ 127
	const warpsPerBlock = sampleThreads / 32
	warps := min(nl, e.numSM*max(occ, 1)*warpsPerBlock, int(max(1, fireScratchBudget/perWarp)))
	grid := (warps + warpsPerBlock - 1) / warpsPerBlock
	scratch := int64(grid*warpsPerBlock) * perWarp
	free, _, err := cu.MemInfo()
	if err != nil {
		return fireResult{}, fmt.Errorf("gpu: free device memory: %w", err)
	}
	budget := min(int64(firePoolBudget), (int64(free)-scratch-int64(nl)*(24+int64(depth)*4))/2)
	poolCap := min(int64(nl)*ecap, budget/16, max(want, ecap))
	if poolCap < ecap {
		return fireResult{}, fmt.Errorf("gpu: %s: %d bytes of device memory free, too few for a pool of %d edges", p.Kind, free, ecap)
	}
	names := []string{"sample.list", "sample.scratch", "sample.edge", "sample.src", "sample.dst", "sample.cursor",
		"sample.status", "sample.off", "sample.count", "sample.hop_end"}
	ptrs := make([]cu.DevicePtr, len(names))
	defer func() {
		for i := range names {
			e.free(names[i], &ptrs[i])
		}
	}()
	sizes := []int64{int64(nl) * 4, scratch, poolCap * 8, poolCap * 4, poolCap * 4, 8, int64(nl) * 4, int64(nl) * 8, int64(nl) * 4,
		int64(nl*depth) * 4}
	for i := range names {
		if ptrs[i], err = e.alloc(names[i], sizes[i]); err != nil {
			return fireResult{}, err
		}
	}
	dList, dScratch, dEdge, dSrc, dDst, dCursor, dStatus, dOff, dCount, dHopEnd := ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4],
		ptrs[5], ptrs[6], ptrs[7], ptrs[8], ptrs[9]
	if err := cu.MemcpyHtoD(dList, unsafe.Pointer(&list[0]), int64(nl)*4); err != nil {
		return fireResult{}, fmt.Errorf("gpu: copy sample.list: %w", err)
	}
	if err := cu.MemsetD32(dScratch, 0xFFFFFFFF, scratch/4); err != nil {
		return fireResult{}, fmt.Errorf("gpu: clear sample.scratch: %w", err)
	}
	if err := cu.MemsetD32(dCursor, 0, 2); err != nil {
		return fireResult{}, fmt.Errorf("gpu: clear sample.cursor: %w", err)
	}
	tk := time.Now()
	if err := launch(fn, grid, sampleThreads, cu.Stream{}, []uint64{uint64(e.dOffsets), uint64(e.dTargets), dWeights, uint64(dCum),
		p.Seed, snowball, math.Float64bits(logp), uint64(depth), uint64(p.MaxVertices), uint64(dStarts), uint64(p.InstancesPerSeed),
		uint64(first), uint64(dList), uint64(nl), uint64(dScratch), uint64(perWarp), uint64(hlog), uint64(ecap), uint64(kcap),
		uint64(dEdge), uint64(dSrc), uint64(dDst), uint64(poolCap), uint64(dCursor), uint64(dStatus), uint64(dOff), uint64(dCount),
		uint64(dHopEnd), uint64(dSegs), nSegs}); err != nil {
		return fireResult{}, fmt.Errorf("gpu: launch sample_fire: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fireResult{}, fmt.Errorf("gpu: sample_fire: %w", err)
	}
	r := fireResult{kernel: time.Since(tk), status: make([]uint32, nl), count: make([]uint32, nl), off: make([]uint64, nl),
		hopEnd: make([]uint32, nl*depth)}
	var used uint64
	for _, c := range []struct {
		dst unsafe.Pointer
		src cu.DevicePtr
		n   int64
	}{{unsafe.Pointer(&r.status[0]), dStatus, int64(nl) * 4}, {unsafe.Pointer(&r.count[0]), dCount, int64(nl) * 4},
		{unsafe.Pointer(&r.off[0]), dOff, int64(nl) * 8}, {unsafe.Pointer(&r.hopEnd[0]), dHopEnd, int64(nl*depth) * 4},
		{unsafe.Pointer(&used), dCursor, 8}} {
		if err := cu.MemcpyDtoH(c.dst, c.src, c.n); err != nil {
			return fireResult{}, fmt.Errorf("gpu: copy fire samples: %w", err)
		}
	}
	used = min(used, uint64(poolCap))
	if used > 0 {
		r.src, r.dst = make([]uint32, used), make([]uint32, used)
		if withEdges {
			r.edge = make([]uint64, used)
		}
		spans := []stagedSpan{{dst: unsafe.Pointer(&r.src[0]), src: dSrc, n: int64(used) * 4}, {dst: unsafe.Pointer(&r.dst[0]), src: dDst, n: int64(used) * 4}}
		if withEdges {
			spans = append(spans, stagedSpan{dst: slicePtr(r.edge), src: dEdge, n: int64(len(r.edge)) * 8})
		}
		if err := e.stagedCopies(spans); err != nil {
			return fireResult{}, fmt.Errorf("gpu: copy fire samples: %w", err)
		}
	}
	return r, nil
}

// fireColumns fills into with every instance's edges (instance k finished
// in round round[k], at place[k] of that round's list), on every core, and
// returns the edges.
func fireColumns(into *graphsample.Columns, depth int, round []uint16, place []uint32, rounds []fireResult) int64 {
	n := len(round)
	off := into.Offsets[:0]
	off = append(off, 0)
	for k := range n {
		off = append(off, off[k]+int64(rounds[round[k]].count[place[k]]))
	}
	into.Offsets = off
	total := off[n]
	into.Reset(n, total)
	sumRanges(n, func(lo, hi int) int64 {
		for k := lo; k < hi; k++ {
			r := &rounds[round[k]]
			i := place[k]
			cnt := int(r.count[i])
			ends := r.hopEnd[int(i)*depth : (int(i)+1)*depth]
			h, at, row := 0, int64(r.off[i]), off[k]
			for j := range cnt {
				for int(ends[h]) <= j {
					h++
				}
				into.Hop[row], into.Src[row], into.Dst[row] = int32(h), r.src[at], r.dst[at]
				if into.WithEdges {
					into.Edge[row] = r.edge[at]
				}
				at++
				row++
			}
		}
		return 0
	})
	return total
}
