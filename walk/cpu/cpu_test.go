package cpu

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// collect runs jobs and returns each job's walks indexed by walk id.
func collect(t testing.TB, e walk.Engine, jobs []walk.Job) map[int][][]uint32 {
	t.Helper()
	out := map[int][][]uint32{}
	for _, j := range jobs {
		out[j.Tag] = make([][]uint32, len(j.Starts))
	}
	err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
		if len(c.Offsets) != c.Len()+1 || c.Offsets[0] != 0 || int(c.Offsets[c.Len()]) != len(c.Vertices) {
			t.Fatalf("malformed chunk: %d walks, offsets %v, %d vertices", c.Len(), c.Offsets, len(c.Vertices))
		}
		for k := 0; k < c.Len(); k++ {
			id := c.WalkIDs[k]
			if out[c.Tag][id] != nil {
				t.Fatalf("job %d walk %d emitted twice", c.Tag, id)
			}
			out[c.Tag][id] = slices.Clone(c.Walk(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for tag, ws := range out {
		for id, w := range ws {
			if w == nil {
				t.Fatalf("job %d walk %d never emitted", tag, id)
			}
		}
	}
	return out
}

func repeat(v uint32, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func allAlgorithms() []walk.Algorithm {
	return []walk.Algorithm{
		{Kind: walk.DeepWalk, Length: 12},
		{Kind: walk.DeepWalk, Length: 12, Weighted: true},
		{Kind: walk.DeepWalk, Length: 12, Weighted: true, Stepper: walk.StepperZPRS},
		{Kind: walk.DeepWalk, Length: 12, Weighted: true, Stepper: walk.StepperDPRS},
		{Kind: walk.PPR, Length: 12, StopProb: 0.2},
		{Kind: walk.PPR, Length: 12, StopProb: 0.2, Weighted: true},
		{Kind: walk.Node2Vec, Length: 12, P: 2, Q: 0.5},
		{Kind: walk.Node2Vec, Length: 12, P: 2, Q: 0.5, Weighted: true},
		{Kind: walk.MetaPath, Length: 12, Schema: []uint8{0, 1, 2}, Weighted: true},
	}
}

// Walks depend only on (seed, walk id), not on workers, chunking or which
// jobs share a run.
func TestRunIsDeterministicAcrossSchedules(t *testing.T) {
	g := testGraph(t)
	var jobs []walk.Job
	for i, a := range allAlgorithms() {
		starts := make([]uint32, 3000)
		for k := range starts {
			starts[k] = uint32(k % 15)
		}
		jobs = append(jobs, walk.Job{Tag: i, Algorithm: a, Seed: uint64(100 + i), Starts: starts})
	}
	// e1 walks weighted DeepWalk and PPR on the packed table, e2 on the
	// fused one: the table layout must not change a walk either.
	e1, _ := New(g, WithWorkers(1), WithChunkSize(4096), WithFusedTableLimit(0))
	e2, _ := New(g, WithWorkers(4), WithChunkSize(7), WithFusedTableLimit(1<<30))
	want := collect(t, e1, jobs)
	got := collect(t, e2, jobs)
	if e1.fused != nil || e2.fused == nil {
		t.Fatalf("fused tables: %d entries with the limit at 0, %d with 1 GiB; want none and some", len(e1.fused), len(e2.fused))
	}
	for _, j := range jobs {
		single := collect(t, e2, []walk.Job{j})
		for id := range j.Starts {
			if !slices.Equal(want[j.Tag][id], got[j.Tag][id]) || !slices.Equal(want[j.Tag][id], single[j.Tag][id]) {
				t.Fatalf("%s walk %d differs between schedules: %v vs %v vs %v", j.Algorithm, id, want[j.Tag][id], got[j.Tag][id], single[j.Tag][id])
			}
		}
	}
	// A different seed gives different walks.
	j := jobs[0]
	j.Seed++
	other := collect(t, e1, []walk.Job{j})
	same := 0
	for id := range j.Starts {
		if slices.Equal(other[j.Tag][id], want[j.Tag][id]) {
			same++
		}
	}
	if same > len(j.Starts)/2 {
		t.Errorf("changing the seed left %d of %d walks unchanged", same, len(j.Starts))
	}
}

// Every walk follows edges of the graph, starts where asked, and stops
// early only where the algorithm says it may.
func TestWalksAreValidPaths(t *testing.T) {
	g := testGraph(t)
	e, _ := New(g)
	for i, a := range allAlgorithms() {
		j := walk.Job{Tag: i, Algorithm: a, Seed: 9, Starts: []uint32{0, 1, 5, 11, 15, 3}}
		for id, w := range collect(t, e, []walk.Job{j})[i] {
			if w[0] != j.Starts[id] {
				t.Fatalf("%s: walk %d starts at %d, want %d", a, id, w[0], j.Starts[id])
			}
			if len(w) > a.Length+1 {
				t.Fatalf("%s: walk %d has %d steps, more than %d", a, id, len(w)-1, a.Length)
			}
			for s := 1; s < len(w); s++ {
				if !g.HasEdge(w[s-1], w[s]) {
					t.Fatalf("%s: walk %d step %d: %d -> %d is no edge", a, id, s, w[s-1], w[s])
				}
			}
			last := w[len(w)-1]
			if len(w) < a.Length+1 && a.Kind != walk.PPR && a.Kind != walk.MetaPath && g.Degree(last) > 0 {
				t.Fatalf("%s: walk %d stopped early at %d which has out-edges", a, id, last)
			}
		}
	}
}

func TestMetaPathFollowsSchema(t *testing.T) {
	g := testGraph(t)
	e, _ := New(g)
	schema := []uint8{1, 0, 2}
	for _, sm := range []walk.StepperKind{walk.StepperAuto, walk.StepperZPRS, walk.StepperDPRS} {
		a := walk.Algorithm{Kind: walk.MetaPath, Length: 20, Schema: schema, Weighted: true, Stepper: sm}
		j := walk.Job{Algorithm: a, Seed: 3, Starts: repeat(0, 2000)}
		ended := 0
		for _, w := range collect(t, e, []walk.Job{j})[0] {
			for s := 1; s < len(w); s++ {
				want := schema[(s-1)%len(schema)]
				if !hasLabelledEdge(g, w[s-1], w[s], want) {
					t.Fatalf("%s: step %d %d -> %d does not carry label %d", sm, s-1, w[s-1], w[s], want)
				}
			}
			if n := len(w) - 1; n < a.Length {
				ended++
				if hasLabel(g, w[n], schema[n%len(schema)]) {
					t.Fatalf("%s: walk ended at %d although it has an edge labelled %d", sm, w[n], schema[n%len(schema)])
				}
			}
		}
		if ended == 0 {
			t.Errorf("%s: no walk ever ran out of matching edges; the test graph should force some", sm)
		}
	}
}

func hasLabelledEdge(g *graph.Graph, u, v uint32, l uint8) bool {
	for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
		if g.Targets[e] == v && g.Labels[e] == l {
			return true
		}
	}
	return false
}

func hasLabel(g *graph.Graph, u uint32, l uint8) bool {
	for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
		if g.Labels[e] == l {
			return true
		}
	}
	return false
}

// The number of steps of a PPR walk on a graph without dead ends is
// geometric, truncated at the maximum length.
func TestPPRLengthIsGeometric(t *testing.T) {
	var edges []graph.Edge
	for i := int64(0); i < 20; i++ {
		edges = append(edges, graph.Edge{Src: i, Dst: (i + 1) % 20}, graph.Edge{Src: i, Dst: (i + 7) % 20})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "ring", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := New(g)
	const stop, maxLen, n = 0.15, 10, 300000
	for _, sm := range []walk.StepperKind{walk.StepperAuto, walk.StepperZPRS} {
		a := walk.Algorithm{Kind: walk.PPR, Length: maxLen, StopProb: stop, Stepper: sm}
		counts := map[uint32]int{}
		for _, w := range collect(t, e, []walk.Job{{Algorithm: a, Seed: 77, Starts: repeat(0, n)}})[0] {
			counts[uint32(len(w)-1)]++
		}
		probs := map[uint32]float64{}
		for k := 0; k < maxLen; k++ {
			probs[uint32(k)] = math.Pow(1-stop, float64(k)) * stop
		}
		probs[maxLen] = math.Pow(1-stop, maxLen)
		chiSquare(t, "ppr length "+sm.String(), counts, probs)
	}
}

// Node2Vec's second-order behaviour over whole walks: the joint distribution
// of the first two steps, enumerated exactly, against the engine's walks.
func TestNode2VecTwoStepDistribution(t *testing.T) {
	g := testGraph(t)
	e, _ := New(g)
	for _, a := range []walk.Algorithm{
		{Kind: walk.Node2Vec, Length: 2, P: 2, Q: 0.5, Weighted: true},
		{Kind: walk.Node2Vec, Length: 2, P: 0.5, Q: 3},
		{Kind: walk.Node2Vec, Length: 2, P: 2, Q: 0.5, Weighted: true, Stepper: walk.StepperDPRS},
	} {
		const n = 300000
		probs := map[uint32]float64{}
		for v1, p1 := range exactStep(g, a, 0, graph.NoVertex, 0) {
			for v2, p2 := range exactStep(g, a, 1, 0, v1) {
				probs[v1*64+v2] += p1 * p2
			}
		}
		counts := map[uint32]int{}
		for _, w := range collect(t, e, []walk.Job{{Algorithm: a, Seed: 5, Starts: repeat(0, n)}})[0] {
			if len(w) != 3 {
				t.Fatalf("walk %v should take two steps", w)
			}
			counts[w[1]*64+w[2]]++
		}
		chiSquare(t, a.String(), counts, probs)
	}
}

func TestDeadEndEndsWalk(t *testing.T) {
	g := testGraph(t)
	e, _ := New(g)
	w := collect(t, e, []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 8}, Starts: []uint32{15}}})[0][0]
	if len(w) != 1 || w[0] != 15 {
		t.Fatalf("walk from dead end = %v, want [15]", w)
	}
}

