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
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// randomStringEdges returns n edges between string ids that share
// prefixes, differ in length, repeat (duplicates, some at the same time)
// and loop, with the text lines that hold them in the given column order.
func randomStringEdges(rng *rand.Rand, n int) []graph.StringEdge {
	names := []string{"a", "ab", "abc", "b", "user:1", "user:10", "user:100", "user:2", "user:20", "ü", "日本", "x y"[0:1],
		"user:12345678", "user:12345679", "user:123456780", strings.Repeat("z", extsort.MaxStringIDBytes)}
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

// TestImportStringIDsAndTimesErrors checks that bad string ids and times
// stop the import with the line or row that holds them.
func TestImportStringIDsAndTimesErrors(t *testing.T) {
	str := ImportOptions{StringIDs: true}
	timed := ImportOptions{TimeColumn: 3}
	for _, c := range []struct {
		name, text string
		o          ImportOptions
		want       string
	}{
		{"empty id field", "a b\nc\n", str, "line 2: 1 field, want 2 (src dst)"},
		{"empty id field, comma", "a,b\nd,\n", str, "line 2: 1 field, want 2 (src dst)"},
		{"bad utf-8", "a b\nc \xff\xfe\n", str, `line 2: bad target id "\xff\xfe": not valid UTF-8`},
		{"long id", "a " + strings.Repeat("x", extsort.MaxStringIDBytes+1) + "\n", str, "line 1: bad target id"},
		{"string id without the flag", "user:1 user:2\n", ImportOptions{}, `line 1: bad source id "user:1" (not an integer; --id-type string reads string ids)`},
		{"string and dense ids", "a b\n", ImportOptions{StringIDs: true, DenseIDs: true}, "string ids cannot be dense ids"},
		{"duplicate strings", "a b 5\nb c 1\na b 5\n", ImportOptions{StringIDs: true, TimeColumn: 3, Duplicates: graph.DupError}, `duplicate edge "a" -> "b" at time 5`},
		{"non-integer time", "1 2 10\n2 3 1.5\n", timed, `line 2: bad time "1.5" in column 3 (want an integer`},
		{"time column missing", "1 2 10\n2 3\n", timed, "line 2: 2 fields, want 3 (src dst time)"},
		{"time column out of range", "1 2 10\n", ImportOptions{TimeColumn: 4}, "time column 4: want a column from 3 to 3"},
		{"time before the weight", "1 2 x 1.5\n", ImportOptions{TimeColumn: 3, Weighted: true}, `line 1: bad time "x" in column 3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := importString(t, c.text, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// Parquet: the row that holds the bad value.
	type pqBad struct {
		Src  string `parquet:"src"`
		Dst  string `parquet:"dst"`
		Time int64  `parquet:"t"`
	}
	type pqFloatTime struct {
		Src  string  `parquet:"src"`
		Dst  string  `parquet:"dst"`
		Time float64 `parquet:"t"`
	}
	for _, c := range []struct {
		name string
		path string
		o    ImportOptions
		want string
	}{
		{"empty string id", writeParquet(t, []pqBad{{"a", "b", 1}, {"a", "", 2}}), ImportOptions{StringIDs: true}, `row group 0 row 1: bad dst id "": empty`},
		{"string ids not asked for", writeParquet(t, []pqBad{{"a", "b", 1}}), ImportOptions{}, `column "src" has type BYTE_ARRAY, want INT32 or INT64 (or BYTE_ARRAY with --id-type string)`},
		{"no time column", writeParquet(t, []pqBad{{"a", "b", 1}}), ImportOptions{StringIDs: true, TimeColumnName: "time"}, `no column "time" (have src, dst, t)`},
		{"float time column", writeParquet(t, []pqFloatTime{{"a", "b", 1}}), ImportOptions{StringIDs: true, TimeColumnName: "t"}, `column "t" has type DOUBLE, want INT32 or INT64 (times)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ImportParquet(context.Background(), c.path, filepath.Join(t.TempDir(), "g.wsg"), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "edges.parquet") {
				t.Fatalf("got %v, want an error naming the file and %q", err, c.want)
			}
		})
	}
}

// TestImportStringIDsLargeRuns imports enough string edges that every
// parallel path runs: blocks appended on several goroutines, shards
// interned on several, radix-sorted runs (timed too), merge in parts.
func TestImportStringIDsLargeRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	edges := make([]graph.StringEdge, 150000)
	for i := range edges {
		s := rng.IntN(20000)
		if i > 0 && i%3 != 0 {
			s = 0 // a hub, and sources repeated on consecutive lines
		}
		edges[i] = graph.StringEdge{Src: fmt.Sprintf("user:%d", s), Dst: fmt.Sprintf("item/%x", rng.IntN(30000)), Weight: 1, Time: rng.Int64N(100)}
	}
	for _, o := range []ImportOptions{
		{Name: "l", StringIDs: true, Workers: 3, RunEdges: 70000, Duplicates: graph.DupKeepFirst},
		{Name: "l", StringIDs: true, Workers: 2, RunEdges: 100000, TimeColumn: 3, Undirected: true, Duplicates: graph.DupSumWeights, mergeParts: 5},
	} {
		t.Run(fmt.Sprintf("timed=%v", o.TimeColumn > 0), func(t *testing.T) {
			want, err := graph.FromStringEdges(edges, stringBuildOpts(o))
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := importString(t, edgeLines(edges, o), o)
			if err != nil {
				t.Fatal(err)
			}
			sameGraph(t, got, want)
			if st.Runs < 2 {
				t.Fatalf("%d runs, want several", st.Runs)
			}
		})
	}
}

// Inputs without edges: none at all, or only self-loops, whose ids are
// still vertices.
func TestImportStringIDsWithoutEdges(t *testing.T) {
	for _, c := range []struct {
		name, text string
		edges      []graph.StringEdge
	}{
		{"empty", "# nothing\n", nil},
		{"self-loops only", "b b 1\na a 2\nb b 3\n", []graph.StringEdge{{Src: "b", Dst: "b", Time: 1}, {Src: "a", Dst: "a", Time: 2}, {Src: "b", Dst: "b", Time: 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := ImportOptions{Name: "e", StringIDs: true, TimeColumn: 3}
			want, err := graph.FromStringEdges(c.edges, stringBuildOpts(o))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := importString(t, c.text, o)
			if err != nil {
				t.Fatal(err)
			}
			sameGraph(t, got, want)
		})
	}
}
