package cpu

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/stattest"
	"github.com/walkstage/walkstage/walk"
)

// timedWalks runs job on e and returns its walks and their times by walk id.
func timedWalks(t testing.TB, e walk.Engine, j walk.Job) ([][]uint32, [][]int64) {
	t.Helper()
	walks, times := make([][]uint32, len(j.Starts)), make([][]int64, len(j.Starts))
	err := e.Run(context.Background(), []walk.Job{j}, func(c walk.Chunk) error {
		if j.WithTimes != (c.Times != nil) || c.Times != nil && len(c.Times) != len(c.Vertices) {
			t.Fatalf("chunk times: %d for %d vertices (with times: %v)", len(c.Times), len(c.Vertices), j.WithTimes)
		}
		for k := range c.Len() {
			id := c.WalkIDs[k]
			walks[id] = slices.Clone(c.Walk(k))
			if c.Times != nil {
				times[id] = slices.Clone(c.Times[c.Offsets[k]:c.Offsets[k+1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return walks, times
}

func timedRMAT(t testing.TB, o graph.RMATOptions) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// temporalCases are the parameter sets the tests walk with.
func temporalCases() map[string]walk.TimeParams {
	return map[string]walk.TimeParams{
		"uniform":                {},
		"linear":                 {Bias: walk.TimeLinear},
		"exponential":            {Bias: walk.TimeExponential, Scale: 50},
		"exponential-tiny-scale": {Bias: walk.TimeExponential, Scale: 0.5},
		"uniform-start-gap":      {Start: 200, HasStart: true, MaxGap: 40, HasMaxGap: true},
		"linear-gap":             {Bias: walk.TimeLinear, MaxGap: 100, HasMaxGap: true},
		"exponential-gap":        {Bias: walk.TimeExponential, Scale: 20, MaxGap: 0, HasMaxGap: true},
		"backward":               {Backward: true},
		"backward-linear-start":  {Bias: walk.TimeLinear, Backward: true, Start: 700, HasStart: true},
		"backward-exp-gap":       {Bias: walk.TimeExponential, Scale: 30, Backward: true, MaxGap: 60, HasMaxGap: true},
	}
}

// Every walk respects time: each step takes an edge that exists with the
// reported time, at or after (backward: at or before) the previous step's
// time and within the gap; a walk ends early only where no edge is left in
// its window; asking for times changes no walk.
func TestTemporalWalksRespectTime(t *testing.T) {
	g := timedRMAT(t, graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 3, Weighted: true, TimeSpan: 1000})
	e, err := New(g, WithWorkers(2), WithChunkSize(100))
	if err != nil {
		t.Fatal(err)
	}
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	for name, tp := range temporalCases() {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 20, Weighted: weighted, Time: tp}
			walks, times := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 9, Starts: starts, WithTimes: true})
			plain, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 9, Starts: starts})
			steps := 0
			for id, w := range walks {
				if !slices.Equal(w, plain[id]) {
					t.Fatalf("%s weighted=%v walk %d: %v with times, %v without", name, weighted, id, w, plain[id])
				}
				checkTemporalWalk(t, g, tp, w, times[id], a.Length)
				steps += len(w) - 1
			}
			if steps < g.NumVertices()/4 {
				t.Errorf("%s weighted=%v: only %d steps in %d walks", name, weighted, steps, len(walks))
			}
		}
	}
}

