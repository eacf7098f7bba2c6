package graph

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/internal/hugemem"
)

// RMATOptions describe a Graph500-style R-MAT graph.
type RMATOptions struct {
	// Scale gives V = 2^Scale vertices (1..31).
	Scale int
	// EdgeFactor gives EdgeFactor * V generated edges before self-loops and
	// duplicates are dropped (Graph500 uses 16).
	EdgeFactor int
	Seed       uint64
	// Undirected stores every edge in both directions.
	Undirected bool
	// Weighted adds weights uniform in [1, 5).
	Weighted bool
	// Labels > 0 adds labels uniform in [0, Labels); at most 256.
	Labels int
	Name   string
	// A, B, C are the quadrant probabilities (D = 1 - A - B - C). All zero
	// means Graph500's 0.57, 0.19, 0.19.
	A, B, C float64
	// TimeSpan > 0 makes the graph timed: each edge gets a time uniform
	// in [0, TimeSpan), a function of the seed and its endpoints (both
	// directions of an undirected edge share it). For benchmarks and
	// tests of temporal walks.
	TimeSpan int64
}

// rmatBlock is the number of generated edges drawn from one RNG stream. The
// block, not the worker, owns the stream, which is what makes the graph
// independent of GOMAXPROCS.
const rmatBlock = 1 << 16

// GenerateRMAT builds an R-MAT graph in memory. The same options give the
// same graph byte for byte on any machine and any GOMAXPROCS.
//
// How: edge i of block b comes from a splitmix64 stream seeded by (Seed, b),
// descending Scale levels of the recursive matrix with probabilities A, B, C,
// D. Vertex ids are then scrambled by a seeded bijection of [0, 2^Scale), as
// Graph500 does, so that degree does not follow id order. The edges are
// generated twice, once to count degrees and once to scatter targets into
// their CSR slots, so the only memory beyond the finished CSR is one counter
// per vertex. Adjacency lists are then sorted and deduplicated. Weights and
// labels are a hash of (Seed, edge endpoints) rather than a draw, so every
// copy of a duplicate edge, and both directions of an undirected edge, agree:
// keep-first, keep-last and any scheduling give the same graph.
func GenerateRMAT(ctx context.Context, o RMATOptions) (*Graph, error) {
	o, err := o.checked()
	if err != nil {
		return nil, err
	}
	gen := newRMATGen(o)
	n := uint64(1) << o.Scale
	offs, targets, err := gen.adjacency(ctx, n, uint64(o.EdgeFactor)*n)
	if err != nil {
		return nil, err
	}
	g := &Graph{Name: o.Name, Offsets: offs, Targets: targets}
	if err := gen.attributes(ctx, g, o); err != nil {
		return nil, err
	}
	if o.TimeSpan > 0 {
		if err := gen.times(ctx, g, o.TimeSpan); err != nil {
			return nil, err
		}
	}
	// What Finish does, with the structural check spread over all cores
	// (there is no id map to index and NumLabels is set).
	if err := g.validateParallel(); err != nil {
		return nil, fmt.Errorf("rmat: %w", err)
	}
	g.Version = fmt.Sprintf("%016x", graphChecksum(g))
	return g, nil
}

// checked returns o with the default probabilities filled in, or the
// error for its first field out of range.
func (o RMATOptions) checked() (RMATOptions, error) {
	if o.Scale < 1 || o.Scale > 31 {
		return o, fmt.Errorf("rmat: scale %d out of range [1, 31]", o.Scale)
	}
	if o.EdgeFactor < 1 {
		return o, fmt.Errorf("rmat: edge factor %d must be >= 1", o.EdgeFactor)
	}
	if o.Labels < 0 || o.Labels > 256 {
		return o, fmt.Errorf("rmat: %d labels out of range [0, 256]", o.Labels)
	}
	if o.A == 0 && o.B == 0 && o.C == 0 {
		o.A, o.B, o.C = 0.57, 0.19, 0.19
	}
	if !(o.A >= 0 && o.B >= 0 && o.C >= 0 && o.A+o.B+o.C <= 1) {
		return o, fmt.Errorf("rmat: probabilities a=%v b=%v c=%v must be >= 0 with a+b+c <= 1", o.A, o.B, o.C)
	}
	if o.TimeSpan < 0 {
		return o, fmt.Errorf("rmat: time span %d must be 0 (untimed) or more", o.TimeSpan)
	}
	if m := uint64(o.EdgeFactor) << o.Scale; m > 1<<40 {
		return o, fmt.Errorf("rmat: %d edges is more than this generator supports", m)
	}
	return o, nil
}

