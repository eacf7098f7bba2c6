package walkcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/visits"
)

// `walk --output visits` writes the rows the stage writes for the output
// "visits" request that lists the same seeds with rng_seed = --rng-seed.
func TestWalkCommandWritesVisits(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	out, err := runWalk(t, "--graph", gp, "--algorithm", "ppr", "--stop-probability", "0.25", "--length", "40", "--output", "visits",
		"--top-k", "7", "--steps-per-query", "3000", "--exclude-seeds", "--seeds", "100-400", "--rng-seed", "9",
		"--engine", "cpu", "--batch-id", "vis", "--out", "file://"+dir, "--quiet", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, `"output":"visits"`) || !strings.Contains(out, `"queries":31,`) {
		t.Errorf("output: %s", out)
	}
	g, err := graph.Load(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, "walks/kind=visits/graph=tiny/algorithm=ppr/batch=vis/_SUCCESS")))
	if err != nil || m.Output != sink.OutputVisits || m.Queries != 31 {
		t.Fatalf("manifest %v %+v", err, m)
	}
	var got []sink.VisitRow
	for _, f := range m.Files {
		data := mustRead(t, filepath.Join(dir, f.Key))
		rows, err := parquet.Read[sink.VisitRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows...)
	}
	body := `{"version":1,"batch_id":"vis","algorithm":"ppr","stop_probability":0.25,"length":40,"output":"visits","top_k":7,` +
		`"steps_per_query":3000,"exclude_seeds":true,"rng_seed":9,"seed_range":{"first":100,"count":301}}`
	lim := message.DefaultLimits()
	lim.SkipUnknown = true // the range is sparse, as --seeds A-B skips what the graph lacks
	r, err := message.DecodeRequest(nil, []byte(body), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := cpu.New(g)
	res, _, err := visits.CountVisits(context.Background(), e, g, r.Visits.Params, r.Visits.Queries)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(res) {
		t.Fatalf("%d rows, want %d", len(got), len(res))
	}
	for q, x := range res {
		want := sink.VisitRow{QueryID: r.Visits.QueryIDs[q], Steps: x.Steps}
		for _, c := range x.Candidates {
			want.Candidates = append(want.Candidates, sink.VisitCandidate{Vertex: g.ExternalID(c.Vertex), Visits: c.Visits, Score: float64(c.Visits) / float64(x.Steps)})
		}
		if !reflect.DeepEqual(got[q], want) {
			t.Fatalf("row %d: %+v, want %+v", q, got[q], want)
		}
	}
	if _, err := runWalk(t, "--graph", gp, "--output", "visits", "--seeds", "0-10", "--out", "file://"+dir); err == nil {
		t.Error("visits without a budget accepted")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With --walks-per-vertex, every seed is still one query of its own (the
// seeds were repeated as for walks, so the first seed's id named several
// queries and later seeds were never counted).
func TestWalkCommandVisitsWalksPerVertex(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	if out, err := runWalk(t, "--graph", gp, "--algorithm", "ppr", "--output", "visits", "--walks-per-seed", "3",
		"--seeds", "100-130", "--engine", "cpu", "--batch-id", "wpv", "--out", "file://"+dir, "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, "walks/kind=visits/graph=tiny/algorithm=ppr/batch=wpv/_SUCCESS")))
	if err != nil || m.Queries != 4 || m.Walks != 12 {
		t.Fatalf("manifest %v: %d queries of %d walks, want 4 of 12", err, m.Queries, m.Walks)
	}
	var ids []string
	for _, f := range m.Files {
		data := mustRead(t, filepath.Join(dir, f.Key))
		rows, err := parquet.Read[sink.VisitRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			ids = append(ids, r.QueryID)
		}
	}
	if want := []string{"100", "110", "120", "130"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("query ids %v, want %v", ids, want)
	}
}