func checkTemporalWalk(t *testing.T, g *graph.Graph, tp walk.TimeParams, w []uint32, ts []int64, length int) {
	t.Helper()
	if len(ts) != len(w) || ts[0] != tp.Bound() {
		t.Fatalf("%+v: walk %v times %v: want one time per vertex, the first %d", tp, w, ts, tp.Bound())
	}
	inWindow := func(prev, tt int64, first bool) bool {
		if !tp.Backward && tt < prev || tp.Backward && tt > prev {
			return false
		}
		if !tp.HasMaxGap || first && !tp.HasStart {
			return true
		}
		d := tt - prev
		if tp.Backward {
			d = -d
		}
		return d <= tp.MaxGap
	}
	for i := 1; i < len(w); i++ {
		found := false
		for e := g.Offsets[w[i-1]]; e < g.Offsets[w[i-1]+1]; e++ {
			found = found || g.Targets[e] == w[i] && g.EdgeTime(e) == ts[i]
		}
		if !found {
			t.Fatalf("%+v: walk %v times %v: step %d takes no edge of the graph", tp, w, ts, i)
		}
		if !inWindow(ts[i-1], ts[i], i == 1) {
			t.Fatalf("%+v: walk %v times %v: step %d goes from time %d to %d", tp, w, ts, i, ts[i-1], ts[i])
		}
	}
	if len(w) < length+1 {
		last := w[len(w)-1]
		for e := g.Offsets[last]; e < g.Offsets[last+1]; e++ {
			if inWindow(ts[len(ts)-1], g.Times[e], len(w) == 1) {
				t.Fatalf("%+v: walk %v times %v ended with an edge at time %d in its window", tp, w, ts, g.Times[e])
			}
		}
	}
}

// timedStar is vertex 0 with twelve out-edges of distinct targets whose
// time order is not their target order, two pairs of equal times, and
// distinct weights.
func timedStar(t testing.TB) *graph.Graph {
	t.Helper()
	times := []int64{5, 10, 10, 20, 30, 45, 50, 70, 71, 90, 100, 130}
	targets := []int64{7, 3, 12, 1, 9, 2, 11, 4, 8, 6, 5, 10}
	var edges []graph.Edge
	for i, tt := range times {
		edges = append(edges, graph.Edge{Src: 0, Dst: targets[i], Time: tt, Weight: float32(1 + i%5)})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "star", DenseIDs: true, Weighted: true, Timed: true, NumVertices: 13})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// exactTemporalStep is the first step's distribution from vertex 0 by the
// definition in temporal.go, computed without the stepper's code
// (stattest.TemporalStep), by target.
func exactTemporalStep(g *graph.Graph, tp walk.TimeParams, weighted bool) map[uint32]float64 {
	a := walk.Algorithm{Kind: walk.Temporal, Weighted: weighted, Time: tp}
	probs := map[uint32]float64{}
	for k, p := range stattest.TemporalStep(g, a, 0, tp.Bound(), tp.HasStart, graph.NoVertex) {
		probs[uint32(k[0])] += p
	}
	return probs
}

// The first step follows the exact distribution of each time bias, with
// and without weights, forward and backward; a narrow exponential scale
// puts most of the window's mass on its nearest edges.
func TestTemporalStepDistribution(t *testing.T) {
	g := timedStar(t)
	e, err := New(g, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]walk.TimeParams{
		"uniform":              {Start: 10, HasStart: true, MaxGap: 100, HasMaxGap: true},
		"linear":               {Bias: walk.TimeLinear, Start: 10, HasStart: true},
		"linear-all":           {Bias: walk.TimeLinear},
		"exponential":          {Bias: walk.TimeExponential, Scale: 30, Start: 10, HasStart: true, MaxGap: 100, HasMaxGap: true},
		"exponential-narrow":   {Bias: walk.TimeExponential, Scale: 2, Start: 8, HasStart: true},
		"backward-uniform":     {Backward: true, Start: 100, HasStart: true},
		"backward-linear":      {Bias: walk.TimeLinear, Backward: true, Start: 90, HasStart: true, MaxGap: 60, HasMaxGap: true},
		"backward-exponential": {Bias: walk.TimeExponential, Scale: 25, Backward: true},
		"backward-exp-narrow":  {Bias: walk.TimeExponential, Scale: 1, Backward: true, Start: 71, HasStart: true},
	}
	const n = 200_000
	starts := make([]uint32, n)
	for name, tp := range cases {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: weighted, Time: tp}
			walks, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 1234, Starts: starts})
			counts := map[uint32]int{}
			for _, w := range walks {
				if len(w) != 2 {
					t.Fatalf("%s: walk %v took no step", name, w)
				}
				counts[w[1]]++
			}
			nm := name
			if weighted {
				nm += "-weighted"
			}
			stattest.ChiSquare(t, nm, counts, exactTemporalStep(g, tp, weighted))
		}
	}
}