func TestValidateRejectsBadParameters(t *testing.T) {
	g := testGraph(t)
	unweighted, _ := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{DenseIDs: true})
	cases := []struct {
		name string
		a    walk.Algorithm
		g    *graph.Graph
	}{
		{"zero length", walk.Algorithm{Kind: walk.DeepWalk}, g},
		{"too long", walk.Algorithm{Kind: walk.DeepWalk, Length: walk.MaxLength + 1}, g},
		{"unknown kind", walk.Algorithm{Kind: 99, Length: 3}, g},
		{"ppr stop 0", walk.Algorithm{Kind: walk.PPR, Length: 3}, g},
		{"ppr stop 1", walk.Algorithm{Kind: walk.PPR, Length: 3, StopProb: 1}, g},
		{"stop on deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 3, StopProb: 0.1}, g},
		{"p zero", walk.Algorithm{Kind: walk.Node2Vec, Length: 3, Q: 1}, g},
		{"q negative", walk.Algorithm{Kind: walk.Node2Vec, Length: 3, P: 1, Q: -1}, g},
		{"q NaN", walk.Algorithm{Kind: walk.Node2Vec, Length: 3, P: 1, Q: math.NaN()}, g},
		{"p on deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 3, P: 1}, g},
		{"empty schema", walk.Algorithm{Kind: walk.MetaPath, Length: 3}, g},
		{"schema label missing", walk.Algorithm{Kind: walk.MetaPath, Length: 3, Schema: []uint8{0, 7}}, g},
		{"schema on ppr", walk.Algorithm{Kind: walk.PPR, Length: 3, StopProb: 0.5, Schema: []uint8{1}}, g},
		{"weighted on unweighted graph", walk.Algorithm{Kind: walk.DeepWalk, Length: 3, Weighted: true}, unweighted},
		{"metapath on unlabelled graph", walk.Algorithm{Kind: walk.MetaPath, Length: 3, Schema: []uint8{0}}, unweighted},
		{"alias for node2vec", walk.Algorithm{Kind: walk.Node2Vec, Length: 3, P: 1, Q: 1, Stepper: walk.StepperAlias}, g},
		{"uniform for weighted", walk.Algorithm{Kind: walk.DeepWalk, Length: 3, Weighted: true, Stepper: walk.StepperUniform}, g},
		{"rejection for deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 3, Stepper: walk.StepperRejection}, g},
	}
	for _, c := range cases {
		err := c.a.Validate(c.g)
		if !errors.Is(err, walk.ErrInvalidAlgorithm) {
			t.Errorf("%s: Validate = %v, want ErrInvalidAlgorithm", c.name, err)
		}
	}
	e, _ := New(g)
	err := e.Run(context.Background(), []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 3}, Starts: []uint32{99}}}, func(walk.Chunk) error { return nil })
	if !errors.Is(err, walk.ErrInvalidAlgorithm) {
		t.Errorf("start beyond the graph: Run = %v, want ErrInvalidAlgorithm", err)
	}
}

