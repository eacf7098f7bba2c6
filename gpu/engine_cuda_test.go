//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// These tests need a CUDA device; build them with `make test-cuda-bin` and
// run .dev/gpu.test on a GPU machine. WALKSTAGE_GPU_SMALL=1 shrinks the
// sample counts (for compute-sanitizer runs).

func small() bool { return os.Getenv("WALKSTAGE_GPU_SMALL") != "" }

// Test graph vertices with a role.
const (
	vHub  = 0 // degree > 1024: the block sampler
	vMid  = 1 // degree ~ 60: a warp sampler
	vA    = 2 // few neighbours, one of them the hub (Node2Vec previous vertex)
	vB    = 3 // few neighbours, one of them vMid
	vSink = 4 // no out-edges (directed): walks end there
	nTest = 4000
)

// testGraph is directed, weighted (weights in [1, 5)) and labelled (0..4),
// with a hub above the warp threshold, dead ends, and the neighbourhoods the
// Node2Vec checks need (vA's neighbours are the hub and some of the hub's
// neighbours, so return, neighbour and outward moves all occur).
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var edges []graph.Edge
	add := func(s, d int64) {
		edges = append(edges, graph.Edge{Src: s, Dst: d, Weight: 1 + 4*r.Float32(), Label: uint8(r.IntN(5))})
	}
	for i := 0; i < 2500; i++ {
		x := 5 + int64(r.IntN(nTest-5))
		add(vHub, x)
		if i%2 == 0 {
			add(x, vHub)
		}
	}
	for i := 0; i < 60; i++ {
		x := 5 + int64(r.IntN(nTest-5))
		add(vMid, x)
		add(x, vMid)
	}
	add(vA, vHub)
	add(vHub, vA)
	add(vB, vMid)
	add(vMid, vB)
	hubN := map[int64]bool{}
	for _, e := range edges {
		if e.Src == vHub {
			hubN[e.Dst] = true
		}
	}
	k := 0
	for x := range hubN {
		if k == 6 {
			break
		}
		add(vA, x)
		k++
	}
	for i := 0; i < 4; i++ {
		add(vB, 5+int64(r.IntN(nTest-5)))
	}
	for v := int64(5); v < nTest; v++ {
		for j := 0; j < 1+r.IntN(12); j++ {
			add(v, 5+int64(r.IntN(nTest-5)))
		}
		if r.IntN(20) == 0 {
			add(v, vSink)
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "gpu-test", Weighted: true, Labelled: true, DenseIDs: true, NumVertices: nTest})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Degree(vHub); d <= 1024 {
		t.Fatalf("hub degree %d, want > 1024", d)
	}
	return g
}