// hubGraph is vertex 0 with 200 out-edges at random times in [0, 1000)
// (many ties) and random weights: windows of many time scales.
func hubGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(8, 9))
	var edges []graph.Edge
	for v := int64(1); v <= 200; v++ {
		edges = append(edges, graph.Edge{Src: 0, Dst: v, Time: r.Int64N(1000), Weight: 0.5 + 4*r.Float32()})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "hub", DenseIDs: true, Weighted: true, Timed: true, NumVertices: 201})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// On a window of many time scales and ties, the exponential draw and the
// weighted linear rejection follow the exact distribution.
func TestTemporalHubDistribution(t *testing.T) {
	g := hubGraph(t)
	e, err := New(g, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]walk.TimeParams{
		"exponential":          {Bias: walk.TimeExponential, Scale: 15, Start: 100, HasStart: true},
		"exponential-wide":     {Bias: walk.TimeExponential, Scale: 400},
		"backward-exponential": {Bias: walk.TimeExponential, Scale: 40, Backward: true, Start: 900, HasStart: true, MaxGap: 500, HasMaxGap: true},
		"linear":               {Bias: walk.TimeLinear, Start: 300, HasStart: true},
	}
	const n = 300_000
	starts := make([]uint32, n)
	for name, tp := range cases {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: weighted, Time: tp}
			walks, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 77, Starts: starts})
			counts := map[uint32]int{}
			for _, w := range walks {
				if len(w) != 2 {
					t.Fatalf("%s: walk %v took no step", name, w)
				}
				counts[w[1]]++
			}
			nm := name
			if weighted {
				nm += "-weighted"
			}
			c, p := pooled(counts, exactTemporalStep(g, tp, weighted), n)
			stattest.ChiSquare(t, "hub "+nm, c, p)
		}
	}
}

// pooled merges the cells expected fewer than 5 times in n samples into
// one, as chi-square needs: a window's far edges have probabilities down
// to 1e-20, and one draw of an edge of probability 1e-9 (which a correct
// sampler makes now and then) would otherwise fail the test.
func pooled(counts map[uint32]int, probs map[uint32]float64, n int) (map[uint32]int, map[uint32]float64) {
	const rare = math.MaxUint32
	c, p := map[uint32]int{}, map[uint32]float64{}
	for v, q := range probs {
		k := v
		if q*float64(n) < 5 {
			k = rare
		}
		p[k] += q
		c[k] += counts[v]
	}
	for v, x := range counts {
		if _, ok := probs[v]; !ok {
			c[v] += x // probability 0: ChiSquare fails on it
		}
	}
	return c, p
}

// The rejection loop's fallback, the one-lane reservoir scan over the
// window, is exact on its own for every bias that rejects.
func TestTemporalFallbackDistribution(t *testing.T) {
	g := timedStar(t)
	cases := map[string]walk.TimeParams{
		"linear":               {Bias: walk.TimeLinear, Start: 10, HasStart: true},
		"exponential":          {Bias: walk.TimeExponential, Scale: 30, Start: 10, HasStart: true, MaxGap: 100, HasMaxGap: true},
		"backward-exponential": {Bias: walk.TimeExponential, Scale: 25, Backward: true},
	}
	g = hubGraph(t)
	for name, tp := range cases {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 1, Weighted: weighted, Time: tp}
			s := fallbackStepper(g, a, 99)
			counts := map[uint32]int{}
			out := make([]uint32, 2)
			for id := range uint64(100_000) {
				if s.walkTemporal(id, 0, out, nil) != 2 {
					t.Fatalf("%s: walk %d took no step", name, id)
				}
				counts[out[1]]++
			}
			stattest.ChiSquare(t, name+" fallback", counts, exactTemporalStep(g, tp, weighted))
		}
	}
}

// fallbackStepper is a stepper of a on g (seed) that takes no rejection
// attempts: every step is its exact fallback.
func fallbackStepper(g *graph.Graph, a walk.Algorithm, seed uint64) *stepper {
	s := newStepper(g, a, seed, nil)
	var cumw []float64
	if a.Weighted {
		cumw = (&Engine{g: g}).windowWeights()
	}
	s.tmp = temporalGraph(g, a, cumw, nil, nil, walk.CoarseTimes(g.Times))
	s.tmp.rejections = 0
	return s
}

