package sink

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	arrowpq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/walk"
)

// stringTestGraph is testGraph's shape with string ids of many lengths:
// short ASCII, non-ASCII, and one of the longest a graph takes (1024
// bytes), so dictionaries hold strings of every size.
func stringTestGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	name := func(v int) string {
		switch {
		case v == 11:
			return strings.Repeat("L", 1024)
		case v%5 == 0:
			return fmt.Sprintf("nutzer:%d:Ünïcode", v)
		}
		return fmt.Sprintf("user:%d", v)
	}
	var edges []graph.StringEdge
	const n = 300
	for v := range n {
		if v == 7 {
			continue // no out-edges
		}
		for range 1 + r.IntN(6) {
			edges = append(edges, graph.StringEdge{Src: name(v), Dst: name(r.IntN(n)), Weight: float32(1 + r.IntN(9))})
		}
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "strings", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// expectedStringRows turns chunks into the rows the sink must write for a
// graph with string ids.
func expectedStringRows(g *graph.Graph, chunks []walk.Chunk, n int) []StringRow {
	rows := make([]StringRow, n)
	for _, c := range chunks {
		for k := range c.Len() {
			vs := c.Walk(k)
			ext := make([]string, len(vs))
			for i, v := range vs {
				ext[i] = g.ExternalString(v)
			}
			rows[c.WalkIDs[k]] = StringRow{WalkID: int64(c.WalkIDs[k]), Start: ext[0], Length: int32(len(vs) - 1), Walk: ext}
		}
	}
	return rows
}

// Walks of a graph with string ids are written as dictionary-encoded
// strings and read back, by parquet-go and by Apache Arrow's Go reader, as
// the walks the engine took: every row the engine's walk in string ids,
// every consecutive pair an edge of the graph.
func TestStringIDWalks(t *testing.T) {
	g := stringTestGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 42)
	want := expectedStringRows(g, chunks, n)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"zstd", nil},
		{"zstd asked for split", []Option{WithWalkEncoding(ByteStreamSplit)}},
		{"snappy", []Option{WithCompression(Snappy)}},
		{"none, small row groups", []Option{WithCompression(None), WithRowGroupRows(700), WithFileBytes(64 << 10)}},
		{"general pages", []Option{withGeneralPages(), WithRowGroupRows(1000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := fileBucket(t)
			m := writeBatch(t, b, testMeta("strings", n), g, chunks, tc.opts...)
			var got []StringRow
			for _, f := range m.Files {
				data, err := b.ReadAll(context.Background(), f.Key)
				if err != nil {
					t.Fatal(err)
				}
				if sum := PartCRC32C(data); sum != f.CRC32C {
					t.Errorf("%s: crc32c %s, manifest says %s", f.Key, sum, f.CRC32C)
				}
				checkStringColumns(t, data)
				part, err := parquet.Read[StringRow](bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(part)) != f.Rows {
					t.Errorf("%s: %d rows, manifest says %d", f.Key, len(part), f.Rows)
				}
				got = append(got, part...)
				arrowStringWalks(t, data, part)
			}
			if len(got) != n {
				t.Fatalf("%d rows, want %d", len(got), n)
			}
			for i := range want {
				if g, w := got[i], want[i]; g.WalkID != w.WalkID || g.Start != w.Start || g.Length != w.Length || !slices.Equal(g.Walk, w.Walk) {
					t.Fatalf("row %d = %+v, want %+v", i, g, w)
				}
			}
			checkWalkEdges(t, g, got)
		})
	}
}

// checkWalkEdges checks that walks in string ids follow the graph's edges.
func checkWalkEdges(t *testing.T, g *graph.Graph, rows []StringRow) {
	t.Helper()
	for _, r := range rows {
		for i := 1; i < len(r.Walk); i++ {
			u, ok1 := g.DenseIDString(r.Walk[i-1])
			v, ok2 := g.DenseIDString(r.Walk[i])
			if !ok1 || !ok2 || !g.HasEdge(u, v) {
				t.Fatalf("walk %d: %q -> %q is not an edge", r.WalkID, r.Walk[i-1], r.Walk[i])
			}
		}
	}
}