func newEngine(t testing.TB, g *graph.Graph, opts ...Option) *Engine {
	t.Helper()
	e, err := openEngine(g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// collect runs jobs and returns walks by (tag, walk id), failing on a walk
// seen twice or missing.
func collect(t testing.TB, e walk.Engine, jobs []walk.Job) map[int][][]uint32 {
	t.Helper()
	out := map[int][][]uint32{}
	for _, j := range jobs {
		out[j.Tag] = make([][]uint32, len(j.Starts))
	}
	err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
		for k := 0; k < c.Len(); k++ {
			id := c.WalkIDs[k]
			if k > 0 && id <= c.WalkIDs[k-1] {
				return fmt.Errorf("walk ids not ascending in chunk of job %d", c.Tag)
			}
			if out[c.Tag][id] != nil {
				return fmt.Errorf("job %d walk %d emitted twice", c.Tag, id)
			}
			if c.Starts != nil && c.Starts[k] != c.Walk(k)[0] {
				return fmt.Errorf("job %d walk %d: Starts says %d, the walk starts at %d", c.Tag, id, c.Starts[k], c.Walk(k)[0])
			}
			out[c.Tag][id] = append([]uint32(nil), c.Walk(k)...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s run: %v", e.Name(), err)
	}
	for tag, ws := range out {
		for id, w := range ws {
			if w == nil {
				t.Fatalf("%s: job %d walk %d never emitted", e.Name(), tag, id)
			}
		}
	}
	return out
}

func allStarts(g *graph.Graph, reps int) []uint32 {
	s := make([]uint32, 0, g.NumVertices()*reps)
	for r := 0; r < reps; r++ {
		for v := 0; v < g.NumVertices(); v++ {
			s = append(s, uint32(v))
		}
	}
	return s
}

// TestAliasTablesMatchCPU: the tables built by alias_build equal
// walk.BuildAlias bit for bit.
func TestAliasTablesMatchCPU(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g)
	tab := make([]uint32, 4*g.NumEdges())
	if err := e.dev.do(func() error {
		return cu.MemcpyDtoH(unsafe.Pointer(&tab[0]), e.dAlias, g.NumEdges()*16)
	}); err != nil {
		t.Fatal(err)
	}
	prob, alias := walk.BuildAlias(g)
	for i := range prob {
		gp, ga := math.Float32frombits(tab[4*i]), tab[4*i+3]
		if gp != prob[i] || ga != alias[i] {
			t.Fatalf("edge %d: gpu (%v, %d), cpu (%v, %d)", i, gp, ga, prob[i], alias[i])
		}
		if tab[4*i+1] != g.Targets[i] {
			t.Fatalf("edge %d: keep target %d, want %d", i, tab[4*i+1], g.Targets[i])
		}
	}
}

// TestWalksMatchCPU: the O(1) samplers give the CPU engine's walks, walk by
// walk, also when walks are split over many batches and several jobs share
// a run.
func TestWalksMatchCPU(t *testing.T) {
	g := testGraph(t)
	reps := 20
	if small() {
		reps = 1
	}
	starts := allStarts(g, reps)
	hubStarts := make([]uint32, 5000)
	for i := range hubStarts {
		hubStarts[i] = vHub
	}
	cases := []struct {
		name string
		alg  walk.Algorithm
	}{
		{"deepwalk-uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}},
		{"deepwalk-alias", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}},
		{"ppr-uniform", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}},
		{"ppr-alias", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true}},
		{"node2vec-uniform", walk.Algorithm{Kind: walk.Node2Vec, Length: 40, P: 2, Q: 0.5}},
		{"node2vec-alias", walk.Algorithm{Kind: walk.Node2Vec, Length: 40, P: 0.25, Q: 4, Weighted: true}},
		// p = 0.001 makes 64 rejections common: the exact fallback scan
		// must match the CPU's too.
		{"node2vec-fallback", walk.Algorithm{Kind: walk.Node2Vec, Length: 20, P: 0.001, Q: 1, Weighted: true}},
		// Both engines sample MetaPath from the same label tables.
		{"metapath-tables", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{0, 1, 2}}},
		{"metapath-tables-weighted", walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{2, 0}, Weighted: true}},
	}
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	// Five slots: batches overtake each other on the device, and must
	// still come back in order.
	for _, run := range []struct{ batch, slots int }{{0, 2}, {7777, 2}, {7777, 5}} {
		e := newEngine(t, g, WithMaxBatchWalks(run.batch), WithChunkWalks(1000), WithBatchSlots(run.slots))
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/batch=%d/slots=%d", c.name, run.batch, run.slots), func(t *testing.T) {
				jobs := []walk.Job{
					{Tag: 1, Algorithm: c.alg, Seed: 42, Starts: starts},
					{Tag: 2, Algorithm: c.alg, Seed: 1<<40 + 7, Starts: hubStarts},
				}
				want := collect(t, ref, jobs)
				got := collect(t, e, jobs)
				for tag := range want {
					for id := range want[tag] {
						if !equal(got[tag][id], want[tag][id]) {
							t.Fatalf("job %d walk %d differs:\ngpu %v\ncpu %v", tag, id, got[tag][id], want[tag][id])
						}
					}
				}
				st := e.LastRunStats()
				if st.Walks != int64(len(starts)+len(hubStarts)) || st.Compute <= 0 {
					t.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMixedJobsOneRun: jobs of different algorithms in one Run are grouped,
// and each walk comes back exactly once with a valid path.
func TestMixedJobsOneRun(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g, WithMaxBatchWalks(3000))
	starts := allStarts(g, 2)
	jobs := []walk.Job{
		{Tag: 10, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10}, Seed: 1, Starts: starts},
		{Tag: 11, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 10, Schema: []uint8{0, 1, 2}, Weighted: true}, Seed: 2, Starts: starts},
		{Tag: 12, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10}, Seed: 3, Starts: starts[:100]},
		{Tag: 13, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10, Weighted: true, Stepper: walk.StepperDPRS}, Seed: 4, Starts: starts},
		{Tag: 14, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 1, Q: 1, Stepper: walk.StepperZPRS}, Seed: 5, Starts: starts},
		// Other lengths: the batch slots are reused or grown, not rebuilt.
		{Tag: 15, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 200, StopProb: 0.05, Weighted: true}, Seed: 6, Starts: starts},
		{Tag: 16, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 3}, Seed: 7, Starts: starts},
		{Tag: 17, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 7, Schema: []uint8{4}, Stepper: walk.StepperDPRS}, Seed: 8, Starts: starts},
		// Same schema, automatic (label tables) and forced ZPRS: two launches.
		{Tag: 18, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 10, Schema: []uint8{0, 1, 2}, Weighted: true, Stepper: walk.StepperZPRS}, Seed: 2, Starts: starts},
	}
	got := collect(t, e, jobs)
	for _, j := range jobs {
		for id, w := range got[j.Tag] {
			if w[0] != j.Starts[id] {
				t.Fatalf("job %d walk %d starts at %d, want %d", j.Tag, id, w[0], j.Starts[id])
			}
			for s := 1; s < len(w); s++ {
				if !g.HasEdge(w[s-1], w[s]) {
					t.Fatalf("job %d walk %d step %d: no edge %d -> %d", j.Tag, id, s, w[s-1], w[s])
				}
				if j.Algorithm.Kind == walk.MetaPath {
					want := j.Algorithm.Schema[(s-1)%len(j.Algorithm.Schema)]
					if l := edgeLabel(g, w[s-1], w[s]); l != want {
						t.Fatalf("job %d walk %d step %d took label %d, want %d", j.Tag, id, s, l, want)
					}
				}
			}
			if len(w) < j.Algorithm.Length+1 && j.Algorithm.Kind != walk.MetaPath && j.Algorithm.Kind != walk.PPR && g.Degree(w[len(w)-1]) != 0 {
				t.Fatalf("job %d walk %d ended early at %d of degree %d", j.Tag, id, w[len(w)-1], g.Degree(w[len(w)-1]))
			}
		}
	}
}

