package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// lockstep reports whether the walks can advance all together, one step at a
// time across the unit: first-order walks with a static sampler. Advancing
// many independent walks in one loop lets the processor overlap their cache
// misses, which is where a random walk spends its time.
func (s *stepper) lockstep() bool {
	return (s.alg.Kind == walk.DeepWalk || s.alg.Kind == walk.PPR) && (s.sampler == walk.StepperUniform || s.sampler == walk.StepperAlias) ||
		s.segs != nil
}

// ring reports whether walkRing serves the walks: DeepWalk and PPR,
// uniform or alias. MetaPath stays on walkLockstep, which measured faster
// for it (docs/design/cpu-engine.md): its offsets (a row per vertex and
// label) miss the L3 as often as its targets do.
func (s *stepper) ring() bool {
	return (s.alg.Kind == walk.DeepWalk || s.alg.Kind == walk.PPR) && (s.sampler == walk.StepperUniform || s.sampler == walk.StepperAlias) && s.segs == nil
}

func (s *stepper) walkLockstep(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	active := make([]int32, 0, n)
	next := make([]int32, n)
	idx := make([]uint64, n) // by position: the drawn target or alias entry
	coin := make([]uint32, n)
	rows := make([]uint64, n) // by position: the chosen vertex's offsets row
	off, tgt, tab := s.off, s.tgt, s.alias
	// MetaPath reads the segment of the step's label: row v*nl+label of
	// the label tables' offsets; other walks read row v.
	var nl uint64
	schema := s.alg.Schema
	if lt := s.segs; lt != nil {
		off, tgt, tab, nl = lt.off, lt.tgt, s.segAlias(), uint64(lt.numLabels)
	}
	rowOf := func(step uint32) (scale, row uint64) {
		if nl == 0 {
			return 1, 0
		}
		return nl, uint64(schema[int(step)%len(schema)])
	}
	scale, row := rowOf(0)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		active = append(active, int32(k))
		rows[k] = uint64(v)*scale + row
	}
	prefetch.Rows(unsafe.Pointer(&off[0]), rows[:n], 8, 16)
	var nscale, nrow uint64
	// decide takes the step of position i and computes the offsets row the
	// chosen vertex reads at the next step.
	decide := func(i int) {
		k := next[i]
		var nx uint32
		if tab == nil {
			nx = tgt[idx[i]]
		} else {
			e := &tab[idx[i]]
			nx = e.alt
			if walk.Unit24(coin[i]) < e.prob {
				nx = e.keep
			}
		}
		buf[int(k)*stride+int(lens[k])] = nx
		lens[k]++
		cur[k] = nx
		rows[i] = uint64(nx)*nscale + nrow
	}
	// A step is one loop over blocks of eight walks (the pipeline of
	// pipeline.go) that also reads the walks' offsets, prefetched when
	// their vertex was chosen, and on deciding a step prefetches the
	// offsets the next step reads.
	var words [4][8]uint32
	for step := uint32(0); step < uint32(s.alg.Length) && len(active) > 0; step++ {
		scale, row = rowOf(step)
		nscale, nrow = rowOf(step + 1)
		j, done := 0, 0
		for base := 0; base < len(active); base += 8 {
			block := active[base:min(base+8, len(active))]
			s.draw8(block, firstID, step, 0, &words)
			first := j
			for l, k := range block {
				r := uint64(cur[k])*scale + row
				a := off[r]
				d := uint32(off[r+1] - a)
				if d == 0 {
					continue
				}
				x0, x1, stop := s.columnWords(&words, l)
				if stop {
					continue
				}
				idx[j] = a + (uint64(x0)*uint64(d))>>32
				coin[j] = x1
				next[j] = k
				j++
			}
			if tab != nil {
				prefetch.Rows(unsafe.Pointer(&tab[0]), idx[first:j], unsafe.Sizeof(tab[0]), unsafe.Sizeof(tab[0]))
			} else {
				prefetch.Rows(unsafe.Pointer(&tgt[0]), idx[first:j], 4, 4)
			}
			from := done
			for ; done < j-pipelineLag; done++ {
				decide(done)
			}
			prefetch.Rows(unsafe.Pointer(&off[0]), rows[from:done], 8, 16)
		}
		for ; done < j; done++ {
			decide(done)
		}
		active, next = next[:j], active[:cap(active)]
	}
}
