package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	parquetgo "github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// timedGraph is testGraph's shape with edge times (Unix-millisecond
// sized, so the deltas between walks are wide).
func timedGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var edges []graph.Edge
	const n = 300
	for v := range int64(n) {
		for range 1 + r.IntN(6) {
			edges = append(edges, graph.Edge{Src: v*1000 + 3, Dst: int64(r.IntN(n))*1000 + 3, Time: 1_700_000_000_000 + r.Int64N(1_000_000)})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "timed", Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var timedAlgo = walk.Algorithm{Kind: walk.Temporal, Length: 20, Time: walk.TimeParams{Bias: walk.TimeLinear}}

func timedChunks(t testing.TB, g *graph.Graph, n int) []walk.Chunk {
	t.Helper()
	e, err := cpu.New(g, cpu.WithChunkSize(97))
	if err != nil {
		t.Fatal(err)
	}
	starts := make([]uint32, n)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	var chunks []walk.Chunk
	err = e.Run(context.Background(), []walk.Job{{Algorithm: timedAlgo, Seed: 5, Starts: starts, WithTimes: true}}, func(c walk.Chunk) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// The times column, LIST<INT64> parallel to walk, reads back with Apache
// Arrow's reader (independent of ours) in both walk encodings, several
// parts and row groups, each walk's times as the engine gave them.
func TestTimesColumnReadsBackWithArrow(t *testing.T) {
	g := timedGraph(t)
	const n = 2500
	chunks := timedChunks(t, g, n)
	want := expectedRows(g, chunks, n)
	wantTimes := make([][]int64, n)
	for _, c := range chunks {
		for k := range c.Len() {
			wantTimes[c.WalkIDs[k]] = c.Times[c.Offsets[k]:c.Offsets[k+1]]
		}
	}
	for _, enc := range []WalkEncoding{DeltaBinaryPacked, ByteStreamSplit} {
		t.Run(string(enc), func(t *testing.T) {
			b, _ := fileBucket(t)
			meta := testMeta("timed", n)
			meta.Algorithm, meta.Times = timedAlgo, true
			m := writeBatch(t, b, meta, g, chunks, WithWalkEncoding(enc), WithRowGroupRows(600), WithFileBytes(40<<10))
			if len(m.Files) < 2 {
				t.Fatalf("%d parts, want several", len(m.Files))
			}
			var rows []Row
			var times [][]int64
			for _, f := range m.Files {
				data, err := b.ReadAll(context.Background(), f.Key)
				if err != nil {
					t.Fatal(err)
				}
				r, ts := readArrowTimes(t, data)
				rows, times = append(rows, r...), append(times, ts...)
			}
			compareRows(t, rows, want)
			for i := range times {
				if !slices.Equal(times[i], wantTimes[i]) {
					t.Fatalf("row %d: times %v, want %v", i, times[i], wantTimes[i])
				}
			}
		})
	}
}

func readArrowTimes(t *testing.T, data []byte) ([]Row, [][]int64) {
	t.Helper()
	mem := memory.DefaultAllocator
	pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if p := pr.MetaData().Schema.Column(4).Path(); p != "times.list.element" {
		t.Errorf("arrow: column 4 path %q, want times.list.element", p)
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
	list := arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64})
	for i, f := range []arrow.Field{{Name: "walk_id", Type: arrow.PrimitiveTypes.Int64}, {Name: "start", Type: arrow.PrimitiveTypes.Int64},
		{Name: "length", Type: arrow.PrimitiveTypes.Int32}, {Name: "walk", Type: list}, {Name: "times", Type: list}} {
		if got := tbl.Schema().Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			t.Fatalf("arrow: field %d is %s %s, want %s %s", i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	var rows []Row
	var times [][]int64
	values := func(l *array.List, i int) []int64 {
		vals := l.ListValues().(*array.Int64)
		lo, hi := l.ValueOffsets(i)
		var out []int64
		for j := lo; j < hi; j++ {
			out = append(out, vals.Value(int(j)))
		}
		return out
	}
	for tr.Next() {
		rec := tr.RecordBatch()
		ids, starts, lens := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int32)
		walks, ts := rec.Column(3).(*array.List), rec.Column(4).(*array.List)
		for i := range int(rec.NumRows()) {
			rows = append(rows, Row{WalkID: ids.Value(i), Start: starts.Value(i), Length: lens.Value(i), Walk: values(walks, i)})
			times = append(times, values(ts, i))
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, times
}

// A batch that writes times refuses a chunk without them, and a batch that
// does not ignores them (its parts have no times column).
func TestTimesColumnNeedsTimes(t *testing.T) {
	g := timedGraph(t)
	chunks := timedChunks(t, g, 100)
	b, _ := fileBucket(t)
	meta := testMeta("no-times", 100)
	meta.Algorithm, meta.Times = timedAlgo, true
	w, err := NewBatchWriter(context.Background(), b, "walks", meta, g)
	if err != nil {
		t.Fatal(err)
	}
	c := cloneChunk(chunks[0])
	c.Times = nil
	if err := w.Write(context.Background(), c); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("chunk without times: %v, want ErrBadChunk", err)
	}
	w.Abort(context.Background())

	meta.BatchID, meta.Times = "plain", false
	m := writeBatch(t, b, meta, g, chunks)
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, 100))
}

// On a graph with string ids the times column comes after the string
// walk column, and reads back with the walks.
func TestTimesColumnWithStringIDs(t *testing.T) {
	var edges []graph.StringEdge
	for i := range 50 {
		edges = append(edges, graph.StringEdge{Src: fmt.Sprintf("v%02d", i), Dst: fmt.Sprintf("v%02d", (i*7+3)%50), Time: int64(i % 9)},
			graph.StringEdge{Src: fmt.Sprintf("v%02d", i), Dst: fmt.Sprintf("v%02d", (i+1)%50), Time: int64(i % 4)})
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "strs", Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	chunks := timedChunks(t, g, n)
	b, _ := fileBucket(t)
	meta := testMeta("strs", n)
	meta.Algorithm, meta.Times = timedAlgo, true
	m := writeBatch(t, b, meta, g, chunks)
	type row struct {
		WalkID int64    `parquet:"walk_id"`
		Walk   []string `parquet:"walk,list"`
		Times  []int64  `parquet:"times,list"`
	}
	var rows []row
	for _, f := range m.Files {
		data, err := b.ReadAll(context.Background(), f.Key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := parquetgo.Read[row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for _, c := range chunks {
		for k := range c.Len() {
			r := rows[c.WalkIDs[k]]
			var want []string
			for _, v := range c.Walk(k) {
				want = append(want, g.ExternalString(v))
			}
			if !slices.Equal(r.Walk, want) || !slices.Equal(r.Times, c.Times[c.Offsets[k]:c.Offsets[k+1]]) {
				t.Fatalf("walk %d: %v %v, want %v %v", c.WalkIDs[k], r.Walk, r.Times, want, c.Times[c.Offsets[k]:c.Offsets[k+1]])
			}
		}
	}
}
