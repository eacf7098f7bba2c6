package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// n2vModel is the Go twin of stream_walk's Node2Vec mode
// (kernels/stream.cuh, stream_walk_node2vec) and of the host's scan hand-
// over (stream_cuda.go), decision for decision: the phases, where a walker
// parks, the attempts it carries. The CI test below runs it under random
// visit orders against walk/cpu, so the scheme (not the CUDA) is checked
// without a GPU; TestStreamNode2VecWalksMatchCPU checks the kernels.
type n2vModel struct {
	g       *graph.Graph
	ent     []uint32 // alias walk: {prob, keep, alt} an edge (putStreamEntries); nil: uniform
	accept  [3]uint64
	f       [3]float64
	length  uint32
	weights bool
	bounds  []uint32 // partition p holds vertices [bounds[p], bounds[p+1])
}

type n2vModelWalker struct {
	seed, id   uint64
	v, u, step uint32
	ph, x      uint32
	done       bool
	row        []uint32
}

func (m *n2vModel) part(v uint32) int {
	p := 0
	for p+1 < len(m.bounds)-1 && m.bounds[p+1] <= v {
		p++
	}
	return p
}

// waits is the partition a walker waits at, -1 for the host's scan.
func (m *n2vModel) waits(w *n2vModelWalker) int {
	switch w.ph & 0xFF {
	case n2vScan:
		return -1
	case n2vCheck:
		return m.part(w.u)
	}
	return m.part(w.v)
}

func (m *n2vModel) pick(off uint64, deg uint32, x, y uint32) uint32 {
	col := off + uint64(walk.Bounded(x, deg))
	if m.ent == nil {
		return m.g.Targets[col]
	}
	e := m.ent[3*col : 3*col+3]
	if walk.Unit24(y) < math.Float32frombits(e[0]) {
		return e[1]
	}
	return e[2]
}

func (m *n2vModel) adjacent(u, x uint32) bool {
	return walk.SortedHas(m.g.Targets[m.g.Offsets[u]:m.g.Offsets[u+1]], x)
}

// advance steps w while the partitions it needs are on (the kernel's loop).
func (m *n2vModel) advance(w *n2vModelWalker, on func(p int) bool) {
	k0, k1 := uint32(w.seed), uint32(w.seed>>32)
	draw := func(a uint32) (uint32, uint32, uint32) {
		x, y, z, _ := walk.Philox(uint32(w.id), uint32(w.id>>32), w.step, a, k0, k1)
		return x, y, z
	}
	take := func(x uint32) bool {
		w.step++
		w.row = append(w.row, x)
		w.u, w.v, w.ph = w.v, x, n2vPropose
		if w.step >= m.length {
			w.done = true
		}
		return !w.done
	}
	mn, mx := min(m.accept[1], m.accept[2]), max(m.accept[1], m.accept[2])
	for !w.done {
		if w.ph&0xFF == n2vScan {
			return
		}
		if w.ph&0xFF == n2vCheck {
			if !on(m.part(w.u)) {
				return
			}
			a := w.ph >> 8
			_, _, z := draw(a)
			c := 2
			if m.adjacent(w.u, w.x) {
				c = 1
			}
			if uint64(z) < m.accept[c] {
				take(w.x)
				continue
			}
			if a+1 == walk.MaxRejections {
				w.ph = n2vScan
				return
			}
			w.ph = (a+1)<<8 | n2vPropose
			continue
		}
		off := m.g.Offsets[w.v]
		deg := uint32(m.g.Offsets[w.v+1] - off)
		if deg == 0 {
			w.done = true
			return
		}
		if !on(m.part(w.v)) {
			return
		}
		if w.u == graph.NoVertex {
			x, y, _ := draw(0)
			take(m.pick(off, deg, x, y))
			continue
		}
		a := w.ph >> 8
		took, park := false, false
		for ; a < walk.MaxRejections; a++ {
			xw, yw, z := draw(a)
			x := m.pick(off, deg, xw, yw)
			zz := uint64(z)
			if x == w.u {
				if zz < m.accept[0] {
					took = true
				}
			} else if zz < mn {
				took = true
			} else if zz < mx {
				if !on(m.part(w.u)) {
					w.x, w.ph, park = x, a<<8|n2vCheck, true
					break
				}
				c := 2
				if m.adjacent(w.u, x) {
					c = 1
				}
				took = zz < m.accept[c]
			}
			if took {
				take(x)
				break
			}
		}
		if park {
			return
		}
		if !took {
			w.ph = n2vScan
			return
		}
	}
}