// linearPos gives p with probability (n-p)/(n(n+1)/2) over all word pairs
// of a small n exactly, up to Bounded's rounding (enumerated on a grid).
func TestLinearPosIsLinear(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7} {
		counts := make([]float64, n)
		const grid = 1 << 10
		for a := range grid {
			for b := range grid {
				counts[linearPos(uint32(a)<<22|1<<21, uint32(b)<<22|1<<21, n)]++
			}
		}
		for p := range n {
			want := float64(n-p) / float64(n*(n+1)/2)
			if got := counts[p] / (grid * grid); math.Abs(got-want) > 2e-3 {
				t.Errorf("n=%d p=%d: probability %.4f, want %.4f", n, p, got, want)
			}
		}
	}
}

func TestTemporalValidation(t *testing.T) {
	timed := timedStar(t)
	untimed, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{Name: "plain", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	tmp := func(tp walk.TimeParams) walk.Algorithm {
		return walk.Algorithm{Kind: walk.Temporal, Length: 5, Time: tp}
	}
	for _, c := range []struct {
		name string
		a    walk.Algorithm
		g    *graph.Graph
		want string // "" = valid
	}{
		{"valid", tmp(walk.TimeParams{Bias: walk.TimeExponential, Scale: 3}), timed, ""},
		{"untimed graph", tmp(walk.TimeParams{}), untimed, `temporal walks need edge times, and graph "plain" has none`},
		{"no scale", tmp(walk.TimeParams{Bias: walk.TimeExponential}), timed, "exponential time_bias needs a time_scale > 0"},
		{"negative scale", tmp(walk.TimeParams{Bias: walk.TimeExponential, Scale: -1}), timed, "time_scale > 0"},
		{"infinite scale", tmp(walk.TimeParams{Bias: walk.TimeExponential, Scale: math.Inf(1)}), timed, "time_scale > 0"},
		{"scale on linear", tmp(walk.TimeParams{Bias: walk.TimeLinear, Scale: 2}), timed, "time_scale is only for the exponential"},
		{"bad bias", tmp(walk.TimeParams{Bias: 9}), timed, "unknown time_bias"},
		{"negative gap", tmp(walk.TimeParams{MaxGap: -1, HasMaxGap: true}), timed, "max_time_gap -1 must be 0 or more"},
		{"time on deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Time: walk.TimeParams{Backward: true}}, timed, "only for temporal"},
		{"alias sampler", walk.Algorithm{Kind: walk.Temporal, Length: 5, Stepper: walk.StepperAlias}, timed, "sampler alias cannot serve them"},
		{"window on deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Stepper: walk.StepperWindow}, timed, "window sampler is for temporal"},
		{"weighted untimed", walk.Algorithm{Kind: walk.Temporal, Length: 5, Weighted: true}, untimed, "needs edge weights"},
	} {
		err := c.a.Validate(c.g)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want ErrInvalidAlgorithm with %q", c.name, err, c.want)
		}
	}
	e, err := New(timed)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Run(context.Background(), []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 3}, Starts: []uint32{0}, WithTimes: true}},
		func(walk.Chunk) error { return nil })
	if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), "only for temporal") {
		t.Errorf("times for deepwalk: %v", err)
	}
}

