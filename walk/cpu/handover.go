package cpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// HandoverSide is the CPU engine's side of a partition split
// (walk/hybrid's PartSplit, issue 35): it walks a job's walkers only while
// their current vertex is in its set, the vertices whose edges the host
// walks, and hands each walker that steps outside back to the caller, who
// queues it for the other side (the GPU, walking the device-resident
// vertices). Its steps are those of the engine's Run, draw for draw
// (walk/draws.go keys every draw by walk id and step, not by who takes
// it), written into the job's rows at the walk's positions.
//
// DeepWalk and PPR on the fused table walk on a ring of walkers as the
// engine's ring does (ring.go): 64 walkers in flight, each step's entry
// prefetched a round ahead, the Philox words of a round's draws computed
// 64 at a time, so a worker keeps many misses in flight. What a segment
// adds to the ring's work is its start, the current vertex's offsets
// (prefetched a round ahead too, as the ring prefetches its starts), and
// the set's bit for every vertex stepped to. Other algorithms take the
// stepper's scalar step, one walker after another.
type HandoverSide struct {
	s    *stepper
	set  walk.VertexSet
	rows *walk.HandoverRows
	// first is the job's FirstWalk: a walker's id is first+Slot.
	first  uint64
	length uint32
	ring   bool // the fused ring (DeepWalk or PPR on the fused table)
}

// NewHandoverSide is the CPU side of job j in a partition split: it walks
// the steps taken from the vertices of set and writes them into rows
// (made for j's starts and length). Temporal jobs (their rows carry times)
// and jobs on a live graph's delta are refused.
func (e *Engine) NewHandoverSide(j walk.Job, set walk.VertexSet, rows *walk.HandoverRows) (*HandoverSide, error) {
	if err := walk.ValidateJobs(e.g, []walk.Job{j}); err != nil {
		return nil, err
	}
	a := j.Algorithm
	if a.Kind == walk.Temporal {
		return nil, fmt.Errorf("cpu handover side: %s: %w", a, errors.New("temporal walks are not split by partition"))
	}
	if j.Overlay != nil && !j.Overlay.Empty() {
		return nil, errors.New("cpu handover side: a job on a live graph's delta is not split by partition")
	}
	if len(set) != (e.g.NumVertices()+63)/64 {
		return nil, fmt.Errorf("cpu handover side: vertex set of %d words, the graph has %d vertices", len(set), e.g.NumVertices())
	}
	if rows == nil || rows.Stride != a.Length+1 || len(rows.Lens) != len(j.Starts) || len(rows.Rows) != len(j.Starts)*rows.Stride {
		return nil, errors.New("cpu handover side: rows not made for the job (walk.NewHandoverRows)")
	}
	ring := e.fusedFor(a) && (a.Kind == walk.DeepWalk || a.Kind == walk.PPR) && a.ResolvedStepper() != walk.StepperZPRS && a.ResolvedStepper() != walk.StepperDPRS
	var tab []aliasEntry
	if needsAlias(a) && !ring {
		tab = e.packedTable()
	}
	s := newStepper(e.g, a, j.Seed, tab)
	if ring {
		s.fused = e.fusedTable()
	}
	if walk.UsesLabelTables(a, e.g) {
		s.segs = e.labelTables()
	}
	return &HandoverSide{s: s, set: set, rows: rows, first: j.FirstWalk, length: uint32(a.Length), ring: ring}, nil
}

// Advance walks every walker of in while its vertex is in the side's set:
// a walker whose vertex is outside (at once, or after some steps) is
// appended to out, a walk that ends has its vertex count written. It
// returns out, the walks that ended and the steps taken. Safe for
// concurrent calls on disjoint walkers.
func (h *HandoverSide) Advance(in, out []walk.Walker) ([]walk.Walker, int, int64) {
	if h.ring {
		return h.advanceRing(in, out)
	}
	return h.advanceScalar(in, out)
}

func (h *HandoverSide) advanceScalar(in, out []walk.Walker) ([]walk.Walker, int, int64) {
	ended, steps := 0, int64(0)
	rows, lens, stride := h.rows.Rows, h.rows.Lens, uint64(h.rows.Stride)
	for _, w := range in {
		id := h.first + uint64(w.Slot)
		row := uint64(w.Slot) * stride
		for {
			if w.Step >= h.length {
				lens[w.Slot] = w.Step + 1
				ended++
				break
			}
			if !h.set.Has(w.Vertex) {
				out = append(out, w)
				break
			}
			next, ok := h.s.step(id, w.Step, w.Prev, w.Vertex)
			if !ok {
				lens[w.Slot] = w.Step + 1
				ended++
				break
			}
			w.Step++
			steps++
			rows[row+uint64(w.Step)] = next
			w.Prev, w.Vertex = w.Vertex, next
		}
	}
	return out, ended, steps
}

