package ooc

import (
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// stepper takes one job's steps inside a loaded partition, following the
// draw contract of walk/draws.go word for word, as walk/cpu's stepper does.
type stepper struct {
	kind     walk.Kind
	weighted bool
	length   uint32
	k0, k1   uint32
	stopT    uint64
	schema   []uint8
}

func newStepper(a walk.Algorithm, seed uint64) *stepper {
	s := &stepper{kind: a.Kind, weighted: a.Weighted, length: uint32(a.Length),
		k0: uint32(seed), k1: uint32(seed >> 32), schema: a.Schema}
	if a.Kind == walk.PPR {
		s.stopT = walk.Threshold(a.StopProb)
	}
	return s
}

// needs is what the job's steps read from a partition.
func (s *stepper) needs() needs {
	if s.kind == walk.MetaPath {
		return needs{labelTables: true, segAlias: s.weighted}
	}
	return needs{alias: s.weighted}
}

// step takes step number step of walk id from cur, a vertex of p; ok is
// false when the walk ends at cur.
func (s *stepper) step(p *part, id uint64, step, cur uint32) (next uint32, ok bool) {
	lv := cur - p.p.Lo
	a, b := p.off[lv], p.off[lv+1]
	if a == b {
		return 0, false
	}
	switch s.kind {
	case walk.DeepWalk:
		x0, x1, _, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		return pick(p.tgt, p.prob, p.alt, s.weighted, a, b, x0, x1), true
	case walk.PPR:
		x0, x1, x2, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		if uint64(x0) < s.stopT {
			return 0, false
		}
		return pick(p.tgt, p.prob, p.alt, s.weighted, a, b, x1, x2), true
	case walk.MetaPath:
		st := &p.segs
		want := s.schema[int(step)%len(s.schema)]
		i := uint64(lv)*uint64(st.numLabels) + uint64(want)
		a, b := st.off[i], st.off[i+1]
		if a == b {
			return 0, false
		}
		x0, x1, _, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		return pick(st.tgt, st.prob, st.alt, s.weighted, a, b, x0, x1), true
	}
	return graph.NoVertex, false
}

// pick draws from [a, b) of tgt uniformly, or through the alias entries
// when weighted: walk/cpu's pickStatic.
func pick(tgt []uint32, prob []float32, alt []uint32, weighted bool, a, b uint64, x, y uint32) uint32 {
	e := a + uint64(walk.Bounded(x, uint32(b-a)))
	if !weighted || walk.Unit24(y) < prob[e] {
		return tgt[e]
	}
	return alt[e]
}
