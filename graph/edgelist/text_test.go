package edgelist

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// importString imports text through a file and loads the result.
func importString(t testing.TB, text string, o ImportOptions) (*graph.Graph, *ImportStats, error) {
	t.Helper()
	dir := t.(interface{ TempDir() string }).TempDir()
	in := filepath.Join(dir, "edges.txt")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "g.wsg")
	st, err := ImportText(context.Background(), in, out, o)
	if err != nil {
		return nil, nil, err
	}
	g, err := graph.LoadWith(out, graph.LoadOptions{VerifyChecksum: true})
	if err != nil {
		t.Fatalf("loading the imported graph: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g, st, nil
}

func buildOpts(o ImportOptions) graph.BuildOptions {
	return graph.BuildOptions{Name: o.Name, Undirected: o.Undirected, Weighted: o.Weighted, Labelled: o.Labelled,
		SelfLoops: o.SelfLoops, Duplicates: o.Duplicates, DenseIDs: o.DenseIDs}
}

func TestImportTextMatchesFromEdges(t *testing.T) {
	text := "\ufeff" + `# a SNAP-style header
% a Matrix Market style comment

1 2 0.5 1
1,2,2.5,0
2	3 1 2
  3 , 1 , 4 , 1
5 5 1 0
-9 1 7.25 3
9223372036854775807 2 1e-3 0
1 2 3 4
`
	edges := []graph.Edge{{Src: 1, Dst: 2, Weight: 0.5, Label: 1}, {Src: 1, Dst: 2, Weight: 2.5, Label: 0}, {Src: 2, Dst: 3, Weight: 1, Label: 2}, {Src: 3, Dst: 1, Weight: 4, Label: 1}, {Src: 5, Dst: 5, Weight: 1, Label: 0}, {Src: -9, Dst: 1, Weight: 7.25, Label: 3},
		{Src: 9223372036854775807, Dst: 2, Weight: 1e-3, Label: 0}, {Src: 1, Dst: 2, Weight: 3, Label: 4}}
	for _, undirected := range []bool{false, true} {
		for _, loops := range []bool{false, true} {
			for _, dup := range []graph.DuplicatePolicy{graph.DupKeepFirst, graph.DupSumWeights, graph.DupKeepAll} {
				o := ImportOptions{Name: "t", Weighted: true, Labelled: true, Undirected: undirected, SelfLoops: loops, Duplicates: dup}
				t.Run(fmt.Sprintf("undirected=%v/loops=%v/%v", undirected, loops, dup), func(t *testing.T) {
					want, err := graph.FromEdges(edges, buildOpts(o))
					if err != nil {
						t.Fatal(err)
					}
					got, st, err := importString(t, text, o)
					if err != nil {
						t.Fatal(err)
					}
					sameGraph(t, got, want)
					if st.InputEdges != int64(len(edges)) || st.Edges != want.NumEdges() || st.Vertices != want.NumVertices() || st.Version != want.Version {
						t.Fatalf("stats %+v disagree with the graph", st)
					}
					if !loops && st.SelfLoopsDropped != 1 {
						t.Fatalf("self-loops dropped = %d, want 1", st.SelfLoopsDropped)
					}
				})
			}
		}
	}
}

// TestImportTextSpillsMatchFromEdges drives the external sort hard: tiny
// runs (hundreds of spill files, so merging happens in rounds), random ids
// with many duplicates, every option combination.
func TestImportTextSpillsMatchFromEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var edges []graph.Edge
	var sb strings.Builder
	for i := 0; i < 700; i++ {
		e := graph.Edge{Src: rng.Int64N(60) - 20, Dst: rng.Int64N(60) - 20, Weight: float32(rng.IntN(8)+1) / 4, Label: uint8(rng.IntN(4))}
		if i%7 == 0 {
			e.Src = rng.Int64() // far-apart ids exercise the id index
		}
		edges = append(edges, e)
		fmt.Fprintf(&sb, "%d %d %g %d\n", e.Src, e.Dst, e.Weight, e.Label)
	}
	for _, runEdges := range []int{5, 64, 0} {
		for _, undirected := range []bool{false, true} {
			for _, dup := range []graph.DuplicatePolicy{graph.DupKeepFirst, graph.DupSumWeights, graph.DupKeepAll} {
				o := ImportOptions{Name: "r", Weighted: true, Labelled: true, Undirected: undirected, Duplicates: dup, RunEdges: runEdges, mergeFan: 4}
				t.Run(fmt.Sprintf("run=%d/undirected=%v/%v", runEdges, undirected, dup), func(t *testing.T) {
					want, err := graph.FromEdges(edges, buildOpts(o))
					if err != nil {
						t.Fatal(err)
					}
					got, st, err := importString(t, sb.String(), o)
					if err != nil {
						t.Fatal(err)
					}
					sameGraph(t, got, want)
					if runEdges == 5 && st.Runs <= 16 {
						t.Fatalf("only %d runs: the multi-round merge was not exercised", st.Runs)
					}
				})
			}
		}
	}
	// No spill files are left behind.
	ents, _ := filepath.Glob(filepath.Join(os.TempDir(), "walkstage-run-*"))
	if len(ents) > 0 {
		t.Fatalf("spill files left behind: %v", ents)
	}
}