func TestRunStopsOnEmitErrorAndCancel(t *testing.T) {
	g := testGraph(t)
	e, _ := New(g, WithChunkSize(10))
	boom := errors.New("sink full")
	j := walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, Starts: repeat(0, 10000)}
	calls := 0
	if err := e.Run(context.Background(), []walk.Job{j}, func(walk.Chunk) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Run = %v after %d emits, want %v after 1", err, calls, boom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := e.Run(ctx, []walk.Job{j}, func(walk.Chunk) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
}

// The lockstep walkers must produce exactly the walks of stepper.walk, the
// one-walk-at-a-time reference, for every algorithm they serve.
func TestLockstepMatchesSingleWalks(t *testing.T) {
	rmat, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 16, Seed: 3, Undirected: true, Weighted: true, Labels: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*graph.Graph{testGraph(t), rmat} {
		lockstepMatches(t, g)
	}
}

func lockstepMatches(t *testing.T, g *graph.Graph) {
	starts := make([]uint32, 3000)
	for i := range starts {
		starts[i] = uint32(i*7919) % uint32(g.NumVertices())
	}
	e, _ := New(g, WithFusedTableLimit(1<<30))
	defer runtime.KeepAlive(e) // its tables are read below through steppers only
	e.PrepareTables()
	// Extreme p/q make most proposals fail, so walks reach the exact
	// fallback after maxRejections attempts.
	extreme := walk.Algorithm{Kind: walk.Node2Vec, P: 1e-3, Q: 1e3, Weighted: true}
	unweightedMeta := walk.Algorithm{Kind: walk.MetaPath, Schema: []uint8{2, 0}}
	for _, a := range append(allAlgorithms(), extreme, unweightedMeta) {
		for _, length := range []int{1, 2, 12} {
			a.Length = length
			s := newStepper(g, a, 99, map[bool][]aliasEntry{true: e.packedTable()}[needsAlias(a)])
			s.fence = e.fences()
			if walk.UsesLabelTables(a, g) {
				s.segs = e.labelTables()
			}
			if !s.lockstep() && !s.lockstepNode2Vec() {
				continue
			}
			stride := length + 1
			buf, lens := make([]uint32, len(starts)*stride), make([]uint32, len(starts))
			if s.ring() {
				s.walkRing(starts, 5, buf, lens)
			} else if s.lockstep() {
				s.walkLockstep(starts, 5, buf, lens)
			} else {
				s.walkNode2VecLockstep(starts, 5, buf, lens)
			}
			// The same walkers on the fused table serve the same walks.
			var fbuf, flens []uint32
			if e.fusedFor(a) {
				f := *s
				f.alias, f.fused = nil, e.fusedTable()
				fbuf, flens = make([]uint32, len(starts)*stride), make([]uint32, len(starts))
				if f.lockstepNode2Vec() {
					f.walkNode2VecLockstep(starts, 5, fbuf, flens)
				} else if f.ring() {
					f.walkRing(starts, 5, fbuf, flens)
				} else {
					t.Fatalf("%v: no walker on the fused table", a)
				}
			}
			want := make([]uint32, stride)
			for k, v := range starts {
				n := s.walk(5+uint64(k), v, want)
				got := buf[k*stride : k*stride+int(lens[k])]
				if !slices.Equal(got, want[:n]) {
					t.Fatalf("%v length %d walk %d: lockstep %v, single %v", a, length, k, got, want[:n])
				}
				if fbuf != nil && !slices.Equal(fbuf[k*stride:k*stride+int(flens[k])], want[:n]) {
					t.Fatalf("%v length %d walk %d: fused %v, single %v", a, length, k, fbuf[k*stride:k*stride+int(flens[k])], want[:n])
				}
			}
		}
	}
}

