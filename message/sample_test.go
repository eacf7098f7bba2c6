package message

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graphsample"
)

func TestDecodeSampleRequests(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	r, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,10],"weighted":true,"instances_per_seed":3,"rng_seed":9,"seeds":[100,105]}`), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Sample.Params
	if r.Output != OutputSamples || p.Kind != graphsample.NeighborSampling || !slices.Equal(p.Fanouts, []int{25, 10}) || !p.Weighted() ||
		p.Replace || p.InstancesPerSeed != 3 || p.Seed != 9 || r.NumInstances() != 6 || r.Sample.EdgeWeight || r.Visits != nil {
		t.Fatalf("neighbor: %+v %+v", r, p)
	}
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s","algorithm":"forest_fire","burn_probability":0.7,"depth":2,"edge_weight":true,"seeds":[100]}`), g, lim)
	if err != nil || r.Sample.Params.MaxVertices != lim.MaxSampleVertices || r.Sample.Params.BurnProb != 0.7 || !r.Sample.EdgeWeight ||
		r.Sample.Params.InstancesPerSeed != 1 || !r.RNGSeedDerived {
		t.Fatalf("forest fire: %v %+v", err, r)
	}
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s","algorithm":"frontier","frontier_size":2,"samples":50,"instances_per_seed":2,"seeds":[100,101,102,103]}`), g, lim)
	if err != nil || r.NumInstances() != 4 || r.Sample.Params.Samples != 50 {
		t.Fatalf("frontier: %v %+v", err, r)
	}
	for _, v := range []string{
		`{"version":1,"batch_id":"s","algorithm":"layer","layer_sizes":[4,8],"seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"snowball","depth":3,"max_vertices":5,"output":"samples","seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[2],"replace":true,"seed_range":{"first":100,"count":10}}`,
	} {
		if _, err := DecodeRequest(nil, []byte(v), g, lim); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestSampleFingerprint(t *testing.T) {
	g := testGraph(t)
	fp := func(v string) string {
		r, err := DecodeRequest(nil, []byte(v), g, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return r.Fingerprint()
	}
	a := fp(`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,10],"seeds":[100]}`)
	if b := fp(`{"seeds":[100],"fanouts":[25,10],"algorithm":"neighbor","batch_id":"s","version":1,"instances_per_seed":1}`); a != b {
		t.Fatal("spelling changed the fingerprint")
	}
	for _, v := range []string{
		`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,11],"seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,10],"replace":true,"seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"layer","layer_sizes":[25,10],"seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,10],"edge_weight":true,"seeds":[100]}`,
		`{"version":1,"batch_id":"s","algorithm":"neighbor","fanouts":[25,10],"instances_per_seed":2,"seeds":[100]}`,
	} {
		if fp(v) == a {
			t.Errorf("%s: same fingerprint", v)
		}
	}
}

func TestDecodeSampleRequestRejects(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	lim.MaxFanout, lim.MaxSampleVertices, lim.MaxSampledEdges, lim.MaxWalksPerSeed = 30, 100, 1000, 5
	q := func(s string) string { return `{"version":1,"batch_id":"s",` + s + `}` }
	cases := []struct {
		name, value string
		reason      Reason
		msg         string
	}{
		{"no fanouts", q(`"algorithm":"neighbor","seeds":[100]`), ReasonInvalidParameters, "fanouts is required"},
		{"empty fanouts", q(`"algorithm":"neighbor","fanouts":[],"seeds":[100]`), ReasonInvalidParameters, "fanouts needs 1 to"},
		{"zero fanout", q(`"algorithm":"neighbor","fanouts":[3,0],"seeds":[100]`), ReasonInvalidParameters, "fanouts[1] = 0"},
		{"fanout limit", q(`"algorithm":"neighbor","fanouts":[31],"seeds":[100]`), ReasonTooLarge, "fanouts[0] = 31 exceeds the limit 30"},
		{"layer limit", q(`"algorithm":"layer","layer_sizes":[5,31],"seeds":[100]`), ReasonTooLarge, "layer_sizes[1] = 31"},
		{"edges limit", q(`"algorithm":"neighbor","fanouts":[30,30],"seeds":[100,101]`), ReasonTooLarge, "exceed the limit 1000 sampled edges"},
		{"instances limit", q(`"algorithm":"neighbor","fanouts":[3],"instances_per_seed":6,"seeds":[100]`), ReasonTooLarge, "instances_per_seed 6"},
		{"zero instances", q(`"algorithm":"neighbor","fanouts":[3],"instances_per_seed":0,"seeds":[100]`), ReasonInvalidParameters, "instances_per_seed 0"},
		{"fanouts on layer", q(`"algorithm":"layer","layer_sizes":[3],"fanouts":[3],"seeds":[100]`), ReasonInvalidParameters, "fanouts is only for neighbor"},
		{"replace on layer", q(`"algorithm":"layer","layer_sizes":[3],"replace":true,"seeds":[100]`), ReasonInvalidParameters, "replace is only for neighbor"},
		{"no burn", q(`"algorithm":"forest_fire","depth":2,"seeds":[100]`), ReasonInvalidParameters, "burn_probability is required"},
		{"burn one", q(`"algorithm":"forest_fire","burn_probability":1,"depth":2,"seeds":[100]`), ReasonInvalidParameters, "burn_probability 1"},
		{"no depth", q(`"algorithm":"snowball","seeds":[100]`), ReasonInvalidParameters, "depth is required"},
		{"depth zero", q(`"algorithm":"snowball","depth":0,"seeds":[100]`), ReasonInvalidParameters, "depth 0"},
		{"max vertices limit", q(`"algorithm":"snowball","depth":2,"max_vertices":101,"seeds":[100]`), ReasonTooLarge, "max_vertices 101"},
		{"max vertices zero", q(`"algorithm":"snowball","depth":2,"max_vertices":0,"seeds":[100]`), ReasonInvalidParameters, "max_vertices 0"},
		{"weighted snowball", q(`"algorithm":"snowball","depth":2,"weighted":true,"seeds":[100]`), ReasonInvalidParameters, "no edge bias"},
		{"frontier sets", q(`"algorithm":"frontier","frontier_size":2,"samples":5,"seeds":[100,101,102]`), ReasonInvalidParameters, "not whole sets of frontier_size 2"},
		{"no samples", q(`"algorithm":"frontier","frontier_size":2,"seeds":[100,101]`), ReasonInvalidParameters, "samples is required"},
		{"length on sampling", q(`"algorithm":"neighbor","fanouts":[3],"length":5,"seeds":[100]`), ReasonInvalidParameters, "length is not for the sampling algorithm neighbor"},
		{"walks_per_seed on sampling", q(`"algorithm":"neighbor","fanouts":[3],"walks_per_seed":5,"seeds":[100]`), ReasonInvalidParameters, "walks_per_seed is not for"},
		{"visits output", q(`"algorithm":"neighbor","fanouts":[3],"output":"visits","seeds":[100]`), ReasonInvalidParameters, `writes "samples"`},
		{"fanouts on walks", q(`"algorithm":"deepwalk","fanouts":[3],"seeds":[100]`), ReasonInvalidParameters, "fanouts is only for the sampling algorithms"},
		{"samples output on walks", q(`"algorithm":"deepwalk","output":"samples","seeds":[100]`), ReasonInvalidParameters, `output "samples"`},
		{"no seeds", q(`"algorithm":"neighbor","fanouts":[3]`), ReasonInvalidParameters, "seeds"},
		{"unknown seed", q(`"algorithm":"neighbor","fanouts":[3],"seeds":[7]`), ReasonUnknownVertices, "1 of 1"},
		{"fanouts null", q(`"algorithm":"neighbor","fanouts":null,"seeds":[100]`), ReasonMalformed, "fanouts is null"},
		{"fanouts case", q(`"algorithm":"neighbor","Fanouts":[3],"seeds":[100]`), ReasonMalformed, `did you mean "fanouts"`},
		{"fanouts twice", q(`"algorithm":"neighbor","fanouts":[3],"fanouts":[4],"seeds":[100]`), ReasonMalformed, `duplicate field "fanouts"`},
		{"fractional fanout", q(`"algorithm":"neighbor","fanouts":[2.5],"seeds":[100]`), ReasonMalformed, "fanouts"},
		{"string depth", q(`"algorithm":"snowball","depth":"2","seeds":[100]`), ReasonMalformed, "depth"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest(nil, []byte(c.value), g, lim)
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("want *RejectError, got %v", err)
			}
			if re.Reason != c.reason || !strings.Contains(re.Msg, c.msg) {
				t.Fatalf("got %s %q, want %s containing %q", re.Reason, re.Msg, c.reason, c.msg)
			}
		})
	}
}