func TestImportTextDenseIDs(t *testing.T) {
	o := ImportOptions{Name: "d", DenseIDs: true, Undirected: true}
	got, _, err := importString(t, "0 1\n1 2\n7 2\n", o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1, Weight: 0, Label: 0}, {Src: 1, Dst: 2, Weight: 0, Label: 0}, {Src: 7, Dst: 2, Weight: 0, Label: 0}}, buildOpts(o))
	sameGraph(t, got, want)
	if got.NumVertices() != 8 || got.IDs != nil {
		t.Fatalf("V=%d ids=%v, want 8 and no id map", got.NumVertices(), got.IDs != nil)
	}
}

func TestImportTextEmpty(t *testing.T) {
	got, _, err := importString(t, "# nothing\n", ImportOptions{Name: "e", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.NumVertices() != 0 || got.NumEdges() != 0 || !got.Weighted() {
		t.Fatalf("V=%d E=%d weighted=%v", got.NumVertices(), got.NumEdges(), got.Weighted())
	}
}

func TestImportTextGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("1 2\n2 3\n"))
	zw.Close()
	dir := t.TempDir()
	in := filepath.Join(dir, "web.txt.gz")
	os.WriteFile(in, buf.Bytes(), 0o644)
	out := filepath.Join(dir, "g.wsg")
	st, err := ImportText(context.Background(), in, out, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if st.Edges != 2 || g.Name != "web" {
		t.Fatalf("edges %d name %q", st.Edges, g.Name)
	}
}

func TestImportTextErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		o          ImportOptions
		want       string
	}{
		{"bad weight", "1 2 1\n1 3 x\n", ImportOptions{Weighted: true}, `edges.txt line 2: bad weight "x"`},
		{"zero weight", "1 2 0\n", ImportOptions{Weighted: true}, `line 1: bad weight "0"`},
		{"nan weight", "1 2 NaN\n", ImportOptions{Weighted: true}, `line 1: bad weight "NaN"`},
		{"inf weight", "1 2 1e39\n", ImportOptions{Weighted: true}, `line 1: bad weight "1e39"`},
		{"bad src", "# c\nx 2\n", ImportOptions{}, `line 2: bad source id "x"`},
		{"bad dst", "1 2.5\n", ImportOptions{}, `line 1: bad target id "2.5"`},
		{"id overflow", "1 9223372036854775808\n", ImportOptions{}, `line 1: bad target id`},
		{"missing column", "1 2 3\n4 5\n", ImportOptions{Weighted: true}, "line 2: 2 fields, want 3 (src dst weight)"},
		{"extra column", "1 2 3\n", ImportOptions{}, "line 1: 3 fields, want 2 (src dst); pass --weighted"},
		{"header", "src,dst\n1,2\n", ImportOptions{}, `line 1: bad source id "src"`},
		{"bad label", "1 2 256\n", ImportOptions{Labelled: true}, `line 1: bad label "256"`},
		{"duplicate", "1 2\n3 4\n1 2\n", ImportOptions{Duplicates: graph.DupError}, "duplicate edge 1 -> 2"},
		{"undirected duplicate", "1 2\n2 1\n", ImportOptions{Duplicates: graph.DupError, Undirected: true}, "duplicate edge"},
		{"negative dense", "1 -2\n", ImportOptions{DenseIDs: true}, "line 1: vertex id"},
		{"long line", strings.Repeat("1", maxLineBytes+10), ImportOptions{}, "line 1: longer than"},
		{"bad policy", "1 2\n", ImportOptions{Duplicates: 9}, "DuplicatePolicy(9)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := importString(t, c.text, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if c.name == "duplicate" && !errors.Is(err, graph.ErrDuplicate) {
				t.Fatalf("%v does not wrap ErrDuplicate", err)
			}
		})
	}
}

