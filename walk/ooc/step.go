package ooc

import (
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
	seed     uint64
	// Node2Vec's bias factors and acceptance thresholds
	// (walk.Node2VecFactors).
	f      [3]float64
	accept [3]uint64
}

func newStepper(a walk.Algorithm, seed uint64) *stepper {
	s := &stepper{kind: a.Kind, weighted: a.Weighted, length: uint32(a.Length),
		k0: uint32(seed), k1: uint32(seed >> 32), schema: a.Schema, seed: seed}
	if a.Kind == walk.Node2Vec {
		s.f, s.accept = walk.Node2VecFactors(a)
	}
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

// draw takes the draw of step number step of walk id from cur, a vertex
// of p: the edge position e (in the segment tables when seg) and the word
// y that decides it through the alias entries when weighted. ok is false
// when the walk ends at cur. take then reads the edge: split so that a
// worker draws for several walks before it waits on any of their edges.
// a and b are cur's edge range in p (p.off).
func (s *stepper) draw(p *part, id uint64, step, cur uint32, a, b uint64) (e uint64, y uint32, seg, ok bool) {
	lv := cur - p.p.Lo
	if a == b {
		return 0, 0, false, false
	}
	switch s.kind {
	case walk.DeepWalk:
		x0, x1, _, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		return a + uint64(walk.Bounded(x0, uint32(b-a))), x1, false, true
	case walk.PPR:
		x0, x1, x2, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		if uint64(x0) < s.stopT {
			return 0, 0, false, false
		}
		return a + uint64(walk.Bounded(x1, uint32(b-a))), x2, false, true
	case walk.MetaPath:
		st := &p.segs
		want := s.schema[int(step)%len(s.schema)]
		i := uint64(lv)*uint64(st.numLabels) + uint64(want)
		a, b := st.off[i], st.off[i+1]
		if a == b {
			return 0, 0, false, false
		}
		x0, x1, _, _ := walk.Philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
		return a + uint64(walk.Bounded(x0, uint32(b-a))), x1, true, true
	}
	return 0, 0, false, false
}

// take is the vertex the draw (e, y, seg) of a walk at a vertex of p
// reaches: walk/cpu's pickStatic.
func (s *stepper) take(p *part, e uint64, y uint32, seg bool) uint32 {
	tgt, prob, alt := p.tgt, p.prob, p.alt
	if seg {
		tgt, prob, alt = p.segs.tgt, p.segs.prob, p.segs.alt
	}
	if !s.weighted || walk.Unit24(y) < prob[e] {
		return tgt[e]
	}
	return alt[e]
}