func TestSampleWave(t *testing.T) {
	fire := graphsample.SampleParams{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2, MaxVertices: 10_001} // up to 10,000 edges
	nbr := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}}                  // up to 275
	const budget = 1 << 20
	for _, c := range []struct {
		name       string
		p          graphsample.SampleParams
		left, last int
		lastEdges  int64
		want       int
	}{
		{"first wave: the worst case", fire, 1_000_000, 0, 0, budget / 10_000},
		{"first wave: fewer left", fire, 50, 0, 0, 50},
		{"none left", fire, 0, 104, 300, 0},
		{"few edges: doubles", fire, 1_000_000, 104, 312, 208},
		{"few edges, large last wave: a quarter of the budget by the mean", fire, 1_000_000, 200_000, 600_000, budget / 12},
		{"heavy last wave: never below the worst case", fire, 1_000_000, 104, 104 * 10_000, 104},
		{"neighbour: worst case near the mean", nbr, 1_000_000, budget / 275, budget / 275 * 275, budget / 275},
		{"neighbour: sparse graph, a quarter of the budget by the mean", nbr, 1_000_000, 3812, 3812 * 60, budget / 240},
		{"rest of the batch", fire, 150, 104, 312, 150},
	} {
		if got := SampleWave(c.p, budget, c.left, c.last, c.lastEdges); got != c.want {
			t.Errorf("%s: SampleWave(left %d, last %d instances with %d edges) = %d, want %d", c.name, c.left, c.last, c.lastEdges, got, c.want)
		}
	}
}