// The fused table is used only where it fits the limit and serves only the
// walks it can: weighted first-order walks on the alias sampler.
func TestFusedTableChoice(t *testing.T) {
	g := testGraph(t)
	need := int64(g.NumEdges()) * fusedBytesPerEdge
	cases := []struct {
		name  string
		limit int64
		alg   walk.Algorithm
		want  bool
	}{
		{"fits", need, walk.Algorithm{Kind: walk.DeepWalk, Length: 4, Weighted: true}, true},
		{"weighted ppr", need, walk.Algorithm{Kind: walk.PPR, Length: 4, StopProb: 0.5, Weighted: true}, true},
		{"one byte short", need - 1, walk.Algorithm{Kind: walk.DeepWalk, Length: 4, Weighted: true}, false},
		{"off", 0, walk.Algorithm{Kind: walk.DeepWalk, Length: 4, Weighted: true}, false},
		{"uniform", need, walk.Algorithm{Kind: walk.DeepWalk, Length: 4}, true},
		{"uniform ppr", need, walk.Algorithm{Kind: walk.PPR, Length: 4, StopProb: 0.5}, true},
		{"zprs", need, walk.Algorithm{Kind: walk.DeepWalk, Length: 4, Weighted: true, Stepper: walk.StepperZPRS}, false},
		{"node2vec", need, walk.Algorithm{Kind: walk.Node2Vec, Length: 4, P: 1, Q: 1, Weighted: true}, true},
		{"unweighted node2vec", need, walk.Algorithm{Kind: walk.Node2Vec, Length: 4, P: 1, Q: 1}, false},
		{"metapath", need, walk.Algorithm{Kind: walk.MetaPath, Length: 4, Schema: []uint8{0}, Weighted: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := New(g, WithFusedTableLimit(c.limit))
			if err != nil {
				t.Fatal(err)
			}
			if got := e.fusedFor(c.alg); got != c.want {
				t.Fatalf("fusedFor(%v) with limit %d = %v, want %v", c.alg, c.limit, got, c.want)
			}
			if err := e.Run(context.Background(), []walk.Job{{Algorithm: c.alg, Seed: 1, Starts: []uint32{0, 1, 2}}}, func(walk.Chunk) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if built := len(e.fused) > 0; built != c.want {
				t.Fatalf("fused table built = %v, want %v", built, c.want)
			}
			if c.want && e.alias != nil {
				t.Fatal("the packed table was built although the fused one serves the walk")
			}
		})
	}
	if _, err := New(g, WithFusedTableLimit(-1)); err == nil {
		t.Error("a negative fused table limit was accepted")
	}
}

// Every field of a fused entry must describe the vertex it names.
func TestFusedEntriesDescribeTheirVertices(t *testing.T) {
	g := testGraph(t)
	owner := new(Engine)
	defer runtime.KeepAlive(owner)
	tab := buildFused(g, owner)
	prob, alias := walk.BuildAlias(g)
	for v := 0; v < g.NumVertices(); v++ {
		a, b := g.Offsets[v], g.Offsets[v+1]
		for e := a; e < b; e++ {
			f := tab[e]
			keep, alt := g.Targets[e], g.Targets[a+uint64(alias[e])]
			if f.prob != prob[e] || f.to[0].v != keep || f.to[1].v != alt {
				t.Fatalf("edge %d: entry %+v, want prob %v keep %d alt %d", e, f, prob[e], keep, alt)
			}
			for _, c := range []struct {
				v   uint32
				lo  uint64
				deg uint32
			}{{keep, f.lo64(0), f.to[0].deg}, {alt, f.lo64(1), f.to[1].deg}} {
				if c.lo != g.Offsets[c.v] || uint64(c.deg) != g.Offsets[c.v+1]-g.Offsets[c.v] {
					t.Fatalf("edge %d: vertex %d range (%d, %d), want (%d, %d)", e, c.v, c.lo, c.deg, g.Offsets[c.v], g.Offsets[c.v+1]-g.Offsets[c.v])
				}
			}
		}
	}
}

// EstimateTables must give the sizes the engine's tables take once built.
func TestEstimateTablesMatchesBuiltTables(t *testing.T) {
	rmat, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 2, Undirected: true, Weighted: true, Labels: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*graph.Graph{testGraph(t), rmat} {
		est := EstimateTables(g)
		fused, _ := New(g, WithFusedTableLimit(1<<40))
		packed, _ := New(g, WithFusedTableLimit(0))
		fused.fusedTable()
		packed.packedTable()
		fences := fused.fences().bytes()
		labels := fused.labelTables().bytes()
		var sums int64
		if g.Weighted() && g.NumLabels > 0 {
			before := fused.TableBytes()
			fused.labelWeightSums()
			sums = fused.TableBytes() - before
		}
		got := TableSizes{Packed: packed.TableBytes(), Fused: fused.TableBytes() - fences - labels - sums, Fences: fences, Labels: labels, LabelSums: sums}
		if got != est {
			t.Errorf("%s: estimated %+v, built %+v", g.Name, est, got)
		}
	}
}

// The ring's vector rounds (ringvec_amd64.s) take exactly the steps of its Go
// rounds: every walk of weighted and uniform DeepWalk, at lengths that end
// walks in every round position, on a graph with vertices without edges
// (directed R-MAT) and one without (undirected).
func TestRingVectorRoundsMatchGoRounds(t *testing.T) {
	if !hasRingAVX512 {
		t.Skip("no AVX-512 here: the ring's rounds run in Go only")
	}
	for _, undirected := range []bool{false, true} {
		g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 5, Undirected: undirected, Weighted: true})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := New(g, WithFusedTableLimit(1<<30))
		defer runtime.KeepAlive(e) // its fused table is read below through steppers only
		starts := make([]uint32, 5000)
		for i := range starts {
			starts[i] = uint32(i*7919) % uint32(g.NumVertices())
		}
		for _, a := range []walk.Algorithm{{Kind: walk.DeepWalk, Weighted: true}, {Kind: walk.DeepWalk},
			{Kind: walk.PPR, StopProb: 0.2}, {Kind: walk.PPR, StopProb: 0.05, Weighted: true}} {
			for _, length := range []int{1, 2, 7, 64, 80} {
				a.Length = length
				s := newStepper(g, a, 42, nil)
				s.fused = e.fusedTable()
				if !s.ring() {
					t.Fatalf("%v does not walk on the ring", a)
				}
				stride := length + 1
				walk := func(goRounds bool) ([]uint32, []uint32) {
					f := *s
					f.goRounds, f.vecRounds = goRounds, !goRounds
					buf, lens := make([]uint32, len(starts)*stride), make([]uint32, len(starts))
					if _, vec := f.walkRing(starts, 9, buf, lens); vec == 0 && !goRounds {
						t.Fatalf("%v length %d: no round ran in vector lanes", a, length)
					}
					return buf, lens
				}
				vbuf, vlens := walk(false)
				gbuf, glens := walk(true)
				ended := 0
				for k := range starts {
					v, w := vbuf[k*stride:k*stride+int(vlens[k])], gbuf[k*stride:k*stride+int(glens[k])]
					if !slices.Equal(v, w) {
						t.Fatalf("undirected %v %v length %d walk %d: vector rounds %v, Go rounds %v", undirected, a, length, k, v, w)
					}
					if int(vlens[k]) < stride {
						ended++
					}
				}
				if length == 80 && !undirected && ended == 0 {
					t.Fatalf("no walk ended at a vertex without edges: the test misses that case")
				}
			}
		}
	}
}