// goldenTemporal are digests of temporal walks and their times from every
// vertex of two timed R-MAT graphs: the walks a GPU kernel must reproduce.
var goldenTemporal = map[string]string{
	"backward":                        "fd3e03a659bd36984b984f97596e6aa71eb9ae32f399e84054de3d3e505323f7",
	"backward-exp-gap":                "b7c81b150e68ecc79e8ee0db3b488279b576f9b9b5e30ce3bc25f477d75bbe55",
	"backward-exp-gap-weighted":       "6a543ebb63d5708e0758aa334ce6e1706a4e7293d23cafce9ebfbcea6f594d3c",
	"backward-linear-start":           "540b432b82491e6c59b62df8521735f48ea7ee33cd05ac7386272f38175480c0",
	"backward-linear-start-weighted":  "51bd99a209b97b9a7231bbdfadc758b718c4fe00752bd58cce8c27c897245aca",
	"backward-weighted":               "a08887f2792b0599af0238a3e5e0c6133ebb044aa3b0a6053c65f5ff1b5378e2",
	"exponential":                     "9481f6a8262ba6d5782b7f0efa80979077d6e0b2ee05376156a388c8091d409a",
	"exponential-gap":                 "b66b867de414625e6f9c545937c0674ce66ceb9efca3eac3e0fe89310a05ffef",
	"exponential-gap-weighted":        "b66b867de414625e6f9c545937c0674ce66ceb9efca3eac3e0fe89310a05ffef",
	"exponential-tiny-scale":          "fecd6a9f97da7637462d483c9e18f4190dd084f7401f084b0e3339481bf9a770",
	"exponential-tiny-scale-weighted": "aff8cbd232d88098eac4d24d23fbc409642de4ee62e9b6d34eafb894d0b8988f",
	"exponential-weighted":            "0243f34034fc2a40be060414513efa19e8d1bea7abf4d3b6d2b4eb044b6d4e63",
	"linear":                          "6eaded6a5f6ec3df85677693652e043c5663855dde6efeae8fd0cde3d0142e6b",
	"linear-gap":                      "cff2343c4679bd88f1e9cd0314a58e14678c518ce67f0a85bd1dac2cf66f2371",
	"linear-gap-weighted":             "1cc0111f7241d2f065ea453b7223407dcb857901410e30b6b1097e769ebbf325",
	"linear-weighted":                 "bd00db32e3b105e35cf85d57e2c55a73a2efadce063a04d7d2e1bd1f0efecd7d",
	"uniform-start-gap":               "6ebbbc01fec8ef397aeac40197b44dcc661e8b8bc936c2e24022cfa62c55311e",
	"uniform-start-gap-weighted":      "6ebbbc01fec8ef397aeac40197b44dcc661e8b8bc936c2e24022cfa62c55311e",
	"uniform-weighted":                "9d47359ae8e5f9988cca70b2379155cdb535dfbbe985c2bac104908d2603fc5c",
	"uniform":                         "f6bb83e8f0baddd9b0bb4398ab3e8068a2146f62b2c9cdc169d2989b307a3538",
}

func TestTemporalWalksMatchGoldenDigests(t *testing.T) {
	gs := []*graph.Graph{
		timedRMAT(t, graph.RMATOptions{Scale: 10, EdgeFactor: 16, Seed: 7, Undirected: true, Weighted: true, TimeSpan: 1 << 20}),
		timedRMAT(t, graph.RMATOptions{Scale: 9, EdgeFactor: 4, Seed: 8, Weighted: true, TimeSpan: 5000}),
	}
	for name, tp := range temporalCases() {
		for _, weighted := range []bool{false, true} {
			a := walk.Algorithm{Kind: walk.Temporal, Length: 40, Weighted: weighted, Time: tp}
			key := name
			if weighted {
				key += "-weighted"
			}
			var digests []string
			for _, opts := range [][]Option{{WithWorkers(2)}, {WithWorkers(3), WithChunkSize(77)}} {
				h := sha256.New()
				var b [8]byte
				for gi, g := range gs {
					e, err := New(g, opts...)
					if err != nil {
						t.Fatal(err)
					}
					starts := make([]uint32, g.NumVertices())
					for i := range starts {
						starts[i] = uint32(i)
					}
					walks, times := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 42 + uint64(gi), Starts: starts, WithTimes: true})
					for id, w := range walks {
						binary.LittleEndian.PutUint64(b[:], uint64(id))
						h.Write(b[:])
						binary.LittleEndian.PutUint32(b[:4], uint32(len(w)))
						h.Write(b[:4])
						for i, v := range w {
							binary.LittleEndian.PutUint32(b[:4], v)
							h.Write(b[:4])
							binary.LittleEndian.PutUint64(b[:], uint64(times[id][i]))
							h.Write(b[:])
						}
					}
				}
				digests = append(digests, hex.EncodeToString(h.Sum(nil)))
			}
			if digests[0] != digests[1] {
				t.Errorf("%s: the walks depend on the schedule: %s and %s", key, digests[0], digests[1])
			}
			if want, ok := goldenTemporal[key]; !ok {
				t.Errorf("%s: no golden digest; this engine gives %q", key, digests[0])
			} else if digests[0] != want {
				t.Errorf("%s: walks digest %s, want %s: the walks changed", key, digests[0], want)
			}
		}
	}
}

