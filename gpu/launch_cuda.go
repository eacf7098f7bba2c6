//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// launch starts fn with 8-byte arguments (cu passes each parameter as 8
// bytes).
func launch(fn cu.Function, grid, block int, s cu.Stream, args []uint64) error {
	ptrs := make([]unsafe.Pointer, len(args))
	for i := range args {
		ptrs[i] = unsafe.Pointer(&args[i])
	}
	return fn.Launch(grid, 1, 1, block, 1, 1, 0, s, ptrs)
}

// enqueue fills slot s's pinned inputs with batch b and queues copies in,
// the kernel between two events, and copies out on s's stream. With
// delta, the batch walks the live graph snapshot resident on the device
// (ensureDelta).
func (e *Engine) enqueue(s *batchSlot, b *batch, alg walk.Algorithm, withTimes, delta bool) error {
	n := b.walks
	nj := fillTasks(s, b)
	p := e.fillParams(s, alg, n)
	stride := p.stride
	s.withTimes = withTimes && s.dTimes != 0
	if s.withTimes {
		p.timesOut, s.timesStride = uint64(s.dTimes), int64(stride)
	}
	var fn cu.Function
	var block, grid int
	args := []uint64{uint64(s.dParams)}
	switch {
	case delta && alg.Kind == walk.Temporal:
		var more []uint64
		fn, block, grid, more = e.timedKernel(alg, n)
		args = append(args, more...)
	case delta:
		fn, block, grid = e.overlayKernel(alg, n)
		args = append(args, e.overlayArgs(alg.Weighted)...)
		switch alg.Kind {
		case walk.Node2Vec:
			args = append(args, e.edgeSetArgs()...)
		case walk.MetaPath:
			args = append(args, e.metaPathArgs(alg.Weighted)...)
		}
	default:
		fn, block, grid = e.walkKernel(alg, n)
	}
	tiles := packTiles(n)
	streamed, inPlace := e.streamed != nil, false
	if streamed {
		plan := e.chooseBatch(alg, n)
		streamed, inPlace = plan != planPlacement, plan == planInPlace
	}
	err := e.dev.do(func() error {
		st := s.stream
		// In order, each checked before the next is issued; on an error
		// the stream is drained before returning, so nothing queued
		// still reads or writes the slot's buffers.
		steps := []struct {
			what string
			do   func() error
		}{
			{"copy tasks", func() error { return e.copyHtoDAsync(s.dTasks, unsafe.Pointer(&s.hTasks[0]), n*16, st) }},
			{"copy seeds", func() error { return e.copyHtoDAsync(s.dSeeds, unsafe.Pointer(&s.hSeeds[0]), int64(nj)*8, st) }},
			{"copy params", func() error { return e.copyHtoDAsync(s.dParams, unsafe.Pointer(p), paramsSize, st) }},
			{"reset cursor", func() error { return cu.MemsetD32Async(s.dCursor, 0, 2, st) }},
			{"poison lengths", func() error { return cu.MemsetD32Async(s.dLengths, 0, n, st) }},
			{"record start", func() error { return s.start.Record(st) }},
			{"launch", func() error {
				if streamed {
					return e.walkStreamed(s, alg, p, n, inPlace)
				}
				if alg.Kind == walk.Temporal && !delta {
					return launchParams(fn, grid, block, st, p)
				}
				return launch(fn, grid, block, st, args)
			}},
			{"record stop", func() error { return s.stop.Record(st) }},
			{"pack partials", func() error {
				return launch(e.fnPackPartials, int(tiles), packThreads, st, []uint64{uint64(s.dLengths), uint64(n), uint64(s.dPartials)})
			}},
			{"pack scan", func() error {
				return launch(e.fnPackScan, 1, packThreads, st, []uint64{uint64(s.dPartials), uint64(tiles)})
			}},
			{"pack rows", func() error {
				return launch(e.fnPackRows, int(tiles), packThreads, st,
					[]uint64{uint64(s.dResult), uint64(s.dLengths), uint64(s.dPartials), uint64(n), stride, uint64(s.dDense)})
			}},
			{"copy times", func() error {
				if !s.withTimes {
					return nil
				}
				return e.copyDtoHAsync(unsafe.Pointer(&s.hTimes[0]), s.dTimes, n*int64(stride)*8, st)
			}},
			{"copy lengths", func() error { return e.copyDtoHAsync(unsafe.Pointer(&s.hLengths[0]), s.dLengths, n*4, st) }},
			{"copy total", func() error {
				return e.copyDtoHAsync(unsafe.Pointer(s.hTotal), s.dPartials+cu.DevicePtr(tiles*4), 4, st)
			}},
		}
		for _, x := range steps {
			if err := x.do(); err != nil {
				return drained(st, fmt.Errorf("gpu: %s: %w", x.what, err))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.pending = b
	return nil
}

// fillTasks writes b's tasks (one per walk) and job seeds into s's host
// buffers and returns the number of seeds.
func fillTasks(s *batchSlot, b *batch) int {
	nj := 0
	k := int64(0)
	for si := range b.segs {
		sg := &b.segs[si]
		sg.seed = uint32(nj)
		s.hSeeds[nj] = sg.job.Seed
		nj++
		for id := sg.lo; id < sg.hi; id++ {
			s.hTasks[k] = task{start: sg.job.Starts[id], job: sg.seed, walk: sg.job.FirstWalk + uint64(id)}
			k++
		}
	}
	return nj
}

// fillParams writes the kernel parameters of a run of alg over n tasks
// into s's host parameter block and returns it.
func (e *Engine) fillParams(s *batchSlot, alg walk.Algorithm, n int64) *walkParams {
	p := s.hParams
	*p = walkParams{}
	algorithmParams(p, alg, e.cfg.warpThreshold)
	p.offsets, p.targets = uint64(e.dOffsets), uint64(e.dTargets)
	sampler := alg.ResolvedStepper()
	if alg.Weighted {
		p.weights = uint64(e.dWeights)
		if sampler == walk.StepperAlias || sampler == walk.StepperRejection {
			p.alias = uint64(e.dAlias)
		}
	}
	p.labels = uint64(e.dLabels)
	p.tasks, p.seeds, p.result, p.lengths, p.cursor = uint64(s.dTasks), uint64(s.dSeeds), uint64(s.dResult), uint64(s.dLengths), uint64(s.dCursor)
	p.nTasks = uint64(n)
	if e.useLabelTables(alg) {
		p.sampler = samplerLabelTables
		p.segOffsets, p.segTargets, p.numLabels = uint64(e.dSegOffsets), uint64(e.dSegTargets), uint64(e.g.NumLabels)
		if alg.Weighted {
			p.segAlias = uint64(e.dSegAlias)
		}
	}
	if alg.Kind == walk.Temporal {
		p.times, p.byTime, p.coarse = uint64(e.tmp.dTimes), uint64(e.tmp.dByTime), uint64(e.tmp.dCoarse)
		if e.tmp.nextBuilt && e.tmp.nextBack == alg.Time.Backward {
			p.next = uint64(e.tmp.dNext)
		}
		if alg.Weighted {
			p.cumw = uint64(e.tmp.dCumw)
		}
		if alg.Time.Bias == walk.TimeExponential {
			p.expSums = uint64(e.tmp.dExp)
		}
	}
	e.placedParams(p)
	return p
}

// walkKernel picks the walk kernel for alg and sizes its launch over n
// tasks: block threads and grid blocks.
func (e *Engine) walkKernel(alg walk.Algorithm, n int64) (fn cu.Function, block, grid int) {
	sampler := alg.ResolvedStepper()
	mode := modeStatic
	switch alg.Kind {
	case walk.PPR:
		mode = modePPR
	case walk.Node2Vec:
		mode = modeNode2Vec
	case walk.MetaPath:
		mode = modeMetaPath
	}
	// Full occupancy pays for the simple modes; Node2Vec's rejection loop
	// would spill under the register cap.
	variant := 1
	if mode == modeNode2Vec {
		variant = 0
	}
	if v := e.cfg.threadVariant; v >= 0 && v < len(e.fnThread[0][0]) {
		variant = v
	}
	pl := 0
	if e.placed != nil {
		pl = 1
	}
	fn, block, occ, perBlock := e.fnThread[pl][mode][variant], threadBlock, e.occThread[pl][mode][variant], int64(threadBlock)
	if alg.Kind == walk.Temporal {
		fn, block, occ = e.temporalKernel(alg)
		return fn, block, int(min(int64(e.numSM*max(occ, 1)), (n+perBlock-1)/perBlock))
	}
	if (sampler == walk.StepperZPRS || sampler == walk.StepperDPRS) && !e.useLabelTables(alg) {
		d, n2v := 0, 0
		if sampler == walk.StepperDPRS {
			d = 1
		}
		if alg.Kind == walk.Node2Vec {
			n2v = 1
		}
		fn, block, occ, perBlock = e.fnReservoir[d][n2v], reservoirBlock, e.occReservoir[d][n2v], localPoolSlots
	}
	grid = int(min(int64(e.numSM*max(occ, 1)), (n+perBlock-1)/perBlock))
	return fn, block, grid
}
