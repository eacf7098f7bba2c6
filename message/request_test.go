package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// testGraph is a small weighted, labelled, undirected graph with external
// ids 100..109 (a ring plus chords), so dense and external ids differ.
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := int64(0); i < 10; i++ {
		edges = append(edges, graph.Edge{Src: 100 + i, Dst: 100 + (i+1)%10, Weight: float32(i + 1), Label: uint8(i % 2)})
		edges = append(edges, graph.Edge{Src: 100 + i, Dst: 100 + (i+3)%10, Weight: 1, Label: uint8((i + 1) % 2)})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "test", Undirected: true, Weighted: true, Labelled: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDecodeRequestAccepts(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	cases := []struct {
		name  string
		key   string
		value string
		check func(t *testing.T, r *Request)
	}{
		{"deepwalk defaults", "b1", `{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100,105]}`,
			func(t *testing.T, r *Request) {
				if r.Algorithm.Length != walk.DefaultLength || r.WalksPerSeed != 1 || len(r.Starts) != 2 ||
					r.RNGSeed != DeriveSeed("b1") || !r.RNGSeedDerived {
					t.Fatalf("%+v", r)
				}
			}},
		{"no key", "", `{"version":1,"batch_id":"b2","algorithm":"deepwalk","seeds":[100]}`, nil},
		{"weighted ppr", "b3", `{"version":1,"batch_id":"b3","algorithm":"ppr","weighted":true,"stop_probability":0.2,"length":10,"walks_per_seed":3,"seeds":[101],"rng_seed":7}`,
			func(t *testing.T, r *Request) {
				if r.Algorithm.StopProb != 0.2 || r.NumWalks() != 3 || r.RNGSeed != 7 || r.RNGSeedDerived {
					t.Fatalf("%+v", r)
				}
				j := r.Job(4)
				if j.Tag != 4 || len(j.Starts) != 3 || j.Seed != 7 {
					t.Fatalf("%+v", j)
				}
			}},
		{"node2vec", "b4", `{"version":1,"batch_id":"b4","algorithm":"Node2Vec","p":0.5,"q":2,"seed_range":{"first":100,"count":10}}`,
			func(t *testing.T, r *Request) {
				if r.Algorithm.P != 0.5 || r.Algorithm.Q != 2 || len(r.Starts) != 10 {
					t.Fatalf("%+v", r)
				}
			}},
		{"metapath", "b5", `{"version":1,"batch_id":"b5","algorithm":"metapath","schema":[0,1],"seeds":[100]}`, nil},
		{"graph matches", "b6", `{"version":1,"batch_id":"b6","graph":"test","algorithm":"deepwalk","seeds":[100]}`, nil},
		{"rng seed as a string", "b7", `{"version":1,"batch_id":"b7","algorithm":"deepwalk","seeds":[100],"rng_seed":"18446744073709551615"}`,
			func(t *testing.T, r *Request) {
				if r.RNGSeed != math.MaxUint64 || r.RNGSeedDerived {
					t.Fatalf("rng seed %d", r.RNGSeed)
				}
			}},
		{"rng seed above 2^53 as a number", "b8", `{"version":1,"batch_id":"b8","algorithm":"deepwalk","seeds":[100],"rng_seed":8744201150822651165}`,
			func(t *testing.T, r *Request) {
				if r.RNGSeed != 8744201150822651165 {
					t.Fatalf("rng seed %d", r.RNGSeed)
				}
			}},
		{"escaped names and spaces", "", " {\"version\" : 1 ,\n\"batch\\u005fid\":\"b9\", \"algorithm\":\"deepwalk\",\"seeds\" : [ 100 , 109 ] ,\"schema\":[] } ",
			func(t *testing.T, r *Request) {
				if r.BatchID != "b9" || len(r.Seeds) != 2 || r.Seeds[1] != 109 {
					t.Fatalf("%+v", r)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(c.key), []byte(c.value), g, lim)
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	lim.MaxSeeds, lim.MaxWalkLength, lim.MaxWalksPerSeed, lim.MaxWalksPerBatch, lim.MaxMessageBytes = 5, 50, 4, 12, 400
	cases := []struct {
		name, key, value string
		reason           Reason
		msg              string
	}{
		{"not json", "k", `{"version":1,`, ReasonMalformed, "not a JSON object"},
		{"array", "k", `[1,2]`, ReasonMalformed, "not a JSON object"},
		{"no version", "k", `{"batch_id":"k"}`, ReasonUnsupportedVersion, "version is required"},
		{"version 2", "k", `{"version":2,"batch_id":"k"}`, ReasonUnsupportedVersion, "version 2"},
		{"unknown field", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"colour":"red"}`, ReasonMalformed, "unknown field"},
		{"trailing", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100]} {}`, ReasonMalformed, "after top-level value"},
		{"wrong type", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[true]}`, ReasonMalformed, "cannot unmarshal"},
		{"string seed on integer ids", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":["a"]}`, ReasonInvalidParameters, `seeds[0] = "a" is not a decimal id: graph "test" has 64-bit integer ids`},
		{"signed decimal string", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100,"+101"]}`, ReasonInvalidParameters, `seeds[1] = "+101" is not a decimal id`},
		{"fraction beside a string", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":["100",1.5]}`, ReasonMalformed, "element 1 (1.5) is neither an integer in the int64 range nor a string"},
		{"unknown decimal string", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":["100","5"]}`, ReasonUnknownVertices, "1 of 2 seeds are not in the graph, e.g. 5"},
		{"no batch id", "", `{"version":1,"algorithm":"deepwalk","seeds":[100]}`, ReasonInvalidBatchID, "required"},
		{"bad batch id", "", `{"version":1,"batch_id":"a/b","algorithm":"deepwalk","seeds":[100]}`, ReasonInvalidBatchID, "character"},
		{"key mismatch", "x", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100]}`, ReasonInvalidBatchID, "differs"},
		{"unknown algorithm", "k", `{"version":1,"batch_id":"k","algorithm":"pagerank","seeds":[100]}`, ReasonInvalidParameters, "unknown algorithm"},
		{"no algorithm", "k", `{"version":1,"batch_id":"k","seeds":[100]}`, ReasonInvalidParameters, "algorithm is required"},
		{"zero length", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","length":0,"seeds":[100]}`, ReasonInvalidParameters, "length 0"},
		{"bad stop", "k", `{"version":1,"batch_id":"k","algorithm":"ppr","stop_probability":1.5,"seeds":[100]}`, ReasonInvalidParameters, "stop probability"},
		{"p for deepwalk", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","p":2,"seeds":[100]}`, ReasonInvalidParameters, "only for node2vec"},
		{"negative q", "k", `{"version":1,"batch_id":"k","algorithm":"node2vec","q":-1,"seeds":[100]}`, ReasonInvalidParameters, "q ="},
		{"schema label", "k", `{"version":1,"batch_id":"k","algorithm":"metapath","schema":[7],"seeds":[100]}`, ReasonInvalidParameters, "labels 0..1"},
		{"no seeds", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[]}`, ReasonInvalidParameters, "seeds"},
		{"seeds and range", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"seed_range":{"first":100,"count":1}}`, ReasonInvalidParameters, "not both"},
		// Temporal walks (issue 38); this graph has no edge times.
		{"temporal untimed", "k", `{"version":1,"batch_id":"k","algorithm":"temporal","seeds":[100]}`, ReasonInvalidParameters, `temporal walks need edge times, and graph "test" has none`},
		{"time bias on deepwalk", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","time_bias":"linear","seeds":[100]}`, ReasonInvalidParameters, "time_bias is only for temporal, not deepwalk"},
		{"with times on ppr", "k", `{"version":1,"batch_id":"k","algorithm":"ppr","with_times":true,"seeds":[100]}`, ReasonInvalidParameters, "with_times is only for temporal"},
		{"start time on node2vec", "k", `{"version":1,"batch_id":"k","algorithm":"node2vec","start_time":5,"seeds":[100]}`, ReasonInvalidParameters, "start_time is only for temporal"},
		{"fraction start time", "k", `{"version":1,"batch_id":"k","algorithm":"temporal","start_time":1.5,"seeds":[100]}`, ReasonMalformed, "start_time"},
		{"time field on sampler", "k", `{"version":1,"batch_id":"k","algorithm":"neighbor","fanouts":[2],"max_time_gap":5,"seeds":[100]}`, ReasonInvalidParameters, "max_time_gap is not for the sampling algorithm"},
		{"graph mismatch", "k", `{"version":1,"batch_id":"k","graph":"other","algorithm":"deepwalk","seeds":[100]}`, ReasonGraphMismatch, "other"},
		{"too long", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","length":51,"seeds":[100]}`, ReasonTooLarge, "length 51"},
		{"too many seeds", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":{"first":100,"count":6}}`, ReasonTooLarge, "6 seeds"},
		{"too many repeats", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","walks_per_seed":5,"seeds":[100]}`, ReasonTooLarge, "walks_per_seed 5"},
		{"too many walks", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","walks_per_seed":4,"seeds":[100,101,102,103]}`, ReasonTooLarge, "16 walks"},
		{"too big", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100]` + strings.Repeat(" ", 400) + `}`, ReasonTooLarge, "bytes"},
		{"unknown vertex", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100,5,7]}`, ReasonUnknownVertices, "2 of 3 seeds"},
		// Exact decoding: what encoding/json accepts silently is malformed,
		// with a message naming the field.
		{"null body", "k", `null`, ReasonMalformed, "null"},
		{"null body with space", "k", " null ", ReasonMalformed, "request is null"},
		{"null seed", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100,null,101]}`, ReasonMalformed, "seeds[1] is null"},
		{"null schema label", "k", `{"version":1,"batch_id":"k","algorithm":"metapath","schema":[1,null],"seeds":[100]}`, ReasonMalformed, "schema[1] is null"},
		{"null member", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","length":null,"seeds":[100]}`, ReasonMalformed, "length is null"},
		{"null version", "k", `{"version":null,"batch_id":"k","algorithm":"deepwalk","seeds":[100]}`, ReasonMalformed, "version is null"},
		{"null rng seed", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":null}`, ReasonMalformed, "rng_seed is null"},
		{"null in range", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":{"first":null,"count":1}}`, ReasonMalformed, "seed_range.first is null"},
		{"null deep in unknown", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"x":{"y":[[1,null]]}}`, ReasonMalformed, "x.y[0][1] is null"},
		{"upper-case name", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","SEEDS":[100]}`, ReasonMalformed, `unknown field "SEEDS": field names are case-sensitive, did you mean "seeds"?`},
		{"case variant beside", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"Seeds":[101]}`, ReasonMalformed, `"Seeds"`},
		{"case variant version", "k", `{"Version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100]}`, ReasonMalformed, `"Version"`},
		{"case variant in range", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":{"First":100,"count":1}}`, ReasonMalformed, `"seed_range.First"`},
		{"duplicate key", "k", `{"version":1,"batch_id":"k","algorithm":"ppr","algorithm":"deepwalk","seeds":[100]}`, ReasonMalformed, `duplicate field "algorithm"`},
		{"duplicate escaped key", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"s\u0065eds":[101]}`, ReasonMalformed, `duplicate field "seeds"`},
		{"duplicate in range", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":{"first":100,"count":1,"count":2}}`, ReasonMalformed, `duplicate field "seed_range.count"`},
		{"duplicate deep", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"x":[{"a":1,"a":2}]}`, ReasonMalformed, `duplicate field "x[0].a"`},
		{"duplicate version", "k", `{"version":1,"version":2,"batch_id":"k"}`, ReasonMalformed, `duplicate field "version"`},
		{"fraction seed", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100,1.5]}`, ReasonMalformed, "seeds: json: cannot unmarshal number 1.5"},
		{"seed above int64", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[9223372036854775808]}`, ReasonMalformed, "seeds: json: cannot unmarshal number 9223372036854775808"},
		{"seeds not array", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":100}`, ReasonMalformed, "seeds: json: cannot unmarshal number"},
		{"range not object", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":[1]}`, ReasonMalformed, "seed_range: json: cannot unmarshal array"},
		{"unknown in range", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seed_range":{"first":1,"last":2}}`, ReasonMalformed, `unknown field "seed_range.last"`},
		// rng_seed: a number or a decimal string, 0..2^64-1.
		{"rng seed negative", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":-1}`, ReasonMalformed, "rng_seed: json: cannot unmarshal number -1"},
		{"rng seed above 2^64", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":"18446744073709551616"}`, ReasonMalformed, "rng_seed: \"18446744073709551616\" is not a decimal integer"},
		{"rng seed hex", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":"0x10"}`, ReasonMalformed, "rng_seed: \"0x10\" is not a decimal"},
		{"rng seed signed", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":"+7"}`, ReasonMalformed, "is not a decimal"},
		{"rng seed empty", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":""}`, ReasonMalformed, "is not a decimal"},
		{"rng seed bool", "k", `{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[100],"rng_seed":true}`, ReasonMalformed, "rng_seed: json: cannot unmarshal bool"},
		// Non-ASCII batch ids: the error names the rune, not a byte of it.
		{"non-ascii batch id", "", `{"version":1,"batch_id":"été","algorithm":"deepwalk","seeds":[100]}`, ReasonInvalidBatchID, `"été" has character 'é' (U+00E9)`},
		{"not utf-8 batch id", "", "{\"version\":1,\"batch_id\":\"a\xffb\",\"algorithm\":\"deepwalk\",\"seeds\":[100]}", ReasonInvalidBatchID, "character '\ufffd'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(c.key), []byte(c.value), g, lim)
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

// timedTestGraph is a small graph with edge times, external ids 100..109.
func timedTestGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := int64(0); i < 10; i++ {
		edges = append(edges, graph.Edge{Src: 100 + i, Dst: 100 + (i+1)%10, Weight: float32(i + 1), Time: 10 * i})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "timed", Weighted: true, Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDecodeTemporalRequest(t *testing.T) {
	g := timedTestGraph(t)
	q := func(body string) string {
		return `{"version":1,"batch_id":"k","algorithm":"temporal","seeds":[100],` + body + `}`
	}
	accepts := []struct {
		name, value string
		want        walk.TimeParams
		withTimes   bool
	}{
		{"defaults", q(`"length":3`), walk.TimeParams{}, false},
		{"all fields", q(`"time_bias":"exponential","time_scale":2.5,"start_time":-7,"max_time_gap":0,"direction":"backward","with_times":true,"weighted":true`),
			walk.TimeParams{Bias: walk.TimeExponential, Scale: 2.5, Start: -7, HasStart: true, MaxGap: 0, HasMaxGap: true, Backward: true}, true},
		{"linear forward", q(`"time_bias":"Linear","direction":"forward","with_times":false,"start_time":9223372036854775807`),
			walk.TimeParams{Bias: walk.TimeLinear, Start: 9223372036854775807, HasStart: true}, false},
		{"node2vec factors", q(`"q":0.5`), walk.TimeParams{}, false},
	}
	for _, c := range accepts {
		r, err := DecodeRequest([]byte("k"), []byte(c.value), g, DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Algorithm.Kind != walk.Temporal || r.Algorithm.Time != c.want || r.WithTimes != c.withTimes || r.Job(0).WithTimes != c.withTimes {
			t.Errorf("%s: %+v with times %v, want %+v %v", c.name, r.Algorithm.Time, r.WithTimes, c.want, c.withTimes)
		}
		// p or q makes it temporal Node2Vec, the other taking its default.
		if wantPQ := strings.Contains(c.value, `"q"`); wantPQ != (r.Algorithm.P == 1 && r.Algorithm.Q == 0.5) || !wantPQ && (r.Algorithm.P != 0 || r.Algorithm.Q != 0) {
			t.Errorf("%s: p %v q %v", c.name, r.Algorithm.P, r.Algorithm.Q)
		}
	}
	rejects := []struct{ name, value, msg string }{
		{"bad time bias", q(`"time_bias":"gaussian"`), `unknown time_bias "gaussian" (want uniform, linear or exponential)`},
		{"no time scale", q(`"time_bias":"exponential"`), "exponential time_bias needs a time_scale > 0"},
		{"negative time scale", q(`"time_bias":"exponential","time_scale":-3`), "time_scale > 0"},
		{"zero time scale", q(`"time_bias":"exponential","time_scale":0`), "time_scale > 0"},
		{"scale without exponential", q(`"time_scale":3`), "time_scale is only for the exponential time_bias"},
		{"negative gap", q(`"max_time_gap":-1`), "max_time_gap -1 must be 0 or more"},
		{"bad direction", q(`"direction":"sideways"`), `direction "sideways" is not "forward" or "backward"`},
		{"sampler", q(`"sampler":"alias"`), "sampler alias cannot serve them"},
		{"times with visits", q(`"with_times":true,"output":"visits","top_k":3,"walks_per_seed":2`), `with_times is only for "output": "walks"`},
		{"node2vec p out of range", q(`"p":0`), "node2vec p = 0 must be in"},
	}
	for _, c := range rejects {
		_, err := DecodeRequest([]byte("k"), []byte(c.value), g, DefaultLimits())
		var re *RejectError
		if !errors.As(err, &re) || re.Reason != ReasonInvalidParameters || !strings.Contains(re.Msg, c.msg) {
			t.Errorf("%s: %v, want invalid_parameters with %q", c.name, err, c.msg)
		}
	}
	// The time parameters and the times column are part of the request's
	// identity; other algorithms' fingerprints do not change.
	fp := func(v string) string {
		r, err := DecodeRequest([]byte("k"), []byte(v), g, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return r.Fingerprint()
	}
	base := fp(q(`"time_bias":"linear"`))
	for _, other := range []string{q(`"time_bias":"uniform"`), q(`"time_bias":"linear","start_time":0`), q(`"time_bias":"linear","with_times":true`),
		q(`"time_bias":"linear","direction":"backward"`), q(`"time_bias":"linear","max_time_gap":0`)} {
		if fp(other) == base {
			t.Errorf("%s has the fingerprint of %s", other, q(`"time_bias":"linear"`))
		}
	}
}

func TestDecodeRequestSkipsUnknownVertices(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	lim.SkipUnknown = true
	r, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[5,100,7,109]}`), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	if r.Skipped != 2 || len(r.SkippedIDs) != 2 || len(r.Seeds) != 2 || r.Seeds[0] != 100 || r.Seeds[1] != 109 {
		t.Fatalf("%+v", r)
	}
	_, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"k","algorithm":"deepwalk","seeds":[5]}`), g, lim)
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != ReasonUnknownVertices {
		t.Fatalf("all unknown: %v", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	g := testGraph(f)
	for _, s := range []string{
		`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100,105]}`,
		`{"version":1,"batch_id":"b3","algorithm":"ppr","weighted":true,"stop_probability":0.2,"length":10,"walks_per_seed":3,"seeds":[101],"rng_seed":7}`,
		`{"version":1,"batch_id":"b4","algorithm":"node2vec","p":0.5,"q":2,"seed_range":{"first":100,"count":10}}`,
		`{"version":1,"batch_id":"b5","algorithm":"metapath","schema":[0,1],"seeds":[100]}`,
		`{"version":1,"batch_id":"b5","algorithm":"metapath","schema":[0,1],"seed_range":{"first":9223372036854775807,"count":9223372036854775807}}`,
		`{"version":2}`, `[]`, `null`, `{"version":1,"batch_id":"x","seeds":[1e400]}`,
		`{"version":1,"batch_id":"v1","algorithm":"ppr","output":"visits","top_k":10,"steps_per_query":1000,"seeds":[100,105]}`,
		`{"version":1,"batch_id":"v2","algorithm":"ppr","output":"visits","top_k":3,"steps_per_query":50,"n_p":2,"n_v":3,"exclude_seeds":true,"exclude_neighbors":false,"min_visits":2,"queries":[{"id":"a","seeds":[100,101],"weights":[2,0.5]},{"id":"b","seeds":[109]}]}`,
		`{"version":1,"batch_id":"v3","algorithm":"deepwalk","output":"visits","top_k":1,"walks_per_seed":2,"queries":[{"id":"a","seeds":[100],"ID":"b"}]}`,
		`{"version":1,"batch_id":"s1","algorithm":"neighbor","fanouts":[25,10],"weighted":true,"replace":false,"instances_per_seed":2,"seeds":[100,105]}`,
		`{"version":1,"batch_id":"s2","algorithm":"forest_fire","burn_probability":0.7,"depth":2,"max_vertices":50,"edge_weight":true,"seed_range":{"first":100,"count":4}}`,
		`{"version":1,"batch_id":"s3","algorithm":"frontier","frontier_size":2,"samples":100,"seeds":[100,101,102,103]}`,
		`{"version":1,"batch_id":"s4","algorithm":"layer","layer_sizes":[],"length":3,"seeds":[100]}`,
	} {
		f.Add([]byte("b1"), []byte(s), false)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, skip bool) {
		lim := DefaultLimits()
		lim.SkipUnknown = skip
		lim.MaxSeeds = 1000
		r, err := DecodeRequest(key, value, g, lim)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" || re.Msg == "" {
				t.Fatalf("error is not a proper rejection: %#v", err)
			}
			if r != nil {
				t.Fatal("request and error both returned")
			}
			return
		}
		// Whatever was accepted must be runnable as-is.
		if ValidBatchID(r.BatchID) != nil || len(r.Starts) == 0 || len(r.Starts) != len(r.Seeds) ||
			r.NumWalks() > lim.MaxWalksPerBatch || r.Algorithm.Length > lim.MaxWalkLength {
			t.Fatalf("accepted an invalid request: %+v", r)
		}
		if v := r.Visits; v != nil {
			if err := v.Params.Validate(g, v.Queries); err != nil || len(v.Queries) != len(v.QueryIDs) || len(v.Queries) == 0 ||
				v.Params.TopK > lim.MaxTopK || v.Params.StepsPerQuery > lim.MaxStepsPerQuery {
				t.Fatalf("accepted an invalid visits request: %v %+v", err, v)
			}
		}
		if sp := r.Sample; sp != nil {
			if err := sp.Params.Validate(g); err != nil || r.NumInstances() < 1 || r.Visits != nil ||
				int64(r.NumInstances())*MaxSampleEdges(sp.Params) > lim.MaxSampledEdges {
				t.Fatalf("accepted an invalid sampling request: %v %+v", err, sp)
			}
		} else if err := walk.ValidateJobs(g, []walk.Job{r.Job(0)}); err != nil {
			t.Fatalf("accepted request fails engine validation: %v", err)
		}
		for i, s := range r.Starts {
			if g.ExternalID(s) != r.Seeds[i] {
				t.Fatalf("seed %d maps to dense %d = external %d", r.Seeds[i], s, g.ExternalID(s))
			}
		}
	})
}

// benchRequest is a request listing n seeds below 2^32 (10-digit ids, about
// 11 bytes each), decoded without a graph.
func benchRequest(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":1,"batch_id":"bench","algorithm":"deepwalk","walks_per_seed":1,"seeds":[`)
	x := uint32(2463534242)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		fmt.Fprint(&b, x%(1<<32-1))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkDecodeRequest(b *testing.B) {
	for _, n := range []int{100, 100_000, 380_000} {
		value := benchRequest(n)
		lim := DefaultLimits()
		lim.MaxSeeds, lim.MaxMessageBytes = n, 4<<20
		b.Run(fmt.Sprintf("seeds=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeRequest(nil, value, nil, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The seed list has its own integer reader; it must agree with
// encoding/json on every array it accepts and refuse the rest.
func TestParseInt64ArrayAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{`[]`, `[ ]`, `[0]`, `[-0]`, `[1,2,3]`, ` [ 1 ,	2 ]`, `[9223372036854775807]`,
		`[-9223372036854775808]`, `[9223372036854775808]`, `[-9223372036854775809]`, `[18446744073709551616]`,
		`[1.0]`, `[1e3]`, `[1E3]`, `["1"]`, `[[1]]`, `[true]`, `{}`, `"x"`, `[12345678901234567890123]`} {
		got, err := parseInt64Array([]byte(s))
		var want []int64
		werr := json.Unmarshal([]byte(s), &want)
		if (err == nil) != (werr == nil) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, %v; encoding/json %v, %v", s, got, err, want, werr)
		}
	}
}

// rng_seed is a decimal string in events, so readers that hold JSON
// numbers as doubles keep it exact: checked with JavaScript's JSON.parse
// (node), the reader the contract is written for, and fed back as a
// request's rng_seed.
func TestEventRNGSeedSurvivesJavaScript(t *testing.T) {
	const seed = uint64(8744201150822651165) // above 2^53: a double rounds it to ...000
	b, err := json.Marshal(Event{Version: EventVersion, BatchID: "b1", Status: StatusSucceeded, RNGSeed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rng_seed":"8744201150822651165"`) {
		t.Fatalf("rng_seed is not a decimal string: %s", b)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back.RNGSeed != seed {
		t.Fatalf("Go round trip: %d, %v", back.RNGSeed, err)
	}
	// A request may carry the event's seed as it came (string) to rerun a batch.
	req := fmt.Sprintf(`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100],"rng_seed":%q}`, "8744201150822651165")
	r, err := DecodeRequest(nil, []byte(req), testGraph(t), DefaultLimits())
	if err != nil || r.RNGSeed != seed {
		t.Fatalf("request with the event's seed: %v", err)
	}

	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	// JSON.parse the event, then JSON.stringify a request carrying its seed.
	script := `let s = "";
process.stdin.on("data", d => s += d).on("end", () => {
  const e = JSON.parse(s);
  process.stdout.write(JSON.stringify({version: 1, batch_id: e.batch_id, algorithm: "deepwalk", seeds: [100], rng_seed: e.rng_seed}));
});`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	r, err = DecodeRequest(nil, out, testGraph(t), DefaultLimits())
	if err != nil || r.RNGSeed != seed {
		t.Fatalf("after a JavaScript round trip %s: seed %v, %v", out, r, err)
	}
}

// skipped_ids are decimal strings, as rng_seed is: JavaScript's JSON.parse
// reads 2^53+1 as a number 2^53, and as a string exactly (checked with
// node). Version 1 events, which wrote numbers, still decode.
func TestEventSkippedIDsSurviveJavaScript(t *testing.T) {
	ids := IDs{"9007199254740993", "-7", "9223372036854775807", "-9223372036854775808"}
	b, err := json.Marshal(Event{Version: EventVersion, BatchID: "b1", Status: StatusSucceeded, SkippedIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"skipped_ids":["9007199254740993","-7","9223372036854775807","-9223372036854775808"]`) {
		t.Fatalf("skipped_ids are not decimal strings: %s", b)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || fmt.Sprint(back.SkippedIDs) != fmt.Sprint(ids) {
		t.Fatalf("Go round trip: %v, %v", back.SkippedIDs, err)
	}
	if err := json.Unmarshal([]byte(`{"version":1,"skipped_ids":[100,-3]}`), &back); err != nil || fmt.Sprint(back.SkippedIDs) != "[100 -3]" {
		t.Fatalf("version 1 event: %v, %v", back.SkippedIDs, err)
	}
	// String ids (a graph with string ids) come back as they were.
	if err := json.Unmarshal([]byte(`{"skipped_ids":["user:1","1.5"]}`), &back); err != nil || fmt.Sprint(back.SkippedIDs) != "[user:1 1.5]" {
		t.Fatalf("string ids: %v, %v", back.SkippedIDs, err)
	}
	for _, bad := range []string{`[1e3]`, `[1.5]`, `[9223372036854775808]`, `{}`, `[null]`, `[["x"]]`} {
		if err := json.Unmarshal([]byte(`{"skipped_ids":`+bad+`}`), &back); err == nil {
			t.Errorf("skipped_ids %s decoded as %v", bad, back.SkippedIDs)
		}
	}
	if b, _ := json.Marshal(Event{}); strings.Contains(string(b), "skipped_ids") {
		t.Errorf("an event without skipped ids has the field: %s", b)
	}

	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	cmd := exec.Command(node, "-e", `let s = "";
process.stdin.on("data", d => s += d).on("end", () => {
  process.stdout.write(JSON.parse(s).skipped_ids.map(BigInt).join(" "));
});`)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if want := "9007199254740993 -7 9223372036854775807 -9223372036854775808"; string(out) != want {
		t.Fatalf("JavaScript read %s, want %s", out, want)
	}
}