// Edge times at the ends of the int64 range are times like any other: a
// step after an edge at the earliest time still keeps to the gap, and
// one before an edge at the latest time (backward) too.
func TestTemporalExtremeTimes(t *testing.T) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	g, err := graph.FromEdges([]graph.Edge{
		{Src: 0, Dst: 1, Time: lo}, {Src: 1, Dst: 2, Time: lo + 3}, {Src: 1, Dst: 3, Time: lo + 10},
		{Src: 4, Dst: 5, Time: hi}, {Src: 5, Dst: 6, Time: hi - 3}, {Src: 5, Dst: 7, Time: hi - 10},
	}, graph.BuildOptions{Name: "extreme", DenseIDs: true, Timed: true, NumVertices: 8})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(g, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tp     walk.TimeParams
		start  uint32
		banned uint32
	}{
		{walk.TimeParams{MaxGap: 5, HasMaxGap: true}, 0, 3},
		{walk.TimeParams{MaxGap: 5, HasMaxGap: true, Backward: true}, 4, 7},
		// The exponential bias's time cells at both ends of the key range.
		{walk.TimeParams{Bias: walk.TimeExponential, Scale: 2, MaxGap: 5, HasMaxGap: true}, 0, 3},
		{walk.TimeParams{Bias: walk.TimeExponential, Scale: 2, MaxGap: 5, HasMaxGap: true, Backward: true}, 4, 7},
		{walk.TimeParams{Bias: walk.TimeExponential, Scale: 1e30, Backward: true}, 4, math.MaxUint32},
	} {
		starts := make([]uint32, 200)
		for i := range starts {
			starts[i] = c.start
		}
		a := walk.Algorithm{Kind: walk.Temporal, Length: 3, Time: c.tp}
		walks, times := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 3, Starts: starts, WithTimes: true})
		for id, w := range walks {
			checkTemporalWalk(t, g, c.tp, w, times[id], a.Length)
			if slices.Contains(w, c.banned) {
				t.Fatalf("%+v: walk %v times %v goes beyond the gap", c.tp, w, times[id])
			}
		}
	}
}

// n2vGraph: vertex 0's only edge at or after time 4 goes to 1; vertex 1's
// edges from time 5 on go back to 0, to 0's neighbours 2 and 4, and
// outward to 3 and 6 (and 5 is before the window).
func n2vGraph(t testing.TB) *graph.Graph {
	t.Helper()
	edges := []graph.Edge{
		{Src: 0, Dst: 1, Time: 5, Weight: 1}, {Src: 0, Dst: 2, Time: 1, Weight: 1}, {Src: 0, Dst: 4, Time: 2, Weight: 1},
		{Src: 1, Dst: 0, Time: 10, Weight: 2}, {Src: 1, Dst: 2, Time: 20, Weight: 1}, {Src: 1, Dst: 3, Time: 30, Weight: 3},
		{Src: 1, Dst: 4, Time: 40, Weight: 1.5}, {Src: 1, Dst: 5, Time: 3, Weight: 1}, {Src: 1, Dst: 6, Time: 50, Weight: 0.5},
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "n2v", DenseIDs: true, Weighted: true, Timed: true, NumVertices: 7})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Temporal Node2Vec's second step follows the time bias (times the
// weight) times the p/q factor of each target against the first vertex:
// through the engine (rejection, for p and q that accept most proposals
// and for ones that reject most) and through the exact fallback alone.
func TestTemporalNode2VecDistribution(t *testing.T) {
	g := n2vGraph(t)
	e, err := New(g, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200_000
	starts := make([]uint32, n)
	for _, tp := range []walk.TimeParams{{}, {Bias: walk.TimeLinear}, {Bias: walk.TimeExponential, Scale: 20}} {
		tp.Start, tp.HasStart = 4, true
		for _, weighted := range []bool{false, true} {
			for _, pq := range [][2]float64{{0.5, 2}, {20, 0.05}, {0.01, 1}} {
				a := walk.Algorithm{Kind: walk.Temporal, Length: 2, Weighted: weighted, Time: tp, P: pq[0], Q: pq[1]}
				probs := n2vSecondStep(a)
				walks, _ := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 11, Starts: starts})
				counts := map[uint32]int{}
				for _, w := range walks {
					if len(w) != 3 || w[1] != 1 {
						t.Fatalf("%s: walk %v", a, w)
					}
					counts[w[2]]++
				}
				stattest.ChiSquare(t, a.String(), counts, probs)
			}
			// The fallback alone (no rejection attempts), on the stepper.
			a := walk.Algorithm{Kind: walk.Temporal, Length: 2, Weighted: weighted, Time: tp, P: 0.5, Q: 2}
			s := fallbackStepper(g, a, 11)
			counts := map[uint32]int{}
			out := make([]uint32, 3)
			for id := range uint64(n / 2) {
				if s.walkTemporal(id, 0, out, nil) != 3 || out[1] != 1 {
					t.Fatalf("%s fallback: walk %v", a, out)
				}
				counts[out[2]]++
			}
			stattest.ChiSquare(t, a.String()+" fallback", counts, n2vSecondStep(a))
		}
	}
}

