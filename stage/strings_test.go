package stage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/segmentio/kafka-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
)

// stringGraphFile writes a graph with string ids: an R-MAT graph's vertices
// renamed "user:<n>" (every seventh "ユーザー:<n>"), saved in format version 2.
func stringGraphFile(t testing.TB) (string, *graph.Graph) {
	t.Helper()
	r, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 9, EdgeFactor: 8, Seed: 3, Undirected: true, Weighted: true, Name: "users"})
	if err != nil {
		t.Fatal(err)
	}
	name := func(v uint32) string {
		if v%7 == 0 {
			return fmt.Sprintf("ユーザー:%d", v)
		}
		return fmt.Sprintf("user:%d", v)
	}
	var edges []graph.StringEdge
	for u := range uint32(r.NumVertices()) {
		for i, v := range r.Neighbors(u) {
			edges = append(edges, graph.StringEdge{Src: name(u), Dst: name(v), Weight: r.Weights[r.Offsets[u]+uint64(i)]})
		}
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "users", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "users.wsg")
	if err := graph.Save(p, g); err != nil {
		t.Fatal(err)
	}
	if back, err := graph.Load(p); err != nil || !back.HasStringIDs() {
		t.Fatalf("load %s: %v", p, err)
	}
	return p, g
}

// readParts reads every part a manifest lists as rows of type T.
func readParts[T any](t *testing.T, ctx context.Context, b *blob.Bucket, man *output.Manifest) []T {
	t.Helper()
	var rows []T
	for _, f := range man.Files {
		data, err := b.ReadAll(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		part, err := parquet.Read[T](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		rows = append(rows, part...)
	}
	return rows
}

// TestStageStringIDs runs the stage on a graph with string ids against
// kfake and gofakes3: walk, visits and sampling requests name their seeds
// by string id and get output in string ids (walks that follow the graph's
// edges from the requested seeds); unknown seeds are skipped and reported
// as strings; bad string seeds are rejected with their reason.
func TestStageStringIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 2)
	outURL, bucket := startS3(t)
	gpath, g := stringGraphFile(t)
	_, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_UNKNOWN_VERTICES=skip", "WALKSTAGE_MICROBATCH_MAX_WAIT=10ms"))
	defer stop()

	// Four vertices with out-edges, one of them not ASCII.
	var seeds []string
	n := uint32(g.NumVertices())
	for v := uint32(0); v < n && len(seeds) < 3; v += 20 {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalString(v))
		}
	}
	for v := n - 1; len(seeds) < 4; v-- {
		if id := g.ExternalString(v); g.Degree(v) > 0 && strings.HasPrefix(id, "ユーザー") {
			seeds = slices.Insert(seeds, 1, id)
		}
	}
	msgs := []kafka.Message{
		request("walks", map[string]any{"algorithm": "node2vec", "p": 0.5, "q": 2, "length": 12, "walks_per_seed": 3,
			"seeds": append(slices.Clone(seeds), "nobody")}),
		request("visits", map[string]any{"algorithm": "ppr", "output": "visits", "top_k": 5, "steps_per_query": 2000, "seeds": seeds}),
		request("samples", map[string]any{"algorithm": "neighbor", "fanouts": []int{4, 2}, "edge_weight": true, "seeds": seeds}),
		request("bad-number", map[string]any{"algorithm": "deepwalk", "seeds": []any{"user:1", 5}}),
		request("bad-empty", map[string]any{"algorithm": "deepwalk", "seeds": []string{""}}),
		request("bad-long", map[string]any{"algorithm": "deepwalk", "seeds": []string{strings.Repeat("u", 1025)}}),
		request("bad-range", map[string]any{"algorithm": "deepwalk", "seed_range": map[string]int{"first": 0, "count": 3}}),
		request("bad-unknown", map[string]any{"algorithm": "deepwalk", "seeds": []string{"nobody", "nor-me"}}),
	}
	produce(t, brokers, "in", msgs...)
	rejects := map[string]message.Reason{"bad-number": message.ReasonInvalidParameters, "bad-empty": message.ReasonInvalidParameters,
		"bad-long": message.ReasonInvalidParameters, "bad-range": message.ReasonInvalidParameters, "bad-unknown": message.ReasonUnknownVertices}
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == len(msgs) })
	if err != nil {
		t.Fatalf("events (%d of %d): %v", len(events), len(msgs), err)
	}
	for id, reason := range rejects {
		if ev := events[id][0]; ev.Status != message.StatusRejected || ev.Reason != string(reason) {
			t.Errorf("%s: %s/%s %s, want rejected/%s", id, ev.Status, ev.Reason, ev.Error, reason)
		}
	}
	manifest := func(id string) *output.Manifest {
		ev := events[id][0]
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %s %s %s", id, ev.Status, ev.Reason, ev.Error)
		}
		man, err := output.ReadManifest(ctx, bucket, strings.TrimPrefix(ev.Manifest, "s3://walks/"))
		if err != nil {
			t.Fatal(err)
		}
		return man
	}
	edge := func(a, b string) bool {
		u, ok1 := g.DenseIDString(a)
		v, ok2 := g.DenseIDString(b)
		return ok1 && ok2 && g.HasEdge(u, v)
	}

	// Walks: 3 per known seed, in seed order, each an edge path.
	ev := events["walks"][0]
	if ev.Seeds != 4 || ev.SkippedSeeds != 1 || !slices.Equal([]string(ev.SkippedIDs), []string{"nobody"}) || ev.Walks != 12 {
		t.Errorf("walks event: seeds %d, skipped %d %v, walks %d", ev.Seeds, ev.SkippedSeeds, ev.SkippedIDs, ev.Walks)
	}
	walks := readParts[sink.StringRow](t, ctx, bucket, manifest("walks"))
	if len(walks) != 12 {
		t.Fatalf("%d walks, want 12", len(walks))
	}
	for k, w := range walks {
		if w.WalkID != int64(k) || w.Start != seeds[k/3] || w.Walk[0] != seeds[k/3] || int(w.Length) != len(w.Walk)-1 {
			t.Errorf("walk %d: %+v, want start %q", k, w, seeds[k/3])
		}
		for i := 1; i < len(w.Walk); i++ {
			if !edge(w.Walk[i-1], w.Walk[i]) {
				t.Errorf("walk %d: %q -> %q is not an edge", k, w.Walk[i-1], w.Walk[i])
			}
		}
	}

	// Visits: one row per seed, named by it; candidates are vertices.
	vrows := readParts[sink.StringVisitRow](t, ctx, bucket, manifest("visits"))
	if len(vrows) != len(seeds) {
		t.Fatalf("%d visit rows, want %d", len(vrows), len(seeds))
	}
	for q, r := range vrows {
		if r.QueryID != seeds[q] || len(r.Candidates) == 0 {
			t.Errorf("visits row %d: %+v", q, r)
		}
		for _, c := range r.Candidates {
			if _, ok := g.DenseIDString(c.Vertex); !ok {
				t.Errorf("visits row %d: candidate %q is not a vertex", q, c.Vertex)
			}
		}
	}

	// Samples: each instance's seed is its request seed; rows are edges.
	srows := readParts[sink.WeightedStringSampleRow](t, ctx, bucket, manifest("samples"))
	if len(srows) == 0 {
		t.Fatal("no sampled edges")
	}
	for _, r := range srows {
		if r.Seed != seeds[r.InstanceID] || !edge(r.Src, r.Dst) || r.EdgeWeight <= 0 {
			t.Errorf("sampled edge %+v (instance seed %q)", r, seeds[r.InstanceID])
		}
		if r.Hop == 0 && r.Src != r.Seed {
			t.Errorf("first hop %+v leaves from %q, not its seed", r, r.Src)
		}
	}
}