func edgeLabel(g *graph.Graph, u, v uint32) uint8 {
	adj := g.Neighbors(u)
	i := sort.Search(len(adj), func(i int) bool { return adj[i] >= v })
	return g.Labels[g.Offsets[u]+uint64(i)]
}

// exact transition probabilities at (prev, cur) for step s.
func exactStep(g *graph.Graph, a walk.Algorithm, s int, prev, cur uint32) map[uint32]float64 {
	p := map[uint32]float64{}
	var sum float64
	off := g.Offsets[cur]
	for i, x := range g.Neighbors(cur) {
		e := off + uint64(i)
		b := 1.0
		if a.Weighted {
			b = float64(g.Weights[e])
		}
		switch a.Kind {
		case walk.MetaPath:
			if g.Labels[e] != a.Schema[s%len(a.Schema)] {
				b = 0
			}
		case walk.Node2Vec:
			if prev != graph.NoVertex {
				switch {
				case x == prev:
					b /= a.P
				case g.HasEdge(prev, x):
				default:
					b /= a.Q
				}
			}
		}
		p[x] += b
		sum += b
	}
	for x := range p {
		p[x] /= sum
	}
	return p
}

func chiSquareCritical(df int) float64 {
	const z = 3.719 // upper 1e-4 quantile of the standard normal
	k := float64(df)
	t := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * t * t * t
}