// n2vSecondStep is the exact distribution of a's second step on n2vGraph
// (first step 0 -> 1 at time 5, the start bound 4).
func n2vSecondStep(a walk.Algorithm) map[uint32]float64 {
	// The window from vertex 1 after time 5, in time order.
	win := []struct {
		tgt uint32
		t   int64
		w   float64
		f   float64
	}{{0, 10, 2, 1 / a.P}, {2, 20, 1, 1}, {3, 30, 3, 1 / a.Q}, {4, 40, 1.5, 1}, {6, 50, 0.5, 1 / a.Q}}
	probs := map[uint32]float64{}
	var sum float64
	for p, x := range win {
		b := x.f
		switch a.Time.Bias {
		case walk.TimeLinear:
			b *= float64(len(win) - p)
		case walk.TimeExponential:
			b *= math.Exp(-float64(x.t-win[0].t) / a.Time.Scale)
		}
		if a.Weighted {
			b *= x.w
		}
		probs[x.tgt], sum = b, sum+b
	}
	for k := range probs {
		probs[k] /= sum
	}
	return probs
}

// Temporal Node2Vec's walks respect time and are the same on every
// schedule and run (golden digest).
func TestTemporalNode2VecWalks(t *testing.T) {
	g := timedRMAT(t, graph.RMATOptions{Scale: 9, EdgeFactor: 8, Seed: 4, Undirected: true, Weighted: true, TimeSpan: 10000})
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	tp := walk.TimeParams{Bias: walk.TimeExponential, Scale: 500, MaxGap: 3000, HasMaxGap: true}
	a := walk.Algorithm{Kind: walk.Temporal, Length: 30, Weighted: true, Time: tp, P: 4, Q: 0.25}
	var digests []string
	for _, opts := range [][]Option{{WithWorkers(2)}, {WithWorkers(3), WithChunkSize(41)}} {
		e, err := New(g, opts...)
		if err != nil {
			t.Fatal(err)
		}
		walks, times := timedWalks(t, e, walk.Job{Algorithm: a, Seed: 5, Starts: starts, WithTimes: true})
		h := sha256.New()
		var b [8]byte
		for id, w := range walks {
			checkTemporalWalk(t, g, tp, w, times[id], a.Length)
			for i, v := range w {
				binary.LittleEndian.PutUint32(b[:4], v)
				h.Write(b[:4])
				binary.LittleEndian.PutUint64(b[:], uint64(times[id][i]))
				h.Write(b[:])
			}
		}
		digests = append(digests, hex.EncodeToString(h.Sum(nil)))
	}
	const want = "710bb29614dd9070c98061aa34fa0c6eee754296935d932c8d301c122cdd16aa"
	if digests[0] != digests[1] || digests[0] != want {
		t.Errorf("temporal node2vec digests %s and %s, want %s", digests[0], digests[1], want)
	}
}