// checkStringColumns checks the footer of a part: start and walk values
// are BYTE_ARRAY STRING columns with a dictionary page and RLE_DICTIONARY
// data pages, and their statistics bound their values.
func checkStringColumns(t *testing.T, data []byte) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Metadata().Schema {
		if (s.Name == "start" || s.Name == "element") && (s.Type.V != format.ByteArray || s.LogicalType.Value == nil || s.LogicalType.Value.String() != "STRING") {
			t.Fatalf("column %s: type %v, logical type %v", s.Name, s.Type.V, s.LogicalType.Value)
		}
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			md := c.MetaData
			if md.Type != format.ByteArray {
				continue
			}
			if md.DictionaryPageOffset == 0 || md.DictionaryPageOffset >= md.DataPageOffset || !slices.Contains(md.Encoding, format.RLEDictionary) {
				t.Fatalf("column %v: dictionary at %d, data at %d, encodings %v", md.PathInSchema, md.DictionaryPageOffset, md.DataPageOffset, md.Encoding)
			}
			if bytes.Compare(md.Statistics.MinValue, md.Statistics.MaxValue) > 0 {
				t.Fatalf("column %v: min %q > max %q", md.PathInSchema, md.Statistics.MinValue, md.Statistics.MaxValue)
			}
			// The pages are the encoder's, copied verbatim: parquet-go
			// re-encoding them would write page statistics.
			var h format.PageHeader
			r := bytes.NewReader(data[md.DataPageOffset:])
			if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(r)).Decode(&h); err != nil {
				t.Fatal(err)
			}
			if h.Type != format.DataPage || h.DataPageHeader.V.Encoding != format.RLEDictionary {
				t.Fatalf("column %v: first data page %+v", md.PathInSchema, h)
			}
			if st := h.DataPageHeader.V.Statistics; st.MinValue != nil || st.MaxValue != nil {
				t.Fatalf("column %v: first page has statistics %+v: parquet-go re-encoded the row group instead of copying it", md.PathInSchema, st)
			}
		}
	}
}

// arrowStringWalks reads a part with Apache Arrow's Go reader and compares
// its start and walk columns with rows (parquet-go's reading).
func arrowStringWalks(t *testing.T, data []byte, rows []StringRow) {
	t.Helper()
	mem := memory.DefaultAllocator
	pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(arrowpq.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1024}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if s := tbl.Schema().String(); !strings.Contains(s, "start: type=utf8") || !strings.Contains(s, "walk: type=list<element: utf8") {
		t.Fatalf("arrow schema %s", s)
	}
	r := 0
	starts, walks := tbl.Column(1).Data().Chunks(), tbl.Column(3).Data().Chunks()
	for ci := range starts {
		st, wl := starts[ci].(*array.String), walks[ci].(*array.List)
		vals := wl.ListValues().(*array.String)
		for i := range st.Len() {
			if st.Value(i) != rows[r].Start {
				t.Fatalf("arrow row %d start %q, want %q", r, st.Value(i), rows[r].Start)
			}
			lo, hi := wl.ValueOffsets(i)
			var w []string
			for j := lo; j < hi; j++ {
				w = append(w, vals.Value(int(j)))
			}
			if !slices.Equal(w, rows[r].Walk) {
				t.Fatalf("arrow row %d walk %q, want %q", r, w, rows[r].Walk)
			}
			r++
		}
	}
	if r != len(rows) {
		t.Fatalf("arrow read %d rows, want %d", r, len(rows))
	}
}

// arrowSchema reads a part with Apache Arrow's Go reader and returns its
// schema and row count.
func arrowSchema(t *testing.T, data []byte) (string, int64) {
	t.Helper()
	mem := memory.DefaultAllocator
	pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(arrowpq.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1024}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	return tbl.Schema().String(), tbl.NumRows()
}