// TestSampleTailWave plays out whole batches whose instances each draw
// mean edges: neighbour sampling's waves shrink by halves once two waves'
// worth is left, the last holds at most about SampleTailEdges edges, no
// wave is larger than SampleWave's, and every instance is sampled once;
// other samplers' waves are SampleWave's.
func TestSampleTailWave(t *testing.T) {
	fire := graphsample.SampleParams{Kind: graphsample.ForestFire, BurnProb: 0.7, Depth: 2, MaxVertices: 10_001} // up to 10,000 edges
	nbr := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}}                  // up to 275
	layer := graphsample.SampleParams{Kind: graphsample.LayerSampling, LayerSizes: []int{25, 250}}               // up to 275
	for _, c := range []struct {
		name   string
		p      graphsample.SampleParams
		budget int64
		n      int
		mean   int64
		want   []int // nil: the same waves as SampleWave's
	}{
		// `walkstage walk --algorithm neighbor --fanouts 25,10 --seeds
		// 0-999999` on R-MAT scale 22 (59.2 M edges): SampleWave's 28th
		// wave takes 34,952 of 60,744 left and its 29th the 25,792 after.
		{"neighbour, 1 M seeds", nbr, SampleWaveEdges, 1_000_000, 60,
			append(append([]int{30_504}, repeat(34_952, 26)...), 30_372, 15_186, 7_593, 4_369, 3_224)},
		{"neighbour, one wave's worth after the first", nbr, SampleWaveEdges, 60_000, 60, []int{30_504, 14_748, 7_374, 4_369, 3_005}},
		{"neighbour, a batch of one wave", nbr, SampleWaveEdges, 20_000, 60, nil},
		{"a small budget: waves as SampleWave's", nbr, 20_000, 2_000, 60, nil},
		// A sparse graph: waves of many instances, the tail's a fifth of them.
		{"neighbour, 5 edges an instance: halves down to the tail's edges", nbr, SampleWaveEdges, 3_000_000, 5,
			[]int{30_504, 61_008, 122_016, 244_032, 419_430, 419_430, 419_430, 419_430, 419_430, 222_645, 111_323, 55_661, 52_428, 3_233}},
		{"layer: SampleWave's", layer, SampleWaveEdges, 1_000_000, 142, nil},
		{"forest fire: SampleWave's", fire, SampleWaveEdges, 1_000_000, 5, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got, plain []int
			for lo, w := 0, 0; lo < c.n; lo += w {
				last := w
				w = SampleTailWave(c.p, c.budget, c.n-lo, last, int64(last)*c.mean)
				if s := SampleWave(c.p, c.budget, c.n-lo, last, int64(last)*c.mean); w < 1 || w > s {
					t.Fatalf("wave %d: %d instances of %d left, want 1..%d (SampleWave's)", len(got), w, c.n-lo, s)
				}
				got = append(got, w)
			}
			for lo, w := 0, 0; lo < c.n; lo += w {
				w = SampleWave(c.p, c.budget, c.n-lo, w, int64(w)*c.mean)
				plain = append(plain, w)
			}
			want := c.want
			if want == nil {
				want = plain
			}
			if !slices.Equal(got, want) {
				t.Errorf("waves %v\nwant  %v\n(SampleWave's %v)", got, want, plain)
			}
			if c.p.Kind == graphsample.NeighborSampling && len(got) > 1 && int64(got[len(got)-1])*c.mean > SampleTailEdges && c.budget >= SampleWaveEdges {
				t.Errorf("last wave of %d instances draws %d edges, more than %d", got[len(got)-1], int64(got[len(got)-1])*c.mean, SampleTailEdges)
			}
		})
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
