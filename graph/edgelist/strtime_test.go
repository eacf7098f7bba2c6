package edgelist

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
)

// randomStringEdges returns n edges between string ids that share
// prefixes, differ in length, repeat (duplicates, some at the same time)
// and loop, with the text lines that hold them in the given column order.
func randomStringEdges(rng *rand.Rand, n int) []graph.StringEdge {
	names := []string{"a", "ab", "abc", "b", "user:1", "user:10", "user:100", "user:2", "user:20", "ü", "日本", "x y"[0:1],
		"user:12345678", "user:12345679", "user:123456780", strings.Repeat("z", maxStringIDBytes)}
	for i := 0; i < 40; i++ {
		names = append(names, fmt.Sprintf("user:%d", rng.IntN(1000000)))
	}
	edges := make([]graph.StringEdge, n)
	for i := range edges {
		edges[i] = graph.StringEdge{Src: names[rng.IntN(len(names))], Dst: names[rng.IntN(len(names))],
			Weight: float32(rng.IntN(8)+1) / 4, Label: uint8(rng.IntN(4)), Time: rng.Int64N(5) * 1000}
		if i%5 == 0 {
			edges[i].Time = -rng.Int64() // negative and far-apart times
		}
	}
	return edges
}

// edgeLines writes edges as text lines: src dst, then the weight and label
// when o reads them, with the time at o.TimeColumn.
func edgeLines(edges []graph.StringEdge, o ImportOptions) string {
	var sb strings.Builder
	for _, e := range edges {
		cols := []string{e.Src, e.Dst}
		if o.Weighted {
			cols = append(cols, fmt.Sprint(e.Weight))
		}
		if o.Labelled {
			cols = append(cols, fmt.Sprint(e.Label))
		}
		if o.TimeColumn > 0 {
			cols = append(cols[:o.TimeColumn-1], append([]string{fmt.Sprint(e.Time)}, cols[o.TimeColumn-1:]...)...)
		}
		sb.WriteString(strings.Join(cols, "\t") + "\n")
	}
	return sb.String()
}

func stringBuildOpts(o ImportOptions) graph.BuildOptions {
	b := buildOpts(o)
	b.Timed = o.TimeColumn > 0 || o.TimeColumnName != ""
	return b
}

// TestImportStringIDsAndTimesMatchFromEdges imports string and timed edge
// lists through every path of the external sort (one run, many spilled
// runs merged in rounds, one worker or several) and compares them with
// graph.FromStringEdges / FromEdges on the same edges.
func TestImportStringIDsAndTimesMatchFromEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	edges := randomStringEdges(rng, 600)
	intEdges := make([]graph.Edge, len(edges))
	for i, e := range edges {
		intEdges[i] = graph.Edge{Src: int64(len(e.Src)*7 + int(e.Src[len(e.Src)-1])), Dst: int64(len(e.Dst)*7 + int(e.Dst[len(e.Dst)-1])),
			Weight: e.Weight, Label: e.Label, Time: e.Time}
	}
	type tc struct {
		name    string
		strings bool
		o       ImportOptions
	}
	var cases []tc
	for _, runEdges := range []int{5, 97, 0} {
		for _, workers := range []int{1, 3} {
			for _, dup := range []graph.DuplicatePolicy{graph.DupKeepFirst, graph.DupSumWeights, graph.DupKeepAll} {
				base := ImportOptions{Name: "s", Duplicates: dup, RunEdges: runEdges, Workers: workers, mergeFan: 4}
				o := base
				o.Weighted, o.Labelled, o.StringIDs = true, true, true
				cases = append(cases, tc{fmt.Sprintf("strings/run=%d/w=%d/%v", runEdges, workers, dup), true, o})
				o = base
				o.StringIDs, o.Undirected, o.TimeColumn, o.Weighted = true, true, 3, true
				cases = append(cases, tc{fmt.Sprintf("strings+times/undirected/run=%d/w=%d/%v", runEdges, workers, dup), true, o})
				o = base
				o.Weighted, o.Labelled, o.TimeColumn = true, true, 5
				cases = append(cases, tc{fmt.Sprintf("times/run=%d/w=%d/%v", runEdges, workers, dup), false, o})
				o = base
				o.SelfLoops, o.TimeColumn, o.Labelled = true, 4, true
				cases = append(cases, tc{fmt.Sprintf("times+loops/run=%d/w=%d/%v", runEdges, workers, dup), false, o})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want *graph.Graph
			var err error
			var text string
			if c.strings {
				want, err = graph.FromStringEdges(edges, stringBuildOpts(c.o))
				text = edgeLines(edges, c.o)
			} else {
				want, err = graph.FromEdges(intEdges, stringBuildOpts(c.o))
				se := make([]graph.StringEdge, len(intEdges))
				for i, e := range intEdges {
					se[i] = graph.StringEdge{Src: fmt.Sprint(e.Src), Dst: fmt.Sprint(e.Dst), Weight: e.Weight, Label: e.Label, Time: e.Time}
				}
				text = edgeLines(se, c.o)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := importString(t, text, c.o)
			if err != nil {
				t.Fatal(err)
			}
			sameGraph(t, got, want)
			if st.Vertices != want.NumVertices() || st.Edges != want.NumEdges() || st.Version != want.Version {
				t.Fatalf("stats %+v disagree with the graph", st)
			}
			if c.o.RunEdges == 5 && st.Runs <= 16 {
				t.Fatalf("only %d runs: the multi-round merge was not exercised", st.Runs)
			}
		})
	}
}

type pqStringEdge struct {
	Src    string  `parquet:"src"`
	Dst    string  `parquet:"dst,dict"`
	Weight float32 `parquet:"weight"`
	When   int64   `parquet:"when"`
}

// TestImportParquetStringIDsAndTimes reads string id columns (plain and
// dictionary-coded) and a named time column, over several row groups and
// pages, read by one worker and several, and compares with
// graph.FromStringEdges.
func TestImportParquetStringIDsAndTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	edges := randomStringEdges(rng, 3000)
	rows := make([]pqStringEdge, len(edges))
	for i, e := range edges {
		rows[i] = pqStringEdge{Src: e.Src, Dst: e.Dst, Weight: e.Weight, When: e.Time}
	}
	path := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(777), parquet.PageBufferSize(2048))
	for _, c := range []struct {
		name string
		o    ImportOptions
	}{
		{"strings", ImportOptions{Name: "p", StringIDs: true, Weighted: true, Duplicates: graph.DupSumWeights, RunEdges: 500}},
		{"strings+times", ImportOptions{Name: "p", StringIDs: true, TimeColumnName: "when", Duplicates: graph.DupKeepFirst, Workers: 1}},
		{"strings+times/undirected", ImportOptions{Name: "p", StringIDs: true, TimeColumnName: "when", Undirected: true, Weighted: true,
			Duplicates: graph.DupKeepAll, RunEdges: 333, Workers: 4, batchRows: 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := graph.FromStringEdges(edges, stringBuildOpts(c.o))
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "g.wsg")
			if _, err := ImportParquet(context.Background(), path, out, c.o); err != nil {
				t.Fatal(err)
			}
			got, err := graph.LoadWith(out, graph.LoadOptions{VerifyChecksum: true})
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			sameGraph(t, got, want)
		})
	}
}