// Visits of a graph with string ids name their candidates by string id.
func TestStringIDVisits(t *testing.T) {
	g := stringTestGraph(t)
	ids, res := countVisits(t, g, 1500) // two row groups
	b, _ := fileBucket(t)
	m := writeVisits(t, b, visitMeta("visits", len(ids)), g, ids, res, 7)
	var got []StringVisitRow
	for _, f := range m.Files {
		data, err := b.ReadAll(context.Background(), f.Key)
		if err != nil {
			t.Fatal(err)
		}
		part, err := parquet.Read[StringVisitRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, part...)
		schema, rows := arrowSchema(t, data)
		if !strings.Contains(schema, "struct<vertex: utf8") || rows != int64(len(part)) {
			t.Fatalf("arrow: %d rows, schema %s", rows, schema)
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("%d rows, want %d", len(got), len(ids))
	}
	for q, r := range res {
		row := got[q]
		if row.QueryID != ids[q] || row.Steps != r.Steps || len(row.Candidates) != len(r.Candidates) {
			t.Fatalf("query %d: %+v, want %+v", q, row, r)
		}
		for x, c := range r.Candidates {
			if gc := row.Candidates[x]; gc.Vertex != g.ExternalString(c.Vertex) || gc.Visits != c.Visits {
				t.Fatalf("query %d candidate %d: %+v, want %q %d", q, x, gc, g.ExternalString(c.Vertex), c.Visits)
			}
		}
	}
}

// Samples of a graph with string ids carry string seeds, sources and
// targets, each row an edge of the graph.
func TestStringIDSamples(t *testing.T) {
	g := stringTestGraph(t)
	for _, weight := range []bool{false, true} {
		t.Run(fmt.Sprint("weight=", weight), func(t *testing.T) {
			p := sampleParams
			const n = 200
			starts := make([]uint32, n)
			for i := range starts {
				starts[i] = uint32(i % g.NumVertices())
			}
			edges, _, err := graphsample.Sample(context.Background(), g, p, starts, 0)
			if err != nil {
				t.Fatal(err)
			}
			seeds := make([]int64, len(edges)) // dense ids, for a graph with string ids
			for i := range seeds {
				seeds[i] = int64(starts[i/p.InstancesPerSeed])
			}
			b, _ := fileBucket(t)
			m := writeSamples(t, b, sampleMeta("samples", p, len(edges), weight), g, seeds, edges, 64)
			var got []WeightedStringSampleRow
			for _, f := range m.Files {
				data, err := b.ReadAll(context.Background(), f.Key)
				if err != nil {
					t.Fatal(err)
				}
				part, err := parquet.Read[WeightedStringSampleRow](bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, part...)
				schema, rows := arrowSchema(t, data)
				if !strings.Contains(schema, "src: type=utf8") || strings.Contains(schema, "edge_weight") != weight || rows != int64(len(part)) {
					t.Fatalf("arrow: %d rows, schema %s", rows, schema)
				}
			}
			r := 0
			for k, es := range edges {
				for _, e := range es {
					row := got[r]
					if row.InstanceID != int64(k) || row.Seed != g.ExternalString(uint32(seeds[k])) || row.Hop != e.Hop ||
						row.Src != g.ExternalString(e.Src) || row.Dst != g.ExternalString(e.Dst) {
						t.Fatalf("row %d: %+v, want instance %d edge %+v", r, row, k, e)
					}
					if weight && row.EdgeWeight != g.Weights[e.Edge] {
						t.Fatalf("row %d: weight %v, want %v", r, row.EdgeWeight, g.Weights[e.Edge])
					}
					u, _ := g.DenseIDString(row.Src)
					v, _ := g.DenseIDString(row.Dst)
					if !g.HasEdge(u, v) {
						t.Fatalf("row %d: %q -> %q is not an edge", r, row.Src, row.Dst)
					}
					r++
				}
			}
			if r != len(got) {
				t.Fatalf("%d rows, want %d", len(got), r)
			}
		})
	}
}

// An encoder kept for reuse (Buffers, as the stage shares them between
// batches) writes integer and string walks alike after the other kind:
// the same bytes as fresh encoders.
func TestEncoderReusedAcrossIDTypes(t *testing.T) {
	sg, ig := stringTestGraph(t), testGraph(t)
	const n = 1500
	sc, ic := runEngine(t, sg, testAlgo, n, 42), runEngine(t, ig, testAlgo, n, 42)
	fresh := map[string][]string{}
	for name, g := range map[string]*graph.Graph{"strings": sg, "ints": ig} {
		chunks := sc
		if name == "ints" {
			chunks = ic
		}
		b, dir := fileBucket(t)
		writeBatch(t, b, testMeta(name, n), g, chunks, WithEncoders(1))
		fresh[name] = treeDigest(t, dir)
	}
	shared := NewBuffers(1)
	for _, name := range []string{"strings", "ints", "strings", "ints"} {
		g, chunks := sg, sc
		if name == "ints" {
			g, chunks = ig, ic
		}
		b, dir := fileBucket(t)
		writeBatch(t, b, testMeta(name, n), g, chunks, WithEncoders(1), WithBuffers(shared))
		if got := treeDigest(t, dir); !slices.Equal(got, fresh[name]) {
			t.Fatalf("%s after reuse:\n%v\nfresh:\n%v", name, got, fresh[name])
		}
	}
}
