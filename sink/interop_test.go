package sink

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/walkstage/walkstage/sink/output"
)

// Apache Arrow's Parquet implementation is independent of parquet-go: if it
// reads our schema as the standard list layout and gets every value back,
// Spark, DuckDB and pyarrow (which share its reading of the spec) will too.
func TestArrowReadsOutput(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 21)
	want := expectedRows(g, chunks, n)
	for _, c := range []Compression{Zstd, Snappy, None} {
		t.Run(string(c), func(t *testing.T) {
			b, _ := fileBucket(t)
			m := writeBatch(t, b, testMeta("arrow", n), g, chunks, WithCompression(c), WithRowGroupRows(700), WithFileBytes(40<<10))
			if len(m.Files) < 2 {
				t.Fatalf("%d parts, want several", len(m.Files))
			}
			var got []Row
			for _, f := range m.Files {
				data, err := b.ReadAll(context.Background(), f.Key)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, readArrow(t, data, m)...)
			}
			compareRows(t, got, want)
		})
	}
}

func readArrow(t *testing.T, data []byte, m *output.Manifest) []Row {
	t.Helper()
	// Not a checked allocator: arrow-go v18.8.0's delta decoder keeps 64
	// bytes per column reader, which the check reports as a leak.
	mem := memory.DefaultAllocator
	pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	kv := pr.MetaData().KeyValueMetadata()
	for k, want := range map[string]string{MetaBatchID: m.BatchID, MetaGraphVersion: m.GraphVersion, MetaEngine: m.Engine, MetaWalkstageVersion: "test"} {
		if got := kv.FindValue(k); got == nil || *got != want {
			t.Errorf("arrow: metadata %s = %v, want %q", k, got, want)
		}
	}
	// The leaf column must be the three-level walk.list.element.
	if p := pr.MetaData().Schema.Column(3).Path(); p != "walk.list.element" {
		t.Errorf("arrow: leaf column path %q, want walk.list.element", p)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1024}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	wantSchema := arrow.NewSchema([]arrow.Field{
		{Name: "walk_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "start", Type: arrow.PrimitiveTypes.Int64},
		{Name: "length", Type: arrow.PrimitiveTypes.Int32},
		{Name: "walk", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64})},
	}, nil)
	for i, f := range wantSchema.Fields() {
		got := tbl.Schema().Field(i)
		if got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			t.Fatalf("arrow: field %d is %s %s, want %s %s", i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	var rows []Row
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		starts := rec.Column(1).(*array.Int64)
		lens := rec.Column(2).(*array.Int32)
		walks := rec.Column(3).(*array.List)
		vals := walks.ListValues().(*array.Int64)
		for i := range int(rec.NumRows()) {
			if walks.IsNull(i) || ids.IsNull(i) {
				t.Fatalf("arrow: null in row %d", i)
			}
			lo, hi := walks.ValueOffsets(i)
			w := make([]int64, 0, hi-lo)
			for j := lo; j < hi; j++ {
				w = append(w, vals.Value(int(j)))
			}
			rows = append(rows, Row{WalkID: ids.Value(i), Start: starts.Value(i), Length: lens.Value(i), Walk: w})
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