// Slot states of the hand-over ring.
const (
	hoEmpty = iota
	hoStart // walker taken, its vertex's offsets prefetched
	hoNeed  // vertex's edge range known, next step to draw
	hoDrawn // next step drawn, its fused entry prefetched
)

// hoRing is one Advance call's walkers in flight, by slot.
type hoRing struct {
	st              [ringSlots]uint8
	w               [ringSlots]walk.Walker
	deg, coin       [ringSlots]uint32
	lo, idx         [ringSlots]uint64
	idLo, idHi, ctr [ringSlots]uint32
	words           [4][ringSlots]uint32
	pf, pfOff       [ringSlots]uint64
}

func (h *HandoverSide) advanceRing(in, out []walk.Walker) ([]walk.Walker, int, int64) {
	r := new(hoRing)
	s := h.s
	fused, off, set := s.fused, s.off, h.set
	rows, lens, stride := h.rows.Rows, h.rows.Lens, uint64(h.rows.Stride)
	keep := s.sampler == walk.StepperUniform
	ppr := s.alg.Kind == walk.PPR
	ended, steps := 0, int64(0)
	next := 0 // next walker of in to take
	for {
		nOff, active := 0, 0
		for i := range ringSlots {
			switch r.st[i] {
			case hoDrawn:
				e := &fused[r.idx[i]]
				var t uint32
				if !keep {
					t = e.pick(r.coin[i])
				}
				w := &r.w[i]
				nx, deg := e.to[t&1].v, e.to[t&1].deg
				w.Step++
				steps++
				rows[uint64(w.Slot)*stride+uint64(w.Step)] = nx
				w.Prev, w.Vertex = w.Vertex, nx
				switch {
				case w.Step == h.length || deg == 0:
					lens[w.Slot] = w.Step + 1
					ended++
					r.st[i] = hoEmpty
				case !set.Has(nx):
					out = append(out, *w)
					r.st[i] = hoEmpty
				default:
					r.lo[i], r.deg[i] = e.lo64(t), deg
					r.st[i] = hoNeed
				}
			case hoStart:
				w := &r.w[i]
				a, b := off[w.Vertex], off[w.Vertex+1]
				if a == b {
					lens[w.Slot] = w.Step + 1
					ended++
					r.st[i] = hoEmpty
				} else {
					r.lo[i], r.deg[i] = a, uint32(b-a)
					r.st[i] = hoNeed
				}
			}
			// An empty slot takes the next walker that can step here;
			// those already ended or outside the set pass through.
			for r.st[i] == hoEmpty && next < len(in) {
				w := in[next]
				next++
				switch {
				case w.Step >= h.length:
					lens[w.Slot] = w.Step + 1
					ended++
				case !set.Has(w.Vertex):
					out = append(out, w)
				default:
					r.w[i] = w
					r.st[i] = hoStart
					r.pfOff[nOff] = uint64(w.Vertex)
					nOff++
				}
			}
			if r.st[i] != hoEmpty {
				active++
			}
		}
		if active == 0 {
			return out, ended, steps
		}
		if nOff > 0 {
			prefetch.Rows(unsafe.Pointer(&off[0]), r.pfOff[:nOff], unsafe.Sizeof(off[0]), 2*unsafe.Sizeof(off[0]))
		}
		// Draw every waiting slot's step with one philox64: the counter
		// of walk id, step, draw 0 (walk/draws.go). Lanes of other slots
		// compute words nobody reads.
		for i := range ringSlots {
			if r.st[i] == hoNeed {
				id := h.first + uint64(r.w[i].Slot)
				r.idLo[i], r.idHi[i], r.ctr[i] = uint32(id), uint32(id>>32), r.w[i].Step
			}
		}
		philox64(&r.idLo, &r.idHi, &r.ctr, 0, s.k0, s.k1, &r.words)
		n := 0
		for i := range ringSlots {
			if r.st[i] != hoNeed {
				continue
			}
			col, coin := r.words[0][i], r.words[1][i]
			if ppr {
				if uint64(r.words[0][i]) < s.stopT {
					lens[r.w[i].Slot] = r.w[i].Step + 1
					ended++
					r.st[i] = hoEmpty
					continue
				}
				col, coin = r.words[1][i], r.words[2][i]
			}
			x := r.lo[i] + uint64(walk.Bounded(col, r.deg[i]))
			r.idx[i], r.coin[i] = x, coin
			r.st[i] = hoDrawn
			r.pf[n] = x
			n++
		}
		if n > 0 {
			prefetch.Rows(unsafe.Pointer(&fused[0]), r.pf[:n], unsafe.Sizeof(fused[0]), unsafe.Sizeof(fused[0]))
		}
	}
}