// chiSquare tests counts against probs; cells expecting fewer than 5 are
// pooled.
func chiSquare(t *testing.T, name string, counts map[uint32]int, probs map[uint32]float64) {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		t.Fatalf("%s: no samples", name)
	}
	for v, c := range counts {
		if probs[v] == 0 && c > 0 {
			t.Fatalf("%s: sampled %d (%d times), probability 0", name, v, c)
		}
	}
	var x2, poolE, poolO float64
	df := -1
	for v, p := range probs {
		if p == 0 {
			continue
		}
		exp := p * float64(n)
		if exp < 5 {
			poolE += exp
			poolO += float64(counts[v])
			continue
		}
		d := float64(counts[v]) - exp
		x2 += d * d / exp
		df++
	}
	if poolE > 0 {
		d := poolO - poolE
		x2 += d * d / poolE
		df++
	}
	if df < 1 {
		return
	}
	if crit := chiSquareCritical(df); x2 > crit {
		t.Errorf("%s: chi-square %.1f > %.1f (df %d, n %d)", name, x2, crit, df, n)
	} else {
		t.Logf("%s: chi-square %.1f <= %.1f (df %d, n %d)", name, x2, crit, df, n)
	}
}

// TestTransitionsExact: the dynamic samplers (ZPRS, DPRS, warp and block
// variants, Node2Vec rejection, MetaPath) pick neighbours with the exact
// transition probabilities, by chi-square at a 1e-4 false-alarm rate.
func TestTransitionsExact(t *testing.T) { transitionsExact(t) }

