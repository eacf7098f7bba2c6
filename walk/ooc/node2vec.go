package ooc

import (
	"fmt"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Node2Vec out of core (docs/design/out-of-core.md, "Node2Vec"). A step
// at v (previous vertex u) is walk/cpu's rejection loop: attempt a draws a
// proposal x from v's edges (uniform, or through the alias entries) and
// accepts it on word z against the threshold of its class (0: x = u, 1: x
// adjacent to u, 2: otherwise). Only the class test reads u's adjacency,
// which may lie in a partition the pool does not hold. So a Node2Vec
// walker carries a phase, as the GPU's streaming engine does (gpu/
// streamn2v.go): it proposes at part(v) and decides every attempt that
// needs no lookup there, or needs one while part(u) is held too; an
// attempt that needs u's adjacency otherwise parks it in the check phase,
// queued at part(u) with its candidate and attempt; after
// walk.MaxRejections rejected attempts the loop runs the exact scan
// (walk.Node2VecScan) with v's and u's edges read from the file. Every
// decision is a function of the draws of (seed, walk id, step, attempt),
// never of a visit, so the walks are walk/cpu's.

// Walker phases: run.phase holds the phase in its low byte and an attempt
// in bits 8-15: in the propose phase the next attempt to draw, in the
// check phase the one after the parked candidates.
const (
	n2vPropose = 0 // waits at part(v): the next attempt's proposal
	n2vCheck   = 1 // waits at part(u): are the parked candidates adjacent to u?
	n2vScan    = 2 // waits for the loop's exact scan
)

// n2vPark is how many candidates a walker parks for one check. Proposals
// need only v's edges, so at part(v) a walker draws on past an attempt
// that needs u's adjacency and parks every such candidate in attempt order
// (and a sure acceptance after them, if one comes): at part(u) the first
// candidate of its class accepted is the step, as if each had been checked
// in turn. One check then settles up to n2vPark attempts; checking each
// alone sent a walker between the two partitions once per attempt (q =
// 100 in TestWalksMatchCPU: 747 sweeps of the graph against DeepWalk's 29).
const n2vPark = 8

// n2vSure marks a parked candidate accepted without a lookup (run.parkA).
const n2vSure = 0x80

// n2vWalkerBytes is what a Node2Vec walker holds beyond the others: its
// previous vertex and phase, and its parked candidates, their attempts and
// count.
const n2vWalkerBytes = 8 + n2vPark*5 + 1

// advanceN2V steps Node2Vec walker w while the partitions its phases need
// are held (rs.held), then queues it in sh: moved to the partition it
// waits at, done, or to the loop's scans.
func (rs *run) advanceN2V(w int32, sh *shard) {
	st := rs.steppers[rs.jobOf[w]]
	id, v, u, n, ph := rs.ids[w], rs.cur[w], rs.prev[w], rs.taken[w], rs.phase[w]
	row := rs.path[int(w)*rs.stride : (int(w)+1)*rs.stride]
	px := rs.parkX[int(w)*n2vPark : (int(w)+1)*n2vPark]
	pa := rs.parkA[int(w)*n2vPark : (int(w)+1)*n2vPark]
	take := func(x uint32) {
		n++
		row[n] = x
		u, v, ph = v, x, n2vPropose
	}
	moved := func(p int) {
		sh.moved = append(sh.moved, w)
		sh.pids = append(sh.pids, int32(p))
	}
	// class is c of x against u (1: adjacent, 2: not) in u's partition hu.
	class := func(hu *part, x uint32) int {
		if hu.adjacent(u, x) {
			return 1
		}
		return 2
	}
	mn, mx := min(st.accept[1], st.accept[2]), max(st.accept[1], st.accept[2])
loop:
	for {
		if n >= st.length {
			sh.done = append(sh.done, w)
			break
		}
		switch ph & 0xFF {
		case n2vScan:
			sh.scans = append(sh.scans, w)
			break loop
		case n2vCheck:
			pu := rs.e.pidOf(u)
			hu := rs.held[pu]
			if hu == nil {
				moved(pu)
				break loop
			}
			next, took := ph>>8, false
			for i := range int(rs.parkN[w]) {
				if pa[i]&n2vSure != 0 {
					take(px[i])
					took = true
					break
				}
				_, _, z, _ := walk.Philox(uint32(id), uint32(id>>32), n, uint32(pa[i]), st.k0, st.k1)
				if uint64(z) < st.accept[class(hu, px[i])] {
					take(px[i])
					took = true
					break
				}
			}
			rs.parkN[w] = 0
			switch {
			case took:
			case next == walk.MaxRejections:
				ph = n2vScan
			default:
				ph = next<<8 | n2vPropose
			}
			continue
		}
		pv := rs.e.pidOf(v)
		hv := rs.held[pv]
		if hv == nil {
			moved(pv)
			break
		}
		lv := v - hv.p.Lo
		off, end := hv.off[lv], hv.off[lv+1]
		if off == end {
			sh.done = append(sh.done, w)
			break
		}
		deg := uint32(end - off)
		if u == graph.NoVertex {
			x, y, _, _ := walk.Philox(uint32(id), uint32(id>>32), n, 0, st.k0, st.k1)
			take(st.take(hv, off+uint64(walk.Bounded(x, deg)), y, false))
			continue
		}
		hu := rs.held[rs.e.pidOf(u)]
		k, took := 0, false
		a := ph >> 8
		for ; a < walk.MaxRejections && k < n2vPark; a++ {
			xw, yw, z, _ := walk.Philox(uint32(id), uint32(id>>32), n, a, st.k0, st.k1)
			x := st.take(hv, off+uint64(walk.Bounded(xw, deg)), yw, false)
			zz := uint64(z)
			sure, open := false, false
			switch {
			case x == u:
				sure = zz < st.accept[0]
			case zz < mn:
				sure = true
			case zz < mx:
				if hu != nil {
					sure = zz < st.accept[class(hu, x)]
				} else {
					open = true
				}
			}
			switch {
			case sure && k == 0:
				take(x)
				took = true
			case sure:
				px[k], pa[k] = x, uint8(a)|n2vSure
				k++
			case open:
				px[k], pa[k] = x, uint8(a)
				k++
				continue
			default:
				continue
			}
			a++
			break
		}
		switch {
		case took:
		case k > 0:
			rs.parkN[w] = uint8(k)
			ph = a<<8 | n2vCheck
		default:
			ph = n2vScan // every attempt drawn and rejected
		}
	}
	rs.cur[w], rs.prev[w], rs.taken[w], rs.phase[w] = v, u, n, ph
}

// adjacent says whether vertex u of the partition has an edge to x (its
// targets are sorted, as the file stores them).
func (s *part) adjacent(u, x uint32) bool {
	lu := u - s.p.Lo
	return walk.SortedHas(s.tgt[s.off[lu]:s.off[lu+1]], x)
}

// runScans takes the exact scan of every walker in the scans (on the
// loop's goroutine: they are rare), with v's and u's edges read from the
// file, and queues each where it waits next.
func (rs *run) runScans(scans []int32) error {
	for _, w := range scans {
		st := rs.steppers[rs.jobOf[w]]
		v, u, n := rs.cur[w], rs.prev[w], rs.taken[w]
		x, err := walk.Node2VecScan(rs.fileAdjacency(st.weighted), st.f, st.seed, rs.ids[w], n, v, u)
		if err != nil {
			return fmt.Errorf("out-of-core engine: node2vec scan at vertex %d: %w", v, err)
		}
		rs.scans++
		n++
		rs.path[int(w)*rs.stride+int(n)] = x
		rs.cur[w], rs.prev[w], rs.taken[w], rs.phase[w] = x, v, n, n2vPropose
		if n >= st.length {
			j := rs.jobOf[w]
			rs.pending[j] = append(rs.pending[j], w)
			rs.npend++
			continue
		}
		p := rs.e.pidOf(x)
		rs.queues[p] = append(rs.queues[p], w)
	}
	return nil
}

// fileAdjacency reads a vertex's targets (and weights when weighted) from
// the graph file, into buffers of the run's own, through the page cache
// (Engine.scanReader): a scan reads a few small ranges, which direct reads
// made ten times slower (q = 100 in TestWalksMatchCPU: 5.8 s against 0.4).
func (rs *run) fileAdjacency(weighted bool) walk.Adjacency {
	e := rs.e
	return func(v uint32) ([]uint32, []float32, error) {
		r, err := e.scanReader()
		if err != nil {
			return nil, nil, err
		}
		raw, err := r.read(&rs.scanOff, int64(e.sec.offsets)+int64(v)*8, 16)
		if err != nil {
			return nil, nil, err
		}
		o := castSlice[uint64](raw)
		a, b := int64(o[0]), int64(o[1])
		// A scan reads two adjacencies; the second must not overwrite the
		// first's buffers.
		tb, wb := &rs.scanTgt[0], &rs.scanW[0]
		if rs.scanFlip {
			tb, wb = &rs.scanTgt[1], &rs.scanW[1]
		}
		rs.scanFlip = !rs.scanFlip
		raw, err = r.read(tb, int64(e.sec.targets)+a*4, (b-a)*4)
		if err != nil {
			return nil, nil, err
		}
		tg := castSlice[uint32](raw)
		if !weighted {
			return tg, nil, nil
		}
		raw, err = r.read(wb, int64(e.sec.weights)+a*4, (b-a)*4)
		if err != nil {
			return nil, nil, err
		}
		return tg, castSlice[float32](raw), nil
	}
}

// scanReader is the graph file opened without O_DIRECT for Node2Vec's
// scans, opened by the first.
func (e *Engine) scanReader() (*reader, error) {
	if e.scanR == nil {
		r, err := openReader(e.path, false)
		if err != nil {
			return nil, err
		}
		e.scanR = r
	}
	return e.scanR, nil
}