// adjacency generates the m edges over n vertices and returns the CSR
// offsets and targets, each adjacency sorted and without duplicates.
func (gen *rmatGen) adjacency(ctx context.Context, n, m uint64) (offs []uint64, targets []uint32, err error) {
	offs = make([]uint64, n+1)
	hugemem.Advise(offs) // walkers index these arrays at random
	bk := newBucketer(gen.scale)
	// Pass 1: out-degree of every vertex, before deduplication.
	err = gen.forEachBlock(ctx, m, bk, func(batch []uint64) {
		for _, e := range batch {
			offs[e>>32+1]++
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for v := uint64(0); v < n; v++ {
		offs[v+1] += offs[v]
	}
	slots := offs[n]
	targets = make([]uint32, slots)
	hugemem.Advise(targets)
	cursor := make([]uint64, n)
	copy(cursor, offs[:n])
	// Pass 2: the same edges again, each target into the next free slot of
	// its source. Slot order depends on scheduling; the sort below erases it.
	err = gen.forEachBlock(ctx, m, bk, func(batch []uint64) {
		for _, e := range batch {
			s := e >> 32
			targets[cursor[s]] = uint32(e)
			cursor[s]++
		}
	})
	if err != nil {
		return nil, nil, err
	}
	// Sort and deduplicate every adjacency in place; cursor[v] becomes v's
	// final degree.
	err = parallelRanges(ctx, int(n), 1<<12, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			adj := targets[offs[v]:offs[v+1]]
			slices.Sort(adj)
			cursor[v] = uint64(len(slices.Compact(adj)))
		}
	})
	if err != nil {
		return nil, nil, err
	}
	// Close the gaps left by duplicates, moving lists left in vertex order.
	var e uint64
	for v := uint64(0); v < n; v++ {
		lo, deg := offs[v], cursor[v]
		offs[v] = e
		copy(targets[e:e+deg], targets[lo:lo+deg])
		e += deg
	}
	offs[n] = e
	if uint64(cap(targets)) > e+e/8 {
		// Many duplicates: give the slack back rather than keep it for the
		// graph's lifetime.
		return offs, slices.Clone(targets[:e]), nil
	}
	return offs, targets[:e:e], nil
}

// attributes gives g's edges their weights and labels, when o asks for
// them: a hash of (Seed, edge endpoints).
func (gen *rmatGen) attributes(ctx context.Context, g *Graph, o RMATOptions) error {
	e := g.NumEdges()
	if o.Weighted {
		g.Weights = make([]float32, e)
		hugemem.Advise(g.Weights)
	}
	if o.Labels > 0 {
		g.Labels = make([]uint8, e)
		g.NumLabels = o.Labels
	}
	if !o.Weighted && o.Labels == 0 {
		return nil
	}
	offs := g.Offsets
	return parallelRanges(ctx, g.NumVertices(), 1<<12, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			for i := offs[v]; i < offs[v+1]; i++ {
				h := gen.edgeHash(uint32(v), g.Targets[i])
				if g.Weights != nil {
					// 22 random bits give 1 + k/2^20, exact in float32
					// and always below 5.
					g.Weights[i] = 1 + float32(h>>42)*(1.0/(1<<20))
				}
				if g.Labels != nil {
					g.Labels[i] = uint8((uint64(uint32(h)) * uint64(o.Labels)) >> 32)
				}
			}
		}
	})
}

// times gives every edge a time in [0, span) and stores them in time
// order with their permutation (Graph.Times, Graph.ByTime); targets stay
// sorted by target.
func (gen *rmatGen) times(ctx context.Context, g *Graph, span int64) error {
	g.Times, g.ByTime = make([]int64, g.NumEdges()), make([]uint32, g.NumEdges())
	offs := g.Offsets
	return parallelRanges(ctx, g.NumVertices(), 1<<12, func(lo, hi int) {
		var edgeTimes []int64
		for v := lo; v < hi; v++ {
			a, b := offs[v], offs[v+1]
			edgeTimes = edgeTimes[:0]
			for i := a; i < b; i++ {
				h, _ := bits.Mul64(mix64(gen.edgeHash(uint32(v), g.Targets[i])^0x7153a9e5), uint64(span))
				edgeTimes = append(edgeTimes, int64(h))
			}
			order := g.ByTime[a:b]
			for j := range order {
				order[j] = uint32(j)
			}
			slices.SortFunc(order, func(x, y uint32) int {
				if c := cmp.Compare(edgeTimes[x], edgeTimes[y]); c != 0 {
					return c
				}
				return cmp.Compare(x, y)
			})
			for k, j := range order {
				g.Times[a+uint64(k)] = edgeTimes[j]
			}
		}
	})
}

type rmatGen struct {
	scale       int
	seed        uint64
	ta, tb, tc  uint64 // cumulative quadrant thresholds on a 32-bit uniform
	mask        uint64
	m1, m2, add uint64 // scramble constants
	shift       uint
	undirected  bool
}

