package sink

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/visits"
)

var visitAlgo = walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.2}

// countVisits counts n single-seed queries on the CPU engine.
func countVisits(t testing.TB, g *graph.Graph, n int) ([]string, []visits.VisitResult) {
	t.Helper()
	e, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]visits.VisitQuery, n)
	ids := make([]string, n)
	for i := range qs {
		qs[i] = visits.VisitQuery{Starts: []uint32{uint32(i % g.NumVertices())}}
		ids[i] = fmt.Sprintf("q-%d", i)
	}
	res, _, err := visits.CountVisits(context.Background(), e, g,
		visits.VisitParams{Algorithm: visitAlgo, Seed: 5, StepsPerQuery: 2000, TopK: 10}, qs)
	if err != nil {
		t.Fatal(err)
	}
	return ids, res
}

func visitMeta(id string, n int) BatchMeta {
	return BatchMeta{BatchID: id, Algorithm: visitAlgo, Seed: 5, Engine: "cpu", WalkstageVersion: "test", Queries: int64(n), Fingerprint: "fp-" + id}
}

// writeVisits writes results in calls of `per` rows and commits.
func writeVisits(t testing.TB, b *blob.Bucket, meta BatchMeta, g *graph.Graph, ids []string, res []visits.VisitResult, per int, opts ...Option) *output.Manifest {
	t.Helper()
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", meta, g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < len(res); lo += per {
		hi := min(lo+per, len(res))
		if err := w.WriteVisits(ctx, ids[lo:hi], res[lo:hi]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantVisitRows(g *graph.Graph, ids []string, res []visits.VisitResult) []VisitRow {
	rows := make([]VisitRow, len(res))
	for k, r := range res {
		rows[k] = VisitRow{QueryID: ids[k], Steps: r.Steps, Candidates: []VisitCandidate{}}
		for _, c := range r.Candidates {
			rows[k].Candidates = append(rows[k].Candidates, VisitCandidate{g.ExternalID(c.Vertex), c.Visits, float64(c.Visits) / float64(r.Steps)})
		}
	}
	return rows
}

// Arrow reads the visits schema as query_id STRING, steps INT64,
// candidates LIST<STRUCT<vertex, visits, score>>, every value back.
func TestVisitsArrowReadsOutput(t *testing.T) {
	g := testGraph(t)
	const n = 2500 // three row groups
	ids, res := countVisits(t, g, n)
	want := wantVisitRows(g, ids, res)
	b, _ := fileBucket(t)
	m := writeVisits(t, b, visitMeta("visits", n), g, ids, res, 700, WithFileBytes(20<<10))
	if len(m.Files) < 2 || m.Output != OutputVisits || m.Queries != n || m.Walks == 0 || m.Candidates == 0 {
		t.Fatalf("manifest %+v", m)
	}
	var got []VisitRow
	for _, f := range m.Files {
		data, err := b.ReadAll(context.Background(), f.Key)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, readVisitsArrow(t, data)...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("arrow read %d rows that differ from the %d written", len(got), len(want))
	}
	// The manifest decodes (rows are queries) and says what the event needs.
	data, err := b.ReadAll(context.Background(), pathOfSuccess(t, m))
	if err != nil {
		t.Fatal(err)
	}
	dm, err := output.DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	var steps, cands int64
	for _, r := range res {
		steps += r.Steps
		cands += int64(len(r.Candidates))
	}
	if dm.Steps != steps || dm.Candidates != cands || dm.Queries != n {
		t.Errorf("manifest steps %d candidates %d queries %d, want %d %d %d", dm.Steps, dm.Candidates, dm.Queries, steps, cands, n)
	}
}

func pathOfSuccess(t *testing.T, m *output.Manifest) string {
	l, err := output.BatchLayout("walks", m.Kind(), m.Graph, m.Algorithm.Name, m.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	return l.SuccessKey()
}

// The same results give the same parts whatever the calls' sizes, and a
// second writer with the same fingerprint gets the first's manifest.
func TestVisitsDeterministicAndShareCommit(t *testing.T) {
	g := testGraph(t)
	const n = 1500
	ids, res := countVisits(t, g, n)
	var crcs [][]string
	for _, per := range []int{n, 1, 333} {
		b, _ := fileBucket(t)
		m := writeVisits(t, b, visitMeta("d", n), g, ids, res, per, WithFileBytes(16<<10))
		var c []string
		for _, f := range m.Files {
			c = append(c, fmt.Sprint(f.CRC32C, f.Rows, f.Bytes, f.Steps))
		}
		crcs = append(crcs, c)
	}
	if !reflect.DeepEqual(crcs[0], crcs[1]) || !reflect.DeepEqual(crcs[0], crcs[2]) {
		t.Fatalf("parts differ by call size: %v", crcs)
	}
	b, _ := fileBucket(t)
	first := writeVisits(t, b, visitMeta("d", n), g, ids, res, 100)
	again := writeVisits(t, b, visitMeta("d", n), g, ids, res, 100)
	if !reflect.DeepEqual(first.Files, again.Files) {
		t.Error("a second writer with the same fingerprint replaced the first's parts")
	}
	found, err := Lookup(context.Background(), b, "walks", "d", "fp-d")
	if err != nil || found == nil || found.Queries != n {
		t.Fatalf("lookup: %v %+v", err, found)
	}
	other := visitMeta("d", n)
	other.Fingerprint = "another"
	w, _ := NewBatchWriter(context.Background(), b, "walks", other, g)
	w.WriteVisits(context.Background(), ids, res)
	if _, err := w.Commit(context.Background()); !errors.Is(err, ErrBatchConflict) {
		t.Errorf("different fingerprint: %v, want a conflict", err)
	}
}

func TestVisitsWriterRefusesIncomplete(t *testing.T) {
	g := testGraph(t)
	ids, res := countVisits(t, g, 10)
	b, _ := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", visitMeta("short", 11), g)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteVisits(ctx, ids, res); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("commit of 10 of 11 queries: %v", err)
	}
	if err := w.WriteVisits(ctx, ids[:1], res[:2]); err == nil {
		t.Error("mismatched ids accepted")
	}
	if _, err := NewBatchWriter(ctx, b, "walks", BatchMeta{BatchID: "x", Algorithm: visitAlgo, Queries: 3, Walks: 3}, g); err == nil {
		t.Error("walks and queries both accepted")
	}
}

func readVisitsArrow(t *testing.T, data []byte) []VisitRow {
	t.Helper()
	cand := arrow.StructOf(
		arrow.Field{Name: "vertex", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "visits", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	)
	tbl := arrowTable(t, data, OutputVisits, []arrow.Field{
		{Name: "query_id", Type: arrow.BinaryTypes.String},
		{Name: "steps", Type: arrow.PrimitiveTypes.Int64},
		{Name: "candidates", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: cand})},
	})
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	var rows []VisitRow
	for tr.Next() {
		rec := tr.RecordBatch()
		qid := rec.Column(0).(*array.String)
		steps := rec.Column(1).(*array.Int64)
		lists := rec.Column(2).(*array.List)
		st := lists.ListValues().(*array.Struct)
		vx, vs, sc := st.Field(0).(*array.Int64), st.Field(1).(*array.Int64), st.Field(2).(*array.Float64)
		for i := range int(rec.NumRows()) {
			r := VisitRow{QueryID: qid.Value(i), Steps: steps.Value(i), Candidates: []VisitCandidate{}}
			lo, hi := lists.ValueOffsets(i)
			for j := lo; j < hi; j++ {
				r.Candidates = append(r.Candidates, VisitCandidate{vx.Value(int(j)), vs.Value(int(j)), sc.Value(int(j))})
			}
			rows = append(rows, r)
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