func TestImportTextProgressAndCancel(t *testing.T) {
	var sb strings.Builder
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&sb, "%d %d\n", i, (i*7919)%200000)
	}
	var reports []Progress
	o := ImportOptions{RunEdges: 50000, ProgressInterval: 1, Progress: func(p Progress) { reports = append(reports, p) }}
	_, st, err := importString(t, sb.String(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) == 0 || reports[len(reports)-1].Phase != "write" || reports[len(reports)-1].EdgesOut != st.Edges {
		t.Fatalf("progress reports %+v do not end with the write phase", reports)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	_, err = ImportTextReader(ctx, strings.NewReader(sb.String()), "x", filepath.Join(dir, "g.wsg"), ImportOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("cancelled import left %d files", len(ents))
	}
}

// TestImportTextRadixRunsMatchFromEdges uses runs big enough for the radix
// sort, with heavy duplication so that its stability (first = first in the
// input) is what the keep-first and sum results depend on.
func TestImportTextRadixRunsMatchFromEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var edges []graph.Edge
	var sb strings.Builder
	for i := 0; i < 20000; i++ {
		e := graph.Edge{Src: rng.Int64N(200) * 1000, Dst: rng.Int64N(150) - 75, Weight: float32(rng.IntN(8)+1) / 4, Label: uint8(rng.IntN(4))}
		edges = append(edges, e)
		fmt.Fprintf(&sb, "%d,%d,%g,%d\n", e.Src, e.Dst, e.Weight, e.Label)
	}
	for _, undirected := range []bool{false, true} {
		for _, dup := range []graph.DuplicatePolicy{graph.DupKeepFirst, graph.DupSumWeights, graph.DupKeepAll} {
			o := ImportOptions{Name: "x", Weighted: true, Labelled: true, Undirected: undirected, Duplicates: dup, RunEdges: 4096}
			want, err := graph.FromEdges(edges, buildOpts(o))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := importString(t, sb.String(), o)
			if err != nil {
				t.Fatal(err)
			}
			sameGraph(t, got, want)
		}
	}
}

func TestImportTextSpillFailure(t *testing.T) {
	var sb strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&sb, "%d %d\n", i, i+1)
	}
	dir := t.TempDir()
	o := ImportOptions{RunEdges: 100, TempDir: filepath.Join(dir, "missing")}
	_, err := ImportTextReader(context.Background(), strings.NewReader(sb.String()), "e.txt", filepath.Join(dir, "g.wsg"), o)
	if err == nil || !strings.Contains(err.Error(), "import e.txt") || !strings.Contains(err.Error(), "spill run") {
		t.Fatalf("got %v, want a spill error naming the input", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("failed import left %d files", len(ents))
	}
}

func TestImportTextMatrixMarket(t *testing.T) {
	text := "%%MatrixMarket matrix coordinate real general\n% comment\n3 3 2\n1 2 0.5\n3 1 2\n"
	got, _, err := importString(t, text, ImportOptions{Name: "mm", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := graph.FromEdges([]graph.Edge{{Src: 1, Dst: 2, Weight: 0.5, Label: 0}, {Src: 3, Dst: 1, Weight: 2, Label: 0}}, graph.BuildOptions{Name: "mm", Weighted: true})
	sameGraph(t, got, want)
	// Without the banner a three-number line is an edge (here: a bad one).
	if _, _, err := importString(t, "3 3 2\n", ImportOptions{}); err == nil {
		t.Fatal("a size line outside a Matrix Market file was accepted")
	}
}

func TestImportTextManySelfLoops(t *testing.T) {
	var sb strings.Builder
	var edges []graph.Edge
	for i := 0; i < 300; i++ {
		sb.WriteString(fmt.Sprintf("%d %d\n", i%37, i%37))
		edges = append(edges, graph.Edge{Src: int64(i % 37), Dst: int64(i % 37)})
	}
	sb.WriteString("1 2\n")
	edges = append(edges, graph.Edge{Src: 1, Dst: 2})
	o := ImportOptions{Name: "loops", RunEdges: 4}
	got, st, err := importString(t, sb.String(), o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := graph.FromEdges(edges, buildOpts(o))
	sameGraph(t, got, want)
	if st.SelfLoopsDropped != 300 || got.NumVertices() != 37 || st.Runs < 50 {
		t.Fatalf("dropped %d, V=%d, runs %d", st.SelfLoopsDropped, got.NumVertices(), st.Runs)
	}
}
