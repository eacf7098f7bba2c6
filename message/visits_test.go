package message

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const visitsHead = `{"version":1,"batch_id":"v","algorithm":"ppr","stop_probability":0.2,"output":"visits",`

func TestDecodeVisitsRequest(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	r, err := DecodeRequest(nil, []byte(visitsHead+`"top_k":10,"steps_per_query":1000,"seeds":[100,105]}`), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Visits
	if r.Output != OutputVisits || v == nil || v.Params.TopK != 10 || v.Params.StepsPerQuery != 1000 || v.Params.MinVisits != 1 ||
		!slices.Equal(v.QueryIDs, []string{"100", "105"}) || len(v.Queries) != 2 || v.Queries[1].Starts[0] != r.Starts[1] ||
		v.Params.Algorithm.StopProb != 0.2 || v.Params.Seed != r.RNGSeed {
		t.Fatalf("default queries: %+v %+v", r, v)
	}
	r, err = DecodeRequest(nil, []byte(visitsHead+`"top_k":5,"steps_per_query":100,"n_p":3,"n_v":4,"exclude_seeds":true,"exclude_neighbors":true,"min_visits":2,`+
		`"queries":[{"id":"user-1","seeds":[100,101],"weights":[2,1]},{"seeds":[109],"id":"user-2"}]}`), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	v = r.Visits
	if p := v.Params; p.NP != 3 || p.NV != 4 || !p.ExcludeSeeds || !p.ExcludeNeighbors || p.MinVisits != 2 ||
		!slices.Equal(v.QueryIDs, []string{"user-1", "user-2"}) || !slices.Equal(v.Queries[0].Weights, []float64{2, 1}) ||
		v.Queries[1].Weights != nil || len(r.Seeds) != 3 {
		t.Fatalf("queries: %+v %+v", r, v)
	}
	r, err = DecodeRequest(nil, []byte(visitsHead+`"top_k":5,"walks_per_seed":7,"seeds":[100]}`), g, lim)
	if err != nil || r.Visits.Params.WalksPerSeed != 7 || r.Visits.Params.StepsPerQuery != 0 {
		t.Fatalf("walks per seed: %v %+v", err, r)
	}
	// Walk requests are untouched.
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"w","algorithm":"deepwalk","output":"walks","seeds":[100]}`), g, lim)
	if err != nil || r.Visits != nil || r.Output != OutputWalks {
		t.Fatalf("walks: %v %+v", err, r)
	}
	// Under skip, unknown seeds leave their query, and empty queries go.
	lim.SkipUnknown = true
	r, err = DecodeRequest(nil, []byte(visitsHead+`"top_k":5,"steps_per_query":100,"queries":[{"id":"a","seeds":[5,100],"weights":[9,1]},{"id":"b","seeds":[6]}]}`), g, lim)
	if err != nil || r.Skipped != 2 || !slices.Equal(r.Visits.QueryIDs, []string{"a"}) || !slices.Equal(r.Visits.Queries[0].Weights, []float64{1}) {
		t.Fatalf("skip: %v %+v", err, r)
	}
}

func TestDecodeVisitsRequestRejects(t *testing.T) {
	g := testGraph(t)
	lim := DefaultLimits()
	lim.MaxTopK, lim.MaxStepsPerQuery, lim.MaxSeeds, lim.MaxStepsPerBatch = 50, 1000, 4, 2000
	q := func(s string) string { return visitsHead + s + `}` }
	cases := []struct {
		name, value string
		reason      Reason
		msg         string
	}{
		{"bad output", `{"version":1,"batch_id":"v","algorithm":"ppr","output":"Visits","seeds":[100]}`, ReasonInvalidParameters, `output "Visits"`},
		{"top_k on walks", `{"version":1,"batch_id":"v","algorithm":"ppr","top_k":3,"seeds":[100]}`, ReasonInvalidParameters, "top_k is only for"},
		{"queries on walks", `{"version":1,"batch_id":"v","algorithm":"ppr","queries":[{"id":"a","seeds":[100]}]}`, ReasonInvalidParameters, "queries is only for"},
		{"no top_k", q(`"steps_per_query":10,"seeds":[100]`), ReasonInvalidParameters, "top_k is required"},
		{"zero top_k", q(`"top_k":0,"steps_per_query":10,"seeds":[100]`), ReasonInvalidParameters, "top_k 0"},
		{"top_k limit", q(`"top_k":51,"steps_per_query":10,"seeds":[100]`), ReasonTooLarge, "top_k 51"},
		{"no budget", q(`"top_k":5,"seeds":[100]`), ReasonInvalidParameters, "steps_per_query or walks_per_seed is required"},
		{"both budgets", q(`"top_k":5,"steps_per_query":10,"walks_per_seed":2,"seeds":[100]`), ReasonInvalidParameters, "not both"},
		{"zero steps", q(`"top_k":5,"steps_per_query":0,"seeds":[100]`), ReasonInvalidParameters, "steps_per_query 0"},
		{"steps limit", q(`"top_k":5,"steps_per_query":1001,"seeds":[100]`), ReasonTooLarge, "steps_per_query 1001"},
		{"batch steps limit", q(`"top_k":5,"steps_per_query":900,"seeds":[100,101,102]`), ReasonTooLarge, "3 queries x 900 steps_per_query exceed the limit 2000"},
		{"n_p alone", q(`"top_k":5,"steps_per_query":10,"n_p":3,"seeds":[100]`), ReasonInvalidParameters, "both n_p and n_v"},
		{"n_v zero", q(`"top_k":5,"steps_per_query":10,"n_p":3,"n_v":0,"seeds":[100]`), ReasonInvalidParameters, "n_v 0"},
		{"min_visits zero", q(`"top_k":5,"steps_per_query":10,"min_visits":0,"seeds":[100]`), ReasonInvalidParameters, "min_visits 0"},
		{"queries and seeds", q(`"top_k":5,"steps_per_query":10,"seeds":[100],"queries":[{"id":"a","seeds":[100]}]`), ReasonInvalidParameters, "one of them"},
		{"empty queries", q(`"top_k":5,"steps_per_query":10,"queries":[]`), ReasonInvalidParameters, "must not be empty"},
		{"no id", q(`"top_k":5,"steps_per_query":10,"queries":[{"seeds":[100]}]`), ReasonInvalidParameters, "queries[0].id is required"},
		{"duplicate id", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100]},{"id":"a","seeds":[101]}]`), ReasonInvalidParameters, `"a" is given twice`},
		{"no query seeds", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[]}]`), ReasonInvalidParameters, "queries[0].seeds"},
		{"weights count", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100],"weights":[1,2]}]`), ReasonInvalidParameters, "2 weights for 1 seeds"},
		{"zero weight", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100,101],"weights":[1,0]}]`), ReasonInvalidParameters, "weights[1] = 0"},
		{"weights with walks", q(`"top_k":5,"walks_per_seed":2,"queries":[{"id":"a","seeds":[100],"weights":[1]}]`), ReasonInvalidParameters, "weights split"},
		{"too many query seeds", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100,101,102]},{"id":"b","seeds":[103,104]}]`), ReasonTooLarge, "5 seeds"},
		{"unknown query seed", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100,7]}]`), ReasonUnknownVertices, "1 of 2 seeds"},
		// Exact decoding inside queries too.
		{"query not object", q(`"top_k":5,"steps_per_query":10,"queries":[[100]]`), ReasonMalformed, "queries[0] is not an object"},
		{"query unknown member", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100],"weight":[1]}]`), ReasonMalformed, `unknown field "queries[0].weight"`},
		{"query case variant", q(`"top_k":5,"steps_per_query":10,"queries":[{"ID":"a","seeds":[100]}]`), ReasonMalformed, `did you mean "queries[0].id"`},
		{"query null", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","seeds":[100,null]}]`), ReasonMalformed, "queries[0].seeds[1] is null"},
		{"query duplicate", q(`"top_k":5,"steps_per_query":10,"queries":[{"id":"a","id":"b","seeds":[100]}]`), ReasonMalformed, `duplicate field "queries[0].id"`},
		{"top_k null", q(`"top_k":null,"steps_per_query":10,"seeds":[100]`), ReasonMalformed, "top_k is null"},
		{"top_k case", q(`"Top_K":5,"steps_per_query":10,"seeds":[100]`), ReasonMalformed, `did you mean "top_k"`},
		{"top_k twice", q(`"top_k":5,"top_k":6,"steps_per_query":10,"seeds":[100]`), ReasonMalformed, `duplicate field "top_k"`},
		{"fractional steps", q(`"top_k":5,"steps_per_query":1.5,"seeds":[100]`), ReasonMalformed, "steps_per_query"},
		{"string flag", q(`"top_k":5,"steps_per_query":10,"exclude_seeds":"yes","seeds":[100]`), ReasonMalformed, "exclude_seeds"},
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

func TestVisitsFingerprint(t *testing.T) {
	g := testGraph(t)
	fp := func(s string) string {
		t.Helper()
		r, err := DecodeRequest(nil, []byte(s), g, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return r.Fingerprint()
	}
	base := fp(visitsHead + `"top_k":5,"steps_per_query":100,"queries":[{"id":"a","seeds":[100,101]}]}`)
	if same := fp(visitsHead + ` "steps_per_query":100, "top_k":5 ,"queries":[{"seeds":[100,101],"id":"a"}]}`); same != base {
		t.Error("the spelling changed the fingerprint")
	}
	for _, s := range []string{
		visitsHead + `"top_k":6,"steps_per_query":100,"queries":[{"id":"a","seeds":[100,101]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":101,"queries":[{"id":"a","seeds":[100,101]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":100,"queries":[{"id":"b","seeds":[100,101]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":100,"queries":[{"id":"a","seeds":[100,101],"weights":[1,2]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":100,"queries":[{"id":"a","seeds":[100]},{"id":"b","seeds":[101]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":100,"exclude_seeds":true,"queries":[{"id":"a","seeds":[100,101]}]}`,
		visitsHead + `"top_k":5,"steps_per_query":100,"seeds":[100,101]}`,
		`{"version":1,"batch_id":"v","algorithm":"ppr","stop_probability":0.2,"seeds":[100,101]}`,
	} {
		if fp(s) == base {
			t.Errorf("same fingerprint for %s", s)
		}
	}
}
