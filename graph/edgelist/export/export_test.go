package export

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
)

// import(export(g)) has g's version, in both formats, for the kinds of
// graph the importers build: generated (dense ids), id-mapped with
// negative and 64-bit ids, vertices without edges, self-loops and
// multi-edges.
func TestExportRoundTripKeepsVersion(t *testing.T) {
	ctx := context.Background()
	rmat := func(weighted bool, labels int) func(t *testing.T) *graph.Graph {
		return func(t *testing.T) *graph.Graph {
			g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 9, EdgeFactor: 4, Seed: 3, Undirected: true, Weighted: weighted,
				Labels: labels, Name: "rmat"})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	build := func(edges []graph.Edge, o graph.BuildOptions) func(t *testing.T) *graph.Graph {
		return func(t *testing.T) *graph.Graph {
			g, err := graph.FromEdges(edges, o)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	buildStrings := func(edges []graph.StringEdge, o graph.BuildOptions) func(t *testing.T) *graph.Graph {
		return func(t *testing.T) *graph.Graph {
			g, err := graph.FromStringEdges(edges, o)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	strEdges := []graph.StringEdge{{Src: "b", Dst: "a", Weight: 1, Label: 2, Time: 7}, {Src: "日本", Dst: "b", Weight: 2, Label: 0, Time: -3},
		{Src: "q", Dst: "q", Weight: 1, Time: 1}, {Src: "a", Dst: "user:10", Weight: 0.5, Label: 1, Time: 7}, {Src: "a", Dst: "user:10", Weight: 0.25, Label: 1, Time: 8}}
	sparse := []graph.Edge{{Src: -5, Dst: 1 << 40, Weight: 0.1, Label: 3}, {Src: 1 << 40, Dst: -5, Weight: 2.5e-7, Label: 0}, {Src: 7, Dst: 7, Weight: 1, Label: 1}, {Src: 42, Dst: -5, Weight: 3e30, Label: 255}, {Src: -9, Dst: -9, Weight: 1, Label: 0}}
	cases := []struct {
		name  string
		graph func(t *testing.T) *graph.Graph
	}{
		{"rmat weighted labelled", rmat(true, 5)},
		{"rmat plain", rmat(false, 0)},
		{"id map, isolated vertices", build(sparse, graph.BuildOptions{Name: "sparse", Weighted: true, Labelled: true})},
		{"id map plain", build(sparse, graph.BuildOptions{Name: "sparse-plain"})},
		{"dense, last vertex isolated", build([]graph.Edge{{Src: 0, Dst: 1, Weight: 1, Label: 0}, {Src: 1, Dst: 2, Weight: 1, Label: 0}}, graph.BuildOptions{Name: "d", DenseIDs: true, NumVertices: 6})},
		{"self-loops and multi-edges", build([]graph.Edge{{Src: 1, Dst: 1, Weight: 2, Label: 0}, {Src: 1, Dst: 2, Weight: 3, Label: 1}, {Src: 1, Dst: 2, Weight: 1, Label: 0}, {Src: 2, Dst: 1, Weight: 0.5, Label: 1}},
			graph.BuildOptions{Name: "multi", Weighted: true, Labelled: true, SelfLoops: true, Duplicates: graph.DupKeepAll})},
		{"empty", build(nil, graph.BuildOptions{Name: "empty"})},
		{"timed, same pair at two times", build([]graph.Edge{{Src: 3, Dst: 1, Weight: 2, Time: 50}, {Src: 3, Dst: 1, Weight: 1, Time: -7}, {Src: 3, Dst: 9, Weight: 1, Time: 50},
			{Src: 9, Dst: 3, Weight: 4, Time: 1 << 50}, {Src: 4, Dst: 4, Weight: 1, Time: 0}}, graph.BuildOptions{Name: "timed", Weighted: true, Timed: true})},
		{"timed dense", build([]graph.Edge{{Src: 0, Dst: 1, Time: 9}, {Src: 1, Dst: 0, Time: 3}, {Src: 0, Dst: 1, Time: 2}}, graph.BuildOptions{Name: "td", DenseIDs: true, NumVertices: 4, Timed: true, Duplicates: graph.DupKeepAll})},
		{"string ids, isolated vertex", buildStrings(strEdges, graph.BuildOptions{Name: "strings", Labelled: true})},
		{"string ids, timed", buildStrings(strEdges, graph.BuildOptions{Name: "strings-timed", Weighted: true, Labelled: true, Timed: true, Undirected: true})},
		{"string ids, rmat", func(t *testing.T) *graph.Graph {
			g := rmat(false, 0)(t)
			var se []graph.StringEdge
			for v := range g.NumVertices() {
				for _, d := range g.Neighbors(uint32(v)) {
					se = append(se, graph.StringEdge{Src: fmt.Sprintf("user:%d", v), Dst: fmt.Sprintf("user:%d", d), Time: int64(v*31+int(d)) % 1000})
				}
			}
			return buildStrings(se, graph.BuildOptions{Name: "rmat-strings", Timed: true, Duplicates: graph.DupKeepAll})(t)
		}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		g := c.graph(t)
		for _, f := range []Format{Text, Parquet} {
			t.Run(c.name+"/"+string(f), func(t *testing.T) {
				base := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+"."+string(f))
				st, err := WriteFile(ctx, g, base, f)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Exact {
					t.Fatalf("export says inexact: %s", st.Inexact)
				}
				out := base + ".wsg"
				var ist *edgelist.ImportStats
				if f == Text {
					ist, err = edgelist.ImportText(ctx, base, out, st.Import)
				} else {
					ist, err = edgelist.ImportParquet(ctx, base, out, st.Import)
				}
				if err != nil {
					t.Fatalf("import %v: %v", st.ImportFlags, err)
				}
				back, err := graph.Load(out)
				if err != nil {
					t.Fatal(err)
				}
				defer back.Close()
				if back.Version != g.Version || ist.Version != g.Version {
					t.Fatalf("version %s after the round trip, want %s (V %d/%d, E %d/%d)", back.Version, g.Version,
						back.NumVertices(), g.NumVertices(), back.NumEdges(), g.NumEdges())
				}
				if back.Name != g.Name {
					t.Fatalf("name %q, want %q", back.Name, g.Name)
				}
			})
		}
	}
}

// A graph with self-loops cannot carry marker rows for vertices without
// edges: Write says so instead of writing a file that imports differently.
func TestExportReportsInexactRoundTrip(t *testing.T) {
	g, err := graph.FromEdges([]graph.Edge{{Src: 1, Dst: 1, Weight: 1, Label: 0}, {Src: 2, Dst: 3, Weight: 1, Label: 0}, {Src: 9, Dst: 9, Weight: 1, Label: 0}}, graph.BuildOptions{Name: "x", SelfLoops: true, DenseIDs: true, NumVertices: 12})
	if err != nil {
		t.Fatal(err)
	}
	st, err := WriteFile(context.Background(), g, filepath.Join(t.TempDir(), "x.txt"), Text)
	if err != nil {
		t.Fatal(err)
	}
	if st.Exact || !strings.Contains(st.Inexact, "self-loops") {
		t.Fatalf("want an inexact export naming self-loops, got %+v", st)
	}
}

// The text export is readable on its own: a header that says how to
// rebuild the graph, then one edge a line in external ids.
func TestExportTextLayout(t *testing.T) {
	g, err := graph.FromEdges([]graph.Edge{{Src: -5, Dst: 1 << 40, Weight: 0.1, Label: 3}, {Src: 7, Dst: 7, Weight: 1, Label: 0}}, graph.BuildOptions{Name: "s", Weighted: true, Labelled: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.txt")
	if _, err := WriteFile(context.Background(), g, path, Text); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# columns: src dst weight label", "--weighted --labelled --duplicates keep-all", "-5 1099511627776 0.1 3\n", "7 7 1 0\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("export lacks %q:\n%s", want, b)
		}
	}
}