// transitionsExact runs TestTransitionsExact's cases on an engine made
// with opts.
func transitionsExact(t *testing.T, opts ...Option) {
	g := testGraph(t)
	e := newEngine(t, g, opts...)
	n := 400000
	if small() {
		n = 3000
	}
	type tc struct {
		name   string
		alg    walk.Algorithm
		start  uint32
		step   int    // the step tested
		prev   uint32 // required vertices[step-1] (when step > 0)
		cur    uint32 // required vertices[step]
		starts uint32
	}
	var cases []tc
	for _, sm := range []walk.StepperKind{walk.StepperZPRS, walk.StepperDPRS} {
		for _, v := range []uint32{vHub, vMid} {
			cases = append(cases,
				tc{fmt.Sprintf("deepwalk-weighted-%s-v%d", sm, v), walk.Algorithm{Kind: walk.DeepWalk, Length: 1, Weighted: true, Stepper: sm}, v, 0, graph.NoVertex, v, v},
				tc{fmt.Sprintf("deepwalk-uniform-%s-v%d", sm, v), walk.Algorithm{Kind: walk.DeepWalk, Length: 1, Stepper: sm}, v, 0, graph.NoVertex, v, v},
				tc{fmt.Sprintf("metapath-%s-v%d", sm, v), walk.Algorithm{Kind: walk.MetaPath, Length: 2, Weighted: true, Schema: []uint8{3, 1}, Stepper: sm}, v, 0, graph.NoVertex, v, v},
			)
		}
		cases = append(cases,
			tc{fmt.Sprintf("node2vec-%s-hub", sm), walk.Algorithm{Kind: walk.Node2Vec, Length: 2, Weighted: true, P: 0.5, Q: 2, Stepper: sm}, vA, 1, vA, vHub, vA},
			tc{fmt.Sprintf("node2vec-%s-mid", sm), walk.Algorithm{Kind: walk.Node2Vec, Length: 2, Weighted: true, P: 0.5, Q: 2, Stepper: sm}, vB, 1, vB, vMid, vB},
		)
	}
	cases = append(cases,
		tc{"node2vec-rejection-hub", walk.Algorithm{Kind: walk.Node2Vec, Length: 2, Weighted: true, P: 0.5, Q: 2}, vA, 1, vA, vHub, vA},
		tc{"node2vec-rejection-uniform-mid", walk.Algorithm{Kind: walk.Node2Vec, Length: 2, P: 4, Q: 0.25}, vB, 1, vB, vMid, vB},
		tc{"node2vec-fallback-mid", walk.Algorithm{Kind: walk.Node2Vec, Length: 2, P: 0.001, Q: 1}, vB, 1, vB, vMid, vB},
	)
	// MetaPath's default on the GPU: the label tables (uniform or alias
	// inside the label's segment).
	for _, w := range []bool{false, true} {
		for _, v := range []uint32{vHub, vMid} {
			cases = append(cases, tc{fmt.Sprintf("metapath-tables-weighted=%v-v%d", w, v),
				walk.Algorithm{Kind: walk.MetaPath, Length: 2, Weighted: w, Schema: []uint8{3, 1}}, v, 0, graph.NoVertex, v, v})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			starts := make([]uint32, n)
			for i := range starts {
				starts[i] = c.starts
			}
			counts := map[uint32]int{}
			err := e.Run(context.Background(), []walk.Job{{Algorithm: c.alg, Seed: 99, Starts: starts}}, func(ch walk.Chunk) error {
				for k := 0; k < ch.Len(); k++ {
					w := ch.Walk(k)
					if len(w) <= c.step+1 || w[c.step] != c.cur || (c.step > 0 && w[c.step-1] != c.prev) {
						continue
					}
					counts[w[c.step+1]]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			chiSquare(t, c.name, counts, exactStep(g, c.alg, c.step, c.prev, c.cur))
		})
	}
}

// TestEmitErrorStopsRun: an emit error aborts the run and is returned; the
// engine stays usable.
func TestEmitErrorStopsRun(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g, WithMaxBatchWalks(500), WithChunkWalks(100))
	boom := errors.New("boom")
	jobs := []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, Seed: 1, Starts: allStarts(g, 1)}}
	calls := 0
	err := e.Run(context.Background(), jobs, func(walk.Chunk) error {
		_ = e.LastRunStats() // must not deadlock inside a Run
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	collect(t, e, jobs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Run(ctx, jobs, func(walk.Chunk) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}

// TestInvalidJobsRejected: validation errors wrap walk.ErrInvalidAlgorithm.
func TestInvalidJobsRejected(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g)
	err := e.Run(context.Background(), []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, Starts: []uint32{nTest}}}, func(walk.Chunk) error { return nil })
	if !errors.Is(err, walk.ErrInvalidAlgorithm) {
		t.Fatalf("err = %v", err)
	}
}

// TestCloseReleases: Close is idempotent and the engine refuses work after.
func TestCloseReleases(t *testing.T) {
	g := testGraph(t)
	e, err := openEngine(g, WithPreparedSlots(80), WithHostBufferBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	slots := 0
	for _, a := range e.Allocations() {
		if a.Name == "slot0.result" || a.Name == "slot1.result" {
			slots++
		}
	}
	if slots != 2 {
		t.Fatalf("prepared slots not allocated: %v", e.Allocations())
	}
	collect(t, e, []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 1, Starts: allStarts(g, 1)}})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if a := e.Allocations(); a != nil {
		t.Fatalf("allocations after close: %v", a)
	}
	if err := e.Run(context.Background(), nil, func(walk.Chunk) error { return nil }); err == nil {
		t.Fatal("run after close succeeded")
	}
}