// TestTablesOfStringIDs: with WALKSTAGE_TABLE_CATALOG set, batches of a
// graph with string ids go to tables of their own (walks_string,
// visits_string, samples_string: string id columns), read back by
// iceberg-go with the ids as strings.
func TestTablesOfStringIDs(t *testing.T) {
	brokers := startKafka(t, 1)
	gpath, g := stringGraphFile(t)
	catalog := "file://" + t.TempDir()
	runStage(t, stageEnviron(brokers, gpath, "file://"+t.TempDir(), "WALKSTAGE_TABLE_CATALOG="+catalog, "WALKSTAGE_LOG_LEVEL=warn"))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	var seeds []string
	for v := uint32(0); len(seeds) < 3; v += 11 {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalString(v))
		}
	}
	produce(t, brokers, "in",
		request("tsw", map[string]any{"algorithm": "deepwalk", "length": 6, "walks_per_seed": 2, "seeds": seeds}),
		request("tsv", map[string]any{"algorithm": "ppr", "output": "visits", "top_k": 4, "steps_per_query": 500, "seeds": seeds}),
		request("tss", map[string]any{"algorithm": "neighbor", "fanouts": []int{2}, "seeds": seeds}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) >= 3 })
	if err != nil {
		t.Fatal(err)
	}
	for id, ev := range events {
		if ev[0].Status != message.StatusSucceeded {
			t.Fatalf("%s: %s %s %s", id, ev[0].Status, ev[0].Reason, ev[0].Error)
		}
	}
	tb, err := icetable.Open(ctx, icetable.Options{Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	for table, column := range map[string]string{"walks_string": "walk", "visits_string": "candidates", "samples_string": "src"} {
		tbl, err := tb.Table(ctx, table)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		schema, rows := at.Schema().String(), at.NumRows()
		at.Release()
		if rows == 0 || !strings.Contains(schema, column) || strings.Contains(schema, "int64>") || !strings.Contains(schema, "utf8") {
			t.Errorf("%s: %d rows, schema %s", table, rows, schema)
		}
		if table == "walks_string" && rows != int64(2*len(seeds)) {
			t.Errorf("walks_string: %d rows, want %d", rows, 2*len(seeds))
		}
	}
}