// A ring slot whose walk ends takes the unit's next walk in the same visit,
// its first step drawn when its batch was started, and walks that end at
// their start never take a slot: no slot idles for a round between two
// walks, which cost PPR (four steps a walk on average) a round in five. With
// walks of one step from vertices with edges, every round ends and refills
// all 64 slots, so a unit takes one round per 64 walks that step.
func TestRingRefillsSlotsWithoutIdleRounds(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 5, Undirected: true, Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := New(g, WithFusedTableLimit(1<<30))
	defer runtime.KeepAlive(e) // its tables are read below through steppers only
	var withEdges []uint32
	for v := range g.NumVertices() {
		if g.Offsets[v+1] > g.Offsets[v] {
			withEdges = append(withEdges, uint32(v))
		}
	}
	starts := make([]uint32, 50*ringSlots)
	for i := range starts {
		starts[i] = withEdges[(i*7919)%len(withEdges)]
	}
	for _, tc := range []struct {
		name  string
		alg   walk.Algorithm
		fused bool
	}{
		{"deepwalk fused", walk.Algorithm{Kind: walk.DeepWalk, Length: 1, Weighted: true}, true},
		{"deepwalk packed", walk.Algorithm{Kind: walk.DeepWalk, Length: 1, Weighted: true}, false},
		{"deepwalk graph arrays", walk.Algorithm{Kind: walk.DeepWalk, Length: 1}, false},
		{"ppr fused", walk.Algorithm{Kind: walk.PPR, Length: 1, StopProb: 0.2}, true},
		{"ppr graph arrays", walk.Algorithm{Kind: walk.PPR, Length: 1, StopProb: 0.5}, false},
	} {
		for _, goRounds := range []bool{true, false} {
			if !goRounds && (!tc.fused || !hasRingAVX512) {
				continue
			}
			s := newStepper(g, tc.alg, 11, map[bool][]aliasEntry{true: e.packedTable()}[needsAlias(tc.alg)])
			if tc.fused {
				s.alias, s.fused = nil, e.fusedTable()
			}
			s.goRounds, s.vecRounds = goRounds, !goRounds
			buf, lens := make([]uint32, len(starts)*2), make([]uint32, len(starts))
			rounds, _ := s.walkRing(starts, 0, buf, lens)
			stepped := 0
			for _, l := range lens {
				stepped += int(l) - 1
			}
			if tc.alg.Kind == walk.DeepWalk && stepped != len(starts) {
				t.Fatalf("%s: %d of %d walks took their step", tc.name, stepped, len(starts))
			}
			if want := (stepped + ringSlots - 1) / ringSlots; rounds != want {
				t.Errorf("%s (Go rounds %v): %d rounds for %d walks of one step, want %d", tc.name, goRounds, rounds, stepped, want)
			}
		}
	}
}

// Tables built on fewer goroutines (WithTableWorkers, a live graph's
// compaction beside its applier) are the tables built on every core.
func TestTableWorkersBuildTheSameTables(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	g := testGraph(t)
	for _, fused := range []bool{true, false} {
		var limit []Option
		if !fused {
			limit = []Option{WithFusedTableLimit(0)}
		}
		all, err := New(g, limit...)
		if err != nil {
			t.Fatal(err)
		}
		one, err := New(g, append(limit, WithTableWorkers(1))...)
		if err != nil {
			t.Fatal(err)
		}
		all.PrepareTables()
		one.PrepareTables()
		if !slices.Equal(all.fused, one.fused) || !slices.Equal(all.alias, one.alias) || len(all.fused)+len(all.alias) == 0 {
			t.Fatalf("fused %v: the tables built on one goroutine differ from those on four (or none was built)", fused)
		}
		all.Close()
		one.Close()
	}
}
