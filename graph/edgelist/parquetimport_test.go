package edgelist

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
)

type pqEdge struct {
	Src    int64   `parquet:"src"`
	Dst    int32   `parquet:"dst"`
	Weight float64 `parquet:"weight"`
	Label  int32   `parquet:"label"`
	Extra  string  `parquet:"note"`
}

func writeParquet[T any](t *testing.T, rows []T, opts ...parquet.WriterOption) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edges.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportParquetMatchesFromEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var rows []pqEdge
	var edges []graph.Edge
	for i := 0; i < 5000; i++ {
		e := graph.Edge{Src: rng.Int64N(300) - 50, Dst: rng.Int64N(300), Weight: float32(rng.IntN(16)+1) / 8, Label: uint8(rng.IntN(6))}
		edges = append(edges, e)
		rows = append(rows, pqEdge{Src: e.Src, Dst: int32(e.Dst), Weight: float64(e.Weight), Label: int32(e.Label), Extra: "x"})
	}
	// Several row groups, several pages each.
	path := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(1234), parquet.PageBufferSize(512))
	for _, o := range []ImportOptions{
		{Name: "p", Weighted: true, Labelled: true, Duplicates: graph.DupSumWeights, RunEdges: 700},
		{Name: "p", Undirected: true, Weighted: true, Duplicates: graph.DupKeepFirst},
		{Name: "p", Labelled: true, Duplicates: graph.DupKeepAll, SelfLoops: true},
	} {
		want, err := graph.FromEdges(edges, buildOpts(o))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "g.wsg")
		st, err := ImportParquet(context.Background(), path, out, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := graph.LoadWith(out, graph.LoadOptions{VerifyChecksum: true})
		if err != nil {
			t.Fatal(err)
		}
		sameGraph(t, got, want)
		got.Close()
		if st.InputEdges != int64(len(rows)) {
			t.Fatalf("read %d rows, want %d", st.InputEdges, len(rows))
		}
	}
}

func TestImportParquetErrors(t *testing.T) {
	type noDst struct {
		Src int64 `parquet:"src"`
		To  int64 `parquet:"to"`
	}
	type strDst struct {
		Src int64  `parquet:"src"`
		Dst string `parquet:"dst"`
	}
	type optWeight struct {
		Src    int64    `parquet:"src"`
		Dst    int64    `parquet:"dst"`
		Weight *float32 `parquet:"weight,optional"`
	}
	one := float32(1)
	neg := float32(-2)
	for _, c := range []struct {
		name string
		path string
		o    ImportOptions
		want string
	}{
		{"missing column", writeParquet(t, []noDst{{1, 2}}), ImportOptions{}, `no column "dst" (have src, to)`},
		{"wrong type", writeParquet(t, []strDst{{1, "2"}}), ImportOptions{}, `column "dst" has type BYTE_ARRAY, want INT32 or INT64`},
		{"null weight", writeParquet(t, []optWeight{{1, 2, &one}, {2, 3, nil}}), ImportOptions{Weighted: true}, "row group 0 row 1: null weight"},
		{"bad weight", writeParquet(t, []optWeight{{1, 2, &neg}}), ImportOptions{Weighted: true}, "row group 0 row 0: bad weight -2"},
		{"bad label", writeParquet(t, []pqEdge{{1, 2, 1, 300, ""}}), ImportOptions{Labelled: true}, "bad label 300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ImportParquet(context.Background(), c.path, filepath.Join(t.TempDir(), "g.wsg"), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "edges.parquet") {
				t.Fatalf("got %v, want an error naming the file and %q", err, c.want)
			}
		})
	}
	notParquet := filepath.Join(t.TempDir(), "x.parquet")
	os.WriteFile(notParquet, []byte("1 2\n"), 0o644)
	if _, err := ImportParquet(context.Background(), notParquet, filepath.Join(t.TempDir(), "g.wsg"), ImportOptions{}); err == nil || !strings.Contains(err.Error(), "not a readable Parquet file") {
		t.Fatalf("got %v", err)
	}
}