func newRMATGen(o RMATOptions) *rmatGen {
	th := func(p float64) uint64 { return uint64(math.Min(p, 1) * (1 << 32)) }
	g := &rmatGen{
		scale: o.Scale, seed: o.Seed, undirected: o.Undirected,
		ta: th(o.A), tb: th(o.A + o.B), tc: th(o.A + o.B + o.C),
		mask:  1<<o.Scale - 1,
		shift: uint(max(1, (o.Scale+1)/2)),
	}
	g.m1 = mix64(o.Seed^0x5ca1ab1e) | 1
	g.m2 = mix64(o.Seed^0xb1e55ed) | 1
	g.add = mix64(o.Seed ^ 0xadd)
	return g
}

// scramble is a bijection of [0, 2^scale): odd multiplications and
// xor-shifts are each invertible modulo a power of two.
func (g *rmatGen) scramble(x uint64) uint32 {
	x = (x * g.m1) & g.mask
	x ^= x >> g.shift
	x = (x*g.m2 + g.add) & g.mask
	x ^= x >> g.shift
	return uint32(x)
}

// edgeHash derives an edge's weight and label bits from its endpoints
// (unordered for undirected graphs, so both directions agree).
func (g *rmatGen) edgeHash(s, d uint32) uint64 {
	if g.undirected && s > d {
		s, d = d, s
	}
	return mix64(mix64(g.seed^0x77e1a8) ^ (uint64(s)<<32 | uint64(d)))
}

// bucketer groups edges by source-vertex bucket so that the counting and
// scatter passes touch one small vertex range at a time under that
// bucket's lock, instead of paying an atomic and a cache miss per edge.
type bucketer struct {
	shift uint // vertices per bucket = 1 << shift
	locks []sync.Mutex
}

// bucketSlots is the per-bucket buffer length of each worker.
const bucketSlots = 64

func newBucketer(scale int) *bucketer {
	// 2048 vertices a bucket keeps a bucket's counters in L1/L2; at most
	// 2^16 buckets keeps each worker's buffers within 32 MiB.
	shift := uint(min(scale, max(11, scale-16)))
	return &bucketer{shift: shift, locks: make([]sync.Mutex, 1<<(uint(scale)-shift))}
}

// forEachBlock generates the m edges in blocks spread over GOMAXPROCS
// goroutines. Every edge that is not a self-loop (and, for undirected
// graphs, its reverse) is packed as src<<32 | dst into its source bucket's
// buffer; apply gets full buffers under the bucket's lock.
func (g *rmatGen) forEachBlock(ctx context.Context, m uint64, bk *bucketer, apply func(batch []uint64)) error {
	blocks := int64((m + rmatBlock - 1) / rmatBlock)
	nb := len(bk.locks)
	flush := func(b int, batch []uint64) {
		bk.locks[b].Lock()
		apply(batch)
		bk.locks[b].Unlock()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), int(blocks)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]uint64, nb*bucketSlots)
			fill := make([]uint8, nb)
			push := func(s, d uint64) {
				b := int(s >> bk.shift)
				i := int(fill[b])
				buf[b*bucketSlots+i] = s<<32 | d
				if i++; i == bucketSlots {
					flush(b, buf[b*bucketSlots:(b+1)*bucketSlots])
					i = 0
				}
				fill[b] = uint8(i)
			}
			for ctx.Err() == nil {
				b := next.Add(1) - 1
				if b >= blocks {
					break
				}
				n := min(uint64(rmatBlock), m-uint64(b)*rmatBlock)
				state := mix64(g.seed ^ mix64(uint64(b)+0x9e3779b97f4a7c15))
				for i := uint64(0); i < n; i++ {
					var s, d, r uint64
					for level := 0; level < g.scale; level++ {
						if level&1 == 0 {
							state += 0x9e3779b97f4a7c15
							r = mix64(state)
						}
						u := r & 0xffffffff
						r >>= 32
						q := b2u(u >= g.ta) + b2u(u >= g.tb) + b2u(u >= g.tc)
						s = s<<1 | q>>1
						d = d<<1 | q&1
					}
					if s == d {
						continue
					}
					ss, dd := uint64(g.scramble(s)), uint64(g.scramble(d))
					push(ss, dd)
					if g.undirected {
						push(dd, ss)
					}
				}
			}
			for b := range fill {
				if fill[b] > 0 {
					flush(b, buf[b*bucketSlots:b*bucketSlots+int(fill[b])])
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// mix64 is splitmix64's finaliser: a bijective 64-bit mix with good
// avalanche, used both as the RNG output function and as a hash.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// parallelRanges splits [0, n) into chunks of size chunk and runs f over
// them on GOMAXPROCS goroutines, stopping early when ctx is cancelled.
func parallelRanges(ctx context.Context, n, chunk int, f func(lo, hi int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(1, (n+chunk-1)/chunk))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				f(lo, min(lo+chunk, n))
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}