// TestStreamNode2VecSchemeMatchesCPU: the phases of Node2Vec under
// streaming (n2vModel, the kernel's twin) with the host's scan
// (walk.Node2VecScan), under random visit orders over eight partitions of
// which one is resident, give walk/cpu's walks, walk by walk: uniform and
// weighted, directed (dead ends) and undirected, p and q from moderate to
// extreme (q = 0.01 and 100 send most steps to the scan, p = 0.25 makes
// the return class the largest).
func TestStreamNode2VecSchemeMatchesCPU(t *testing.T) {
	type pq struct{ p, q float64 }
	for _, und := range []bool{true, false} {
		for _, weighted := range []bool{false, true} {
			g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 9, EdgeFactor: 8, Seed: 3,
				Undirected: und, Weighted: true, Name: "n2v"})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := cpu.New(g)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []pq{{1, 2}, {0.25, 4}, {2, 0.5}, {1, 100}, {1, 0.01}} {
				t.Run(fmt.Sprintf("undirected=%v/weighted=%v/p=%v/q=%v", und, weighted, c.p, c.q), func(t *testing.T) {
					alg := walk.Algorithm{Kind: walk.Node2Vec, Length: 30, P: c.p, Q: c.q, Weighted: weighted}
					const seed = 1<<40 + 11
					starts := make([]uint32, 3*g.NumVertices())
					for i := range starts {
						starts[i] = uint32(i % g.NumVertices())
					}
					want := make([][]uint32, len(starts))
					err := ref.Run(context.Background(), []walk.Job{{Tag: 1, Algorithm: alg, Seed: seed, Starts: starts}}, func(ch walk.Chunk) error {
						for k := range ch.Len() {
							want[ch.WalkIDs[k]] = append([]uint32(nil), ch.Walk(k)...)
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					got, scans, checks := runN2VModel(g, alg, seed, starts, rand.New(rand.NewPCG(7, uint64(len(starts)))))
					for id := range want {
						if !slices.Equal(got[id], want[id]) {
							t.Fatalf("walk %d differs:\nstream %v\ncpu    %v", id, got[id], want[id])
						}
					}
					if c.q == 100 && scans == 0 || checks == 0 {
						t.Fatalf("%d scans, %d walkers parked for a check", scans, checks)
					}
					t.Logf("%d host scans, %d checks parked", scans, checks)
				})
			}
		}
	}
}

// runN2VModel walks starts with n2vModel: partition 0 resident, one
// streamed partition on the device a visit, chosen at random among those
// with waiting walkers; scans on the host between visits.
func runN2VModel(g *graph.Graph, alg walk.Algorithm, seed uint64, starts []uint32, r *rand.Rand) (rows [][]uint32, scans, checks int) {
	m := &n2vModel{g: g, length: uint32(alg.Length), weights: alg.Weighted}
	m.f, m.accept = walk.Node2VecFactors(alg)
	if alg.Weighted {
		m.ent = make([]uint32, 3*g.NumEdges())
		walk.ForAliasVertices(g, func(_ int, first uint64, adj []uint32, prob []float32, col []uint32) {
			putStreamEntries(m.ent[3*first:3*(first+uint64(len(adj)))], adj, prob, col)
		})
	}
	nv := uint32(g.NumVertices())
	for p := range uint32(9) {
		m.bounds = append(m.bounds, p*nv/8)
	}
	adj := func(v uint32) ([]uint32, []float32, error) {
		a, b := g.Offsets[v], g.Offsets[v+1]
		if !alg.Weighted {
			return g.Targets[a:b], nil, nil
		}
		return g.Targets[a:b], g.Weights[a:b], nil
	}
	ws := make([]*n2vModelWalker, len(starts))
	for i, s := range starts {
		ws[i] = &n2vModelWalker{seed: seed, id: uint64(i), v: s, u: graph.NoVertex, row: []uint32{s}}
	}
	for {
		waiting := map[int]bool{}
		for _, w := range ws {
			if w.done {
				continue
			}
			if p := m.waits(w); p >= 0 {
				waiting[p] = true
				continue
			}
			x, err := walk.Node2VecScan(adj, m.f, w.seed, w.id, w.step, w.v, w.u)
			if err != nil {
				panic(err)
			}
			scans++
			w.step++
			w.row = append(w.row, x)
			w.u, w.v, w.ph = w.v, x, n2vPropose
			w.done = w.step >= m.length
			if !w.done {
				waiting[m.waits(w)] = true
			}
		}
		if len(waiting) == 0 {
			break
		}
		var ps []int
		for p := range waiting {
			ps = append(ps, p)
		}
		cur := ps[r.IntN(len(ps))]
		on := func(p int) bool { return p == 0 || p == cur }
		for _, w := range ws {
			if !w.done && m.waits(w) >= 0 && on(m.waits(w)) {
				m.advance(w, on)
				if w.ph&0xFF == n2vCheck {
					checks++
				}
			}
		}
	}
	rows = make([][]uint32, len(ws))
	for i, w := range ws {
		rows[i] = w.row
	}
	return rows, scans, checks
}
