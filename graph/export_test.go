package graph

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// import(export(g)) has g's version, in both formats, for the kinds of
// graph the importers build: generated (dense ids), id-mapped with
// negative and 64-bit ids, vertices without edges, self-loops and
// multi-edges.
func TestExportRoundTripKeepsVersion(t *testing.T) {
	ctx := context.Background()
	rmat := func(weighted bool, labels int) func(t *testing.T) *Graph {
		return func(t *testing.T) *Graph {
			g, err := GenerateRMAT(ctx, RMATOptions{Scale: 9, EdgeFactor: 4, Seed: 3, Undirected: true, Weighted: weighted,
				Labels: labels, Name: "rmat"})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	build := func(edges []Edge, o BuildOptions) func(t *testing.T) *Graph {
		return func(t *testing.T) *Graph {
			g, err := FromEdges(edges, o)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	sparse := []Edge{{-5, 1 << 40, 0.1, 3}, {1 << 40, -5, 2.5e-7, 0}, {7, 7, 1, 1}, {42, -5, 3e30, 255}, {-9, -9, 1, 0}}
	cases := []struct {
		name  string
		graph func(t *testing.T) *Graph
	}{
		{"rmat weighted labelled", rmat(true, 5)},
		{"rmat plain", rmat(false, 0)},
		{"id map, isolated vertices", build(sparse, BuildOptions{Name: "sparse", Weighted: true, Labelled: true})},
		{"id map plain", build(sparse, BuildOptions{Name: "sparse-plain"})},
		{"dense, last vertex isolated", build([]Edge{{0, 1, 1, 0}, {1, 2, 1, 0}}, BuildOptions{Name: "d", DenseIDs: true, NumVertices: 6})},
		{"self-loops and multi-edges", build([]Edge{{1, 1, 2, 0}, {1, 2, 3, 1}, {1, 2, 1, 0}, {2, 1, 0.5, 1}},
			BuildOptions{Name: "multi", Weighted: true, Labelled: true, SelfLoops: true, Duplicates: DupKeepAll})},
		{"empty", build(nil, BuildOptions{Name: "empty"})},
	}
	dir := t.TempDir()
	for _, c := range cases {
		g := c.graph(t)
		for _, f := range []ExportFormat{ExportText, ExportParquet} {
			t.Run(c.name+"/"+string(f), func(t *testing.T) {
				base := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+"."+string(f))
				st, err := ExportFile(ctx, g, base, f)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Exact {
					t.Fatalf("export says inexact: %s", st.Inexact)
				}
				out := base + ".wsg"
				var ist *ImportStats
				if f == ExportText {
					ist, err = ImportText(ctx, base, out, st.Import)
				} else {
					ist, err = ImportParquet(ctx, base, out, st.Import)
				}
				if err != nil {
					t.Fatalf("import %v: %v", st.ImportFlags, err)
				}
				back, err := Load(out)
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
// edges: Export says so instead of writing a file that imports differently.
func TestExportReportsInexactRoundTrip(t *testing.T) {
	g, err := FromEdges([]Edge{{1, 1, 1, 0}, {2, 3, 1, 0}, {9, 9, 1, 0}}, BuildOptions{Name: "x", SelfLoops: true, DenseIDs: true, NumVertices: 12})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ExportFile(context.Background(), g, filepath.Join(t.TempDir(), "x.txt"), ExportText)
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
	g, err := FromEdges([]Edge{{-5, 1 << 40, 0.1, 3}, {7, 7, 1, 0}}, BuildOptions{Name: "s", Weighted: true, Labelled: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.txt")
	if _, err := ExportFile(context.Background(), g, path, ExportText); err != nil {
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
