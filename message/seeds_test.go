package message

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// stringGraph is a ring of ten users, "user:0" .. "user:9", with chords,
// whose external ids are strings.
func stringGraph(t testing.TB) *graph.Graph {
	t.Helper()
	var edges []graph.StringEdge
	for i := range 10 {
		edges = append(edges, graph.StringEdge{Src: fmt.Sprintf("user:%d", i), Dst: fmt.Sprintf("user:%d", (i+1)%10), Weight: 1})
		edges = append(edges, graph.StringEdge{Src: fmt.Sprintf("user:%d", i), Dst: fmt.Sprintf("user:%d", (i+3)%10), Weight: 1})
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "users", Undirected: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDecodeStringSeeds(t *testing.T) {
	g := stringGraph(t)
	r, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s1","algorithm":"deepwalk","seeds":["user:3","user:0","user:3"]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if r.Seeds != nil || !slices.Equal(r.StringSeeds, []string{"user:3", "user:0", "user:3"}) || r.NumSeeds() != 3 || r.SeedID(1) != "user:0" {
		t.Fatalf("seeds %v, string seeds %v", r.Seeds, r.StringSeeds)
	}
	for i, s := range r.StringSeeds {
		if g.ExternalString(r.Starts[i]) != s {
			t.Errorf("seed %q starts at dense %d, which is %q", s, r.Starts[i], g.ExternalString(r.Starts[i]))
		}
	}
	// The fingerprint covers the string seeds.
	r2, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s1","algorithm":"deepwalk","seeds":["user:3","user:0","user:4"]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if r.Fingerprint() == r2.Fingerprint() {
		t.Error("requests for other string seeds have the same fingerprint")
	}

	// Visits: each seed its own query, named by its string id; and queries.
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"v","algorithm":"ppr","output":"visits","top_k":3,"steps_per_query":100,"seeds":["user:1","user:2"]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Visits; !slices.Equal(v.QueryIDs, []string{"user:1", "user:2"}) || v.QuerySeeds != nil ||
		!slices.EqualFunc(v.QueryStringSeeds, [][]string{{"user:1"}, {"user:2"}}, slices.Equal) {
		t.Fatalf("visits %+v", v)
	}
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"v","algorithm":"ppr","output":"visits","top_k":3,"steps_per_query":100,`+
		`"queries":[{"id":"q1","seeds":["user:1","user:5"],"weights":[1,2]}]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Visits; !slices.Equal(v.QueryStringSeeds[0], []string{"user:1", "user:5"}) || len(v.Queries[0].Starts) != 2 ||
		g.ExternalString(v.Queries[0].Starts[1]) != "user:5" {
		t.Fatalf("queries %+v", v)
	}

	// Samples.
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"sa","algorithm":"neighbor","fanouts":[2],"seeds":["user:7"]}`), g, DefaultLimits())
	if err != nil || !slices.Equal(r.StringSeeds, []string{"user:7"}) {
		t.Fatalf("sample: %v %+v", err, r)
	}

	// Skipped unknown string seeds are reported as they were sent.
	lim := DefaultLimits()
	lim.SkipUnknown = true
	r, err = DecodeRequest(nil, []byte(`{"version":1,"batch_id":"s","algorithm":"deepwalk","seeds":["user:1","nobody","user:2","Ünknown"]}`), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	if r.Skipped != 2 || !slices.Equal(r.SkippedIDs, []string{"nobody", "Ünknown"}) || !slices.Equal(r.StringSeeds, []string{"user:1", "user:2"}) {
		t.Fatalf("skip: %+v", r)
	}
}

// Decimal strings name integer ids (for producers that hold numbers as
// doubles): the request is the one with numbers, fingerprint included.
func TestDecodeDecimalStringSeeds(t *testing.T) {
	g := testGraph(t)
	num, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"d","algorithm":"deepwalk","seeds":[100,105,109]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	str, err := DecodeRequest(nil, []byte(`{"version":1,"batch_id":"d","algorithm":"deepwalk","seeds":["100",105,"109"]}`), g, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(num.Seeds, str.Seeds) || !slices.Equal(num.Starts, str.Starts) || str.StringSeeds != nil || num.Fingerprint() != str.Fingerprint() {
		t.Fatalf("numbers %+v, strings %+v", num, str)
	}
}

func TestDecodeStringSeedsRejects(t *testing.T) {
	g := stringGraph(t)
	long := strings.Repeat("x", MaxStringIDLen+1)
	head := `{"version":1,"batch_id":"k","algorithm":"deepwalk",`
	vhead := `{"version":1,"batch_id":"k","algorithm":"ppr","output":"visits","top_k":3,"steps_per_query":100,`
	cases := []struct {
		name, value string
		skip        bool
		reason      Reason
		msg         string
	}{
		{"number", head + `"seeds":["user:1",7]}`, false, ReasonInvalidParameters, `seeds[1] is the number 7: graph "users" has string ids, give every seed as a JSON string`},
		{"all numbers", head + `"seeds":[1,2]}`, false, ReasonInvalidParameters, `seeds[0] is the number 1`},
		{"empty", head + `"seeds":["user:1",""]}`, false, ReasonInvalidParameters, `seeds[1] is empty: string ids are 1 to 1024 bytes`},
		{"too long", head + `"seeds":["` + long + `"]}`, false, ReasonInvalidParameters, `seeds[0] is 1025 bytes ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."): string ids are 1 to 1024 bytes`},
		{"seed range", head + `"seed_range":{"first":0,"count":2}}`, false, ReasonInvalidParameters, `seed_range needs integer ids: graph "users" has string ids`},
		{"unknown", head + `"seeds":["user:1","user:10","nobody"]}`, false, ReasonUnknownVertices, `2 of 3 seeds are not in the graph, e.g. "user:10", "nobody"`},
		{"all unknown, skipping", head + `"seeds":["nobody"]}`, true, ReasonUnknownVertices, `none of the 1 seeds is in the graph, e.g. "nobody"`},
		{"null", head + `"seeds":["user:1",null]}`, false, ReasonMalformed, "seeds[1] is null"},
		{"object", head + `"seeds":["user:1",{"id":"x"}]}`, false, ReasonMalformed, "element 1"},
		{"query number", vhead + `"queries":[{"id":"q","seeds":["user:1",3]}]}`, false, ReasonInvalidParameters, `queries[0].seeds[1] is the number 3`},
		{"query empty", vhead + `"queries":[{"id":"q","seeds":[""]}]}`, false, ReasonInvalidParameters, `queries[0].seeds[0] is empty`},
		{"query unknown", vhead + `"queries":[{"id":"q","seeds":["user:1","ghost"]}]}`, false, ReasonUnknownVertices, `1 of 2 seeds are not in the graph, e.g. "ghost"`},
		{"sample number", `{"version":1,"batch_id":"k","algorithm":"neighbor","fanouts":[2],"seeds":[4]}`, false, ReasonInvalidParameters, `seeds[0] is the number 4`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := DefaultLimits()
			lim.SkipUnknown = c.skip
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

// FuzzDecodeStringRequest decodes requests against a graph with string ids:
// whatever is accepted names each seed by a string id of the graph.
func FuzzDecodeStringRequest(f *testing.F) {
	g := stringGraph(f)
	for _, s := range []string{
		`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":["user:1","user:5"]}`,
		`{"version":1,"batch_id":"b2","algorithm":"deepwalk","seeds":["user:1",5,"\u00e9"]}`,
		`{"version":1,"batch_id":"v1","algorithm":"ppr","output":"visits","top_k":3,"steps_per_query":50,"queries":[{"id":"a","seeds":["user:1","user:2"],"weights":[2,0.5]}]}`,
		`{"version":1,"batch_id":"s1","algorithm":"neighbor","fanouts":[2],"seeds":["user:9"]}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, value []byte, skip bool) {
		lim := DefaultLimits()
		lim.SkipUnknown = skip
		lim.MaxSeeds = 1000
		r, err := DecodeRequest(nil, value, g, lim)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" || re.Msg == "" {
				t.Fatalf("error is not a proper rejection: %#v", err)
			}
			return
		}
		if r.Seeds != nil || len(r.StringSeeds) != len(r.Starts) || len(r.Starts) == 0 {
			t.Fatalf("accepted %+v", r)
		}
		for i, s := range r.StringSeeds {
			if g.ExternalString(r.Starts[i]) != s {
				t.Fatalf("seed %q starts at %q", s, g.ExternalString(r.Starts[i]))
			}
		}
	})
}
