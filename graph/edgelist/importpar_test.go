package edgelist

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
)

// The parallel decoders must not change what an import builds: these tests
// run them with many small parts and batches and compare with FromEdges and
// with each other.

// pqDictEdge is written dictionary-coded and with optional (but never null)
// columns, the other page layouts the decoder reads.
type pqDictEdge struct {
	Src    int32    `parquet:"src,dict"`
	Dst    *int64   `parquet:"dst,optional"`
	Weight *float32 `parquet:"weight,optional,dict"`
	Label  int64    `parquet:"label,dict"`
}

func randomEdges(rng *rand.Rand, n int) []graph.Edge {
	edges := make([]graph.Edge, n)
	for i := range edges {
		edges[i] = graph.Edge{Src: rng.Int64N(400), Dst: rng.Int64N(400), Weight: float32(rng.IntN(16)+1) / 8, Label: uint8(rng.IntN(6))}
	}
	return edges
}

func TestImportParquetWorkersMatchFromEdges(t *testing.T) {
	edges := randomEdges(rand.New(rand.NewPCG(7, 8)), 20000)
	plain := make([]pqEdge, len(edges))
	dict := make([]pqDictEdge, len(edges))
	for i, e := range edges {
		plain[i] = pqEdge{Src: e.Src, Dst: int32(e.Dst), Weight: float64(e.Weight), Label: int32(e.Label)}
		d, w := e.Dst, e.Weight
		dict[i] = pqDictEdge{Src: int32(e.Src), Dst: &d, Weight: &w, Label: int64(e.Label)}
	}
	files := map[string]string{
		"plain": writeParquet(t, plain, parquet.MaxRowsPerRowGroup(1500), parquet.PageBufferSize(700)),
		"dict":  writeParquet(t, dict, parquet.MaxRowsPerRowGroup(3000), parquet.PageBufferSize(900)),
	}
	for name, path := range files {
		for _, workers := range []int{1, 3, 8} {
			for _, o := range []ImportOptions{
				{Name: "p", Weighted: true, Labelled: true, Duplicates: graph.DupKeepFirst, RunEdges: 3000},
				{Name: "p", Undirected: true, Weighted: true, Duplicates: graph.DupSumWeights, DenseIDs: true},
			} {
				o.Workers, o.batchRows = workers, 333
				t.Run(fmt.Sprintf("%s/workers=%d/undirected=%v", name, workers, o.Undirected), func(t *testing.T) {
					want, err := graph.FromEdges(edges, buildOpts(o))
					if err != nil {
						t.Fatal(err)
					}
					out := filepath.Join(t.TempDir(), "g.wsg")
					if _, err := ImportParquet(context.Background(), path, out, o); err != nil {
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
	}
}

// TestImportTextAndParquetWriteTheSameFile imports the same edges from
// text and from Parquet and wants byte-identical graph files.
func TestImportTextAndParquetWriteTheSameFile(t *testing.T) {
	edges := randomEdges(rand.New(rand.NewPCG(9, 10)), 30000)
	rows := make([]pqEdge, len(edges))
	for i, e := range edges {
		rows[i] = pqEdge{Src: e.Src, Dst: int32(e.Dst), Weight: float64(e.Weight), Label: int32(e.Label)}
	}
	dir := t.TempDir()
	pq := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(4000))
	for i, o := range []ImportOptions{
		{Name: "same", Weighted: true, Labelled: true, Duplicates: graph.DupKeepFirst, RunEdges: 5000, Workers: 3},
		{Name: "same", Weighted: true, Undirected: true, Duplicates: graph.DupSumWeights},
		{Name: "same", Labelled: true, DenseIDs: true, Duplicates: graph.DupKeepAll, SelfLoops: true, Workers: 1},
	} {
		var sb strings.Builder
		for _, e := range edges {
			fmt.Fprintf(&sb, "%d %d", e.Src, e.Dst)
			if o.Weighted {
				fmt.Fprintf(&sb, " %g", e.Weight)
			}
			if o.Labelled {
				fmt.Fprintf(&sb, " %d", e.Label)
			}
			sb.WriteByte('\n')
		}
		txt := filepath.Join(dir, fmt.Sprintf("edges%d.txt", i))
		if err := os.WriteFile(txt, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		a, b := filepath.Join(dir, fmt.Sprintf("t%d.wsg", i)), filepath.Join(dir, fmt.Sprintf("p%d.wsg", i))
		if _, err := ImportText(context.Background(), txt, a, o); err != nil {
			t.Fatal(err)
		}
		if _, err := ImportParquet(context.Background(), pq, b, o); err != nil {
			t.Fatal(err)
		}
		ta, _ := os.ReadFile(a)
		tb, _ := os.ReadFile(b)
		if len(ta) == 0 || !bytes.Equal(ta, tb) {
			t.Fatalf("options %+v: text import wrote %d bytes, Parquet %d, not the same", o, len(ta), len(tb))
		}
	}
}

// TestImportParquetErrorsNameLaterRowGroup puts one bad value deep in the
// file, where a decoder other than the first meets it, and wants the error
// to name its row group and row and nothing before it to be reported.
func TestImportParquetErrorsNameLaterRowGroup(t *testing.T) {
	type optEdge struct {
		Src    int64    `parquet:"src"`
		Dst    int64    `parquet:"dst"`
		Weight *float64 `parquet:"weight,optional"`
		Label  int32    `parquet:"label"`
	}
	const groupRows, badGroup, badRow = 100, 3, 42
	nan, neg, big := math.NaN(), -1.0, 1e300
	for _, c := range []struct {
		name  string
		spoil func(e *optEdge)
		o     ImportOptions
		want  string
	}{
		{"negative dense id", func(e *optEdge) { e.Src = -5 }, ImportOptions{DenseIDs: true}, "src id -5 outside [0, 4294967294) with dense ids"},
		{"dense id too big", func(e *optEdge) { e.Dst = 1 << 40 }, ImportOptions{DenseIDs: true}, "dst id 1099511627776 outside"},
		{"nan weight", func(e *optEdge) { e.Weight = &nan }, ImportOptions{Weighted: true}, "bad weight NaN"},
		{"negative weight", func(e *optEdge) { e.Weight = &neg }, ImportOptions{Weighted: true}, "bad weight -1"},
		{"huge weight", func(e *optEdge) { e.Weight = &big }, ImportOptions{Weighted: true}, "bad weight 1e+300"},
		{"null weight", func(e *optEdge) { e.Weight = nil }, ImportOptions{Weighted: true}, "null weight"},
		{"bad label", func(e *optEdge) { e.Label = -1 }, ImportOptions{Labelled: true}, "bad label -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			one := 1.0
			rows := make([]optEdge, 6*groupRows)
			for i := range rows {
				rows[i] = optEdge{Src: int64(i % 50), Dst: int64(i % 70), Weight: &one, Label: 1}
			}
			c.spoil(&rows[badGroup*groupRows+badRow])
			// A second bad value later on must not be the one reported.
			c.spoil(&rows[5*groupRows+1])
			path := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(groupRows), parquet.PageBufferSize(128))
			// 8 workers for 6 row groups read each row group's columns at
			// once too.
			for _, workers := range []int{4, 8} {
				o := c.o
				o.Workers, o.batchRows = workers, 16
				_, err := ImportParquet(context.Background(), path, filepath.Join(t.TempDir(), "g.wsg"), o)
				want := fmt.Sprintf("edges.parquet: row group %d row %d: %s", badGroup, badRow, c.want)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("%d workers: got %v, want an error containing %q", workers, err, want)
				}
			}
		})
	}
}

// TestImportTextWorkersNameTheLine spreads a text file over many chunks
// and decoders and wants the same graph as FromEdges, and an error deep in
// the file to name its line.
func TestImportTextWorkersNameTheLine(t *testing.T) {
	edges := randomEdges(rand.New(rand.NewPCG(11, 12)), 3*textChunkBytes/12)
	var sb strings.Builder
	sb.WriteString("# header\n")
	for _, e := range edges {
		fmt.Fprintf(&sb, "%d %d %g\n", e.Src, e.Dst, e.Weight)
	}
	text := sb.String()
	if len(text) < 2*textChunkBytes {
		t.Fatalf("only %d bytes of text: not several chunks", len(text))
	}
	o := ImportOptions{Name: "w", Weighted: true, Workers: 4, RunEdges: 100000}
	want, err := graph.FromEdges(edges, buildOpts(o))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := importString(t, text, o)
	if err != nil {
		t.Fatal(err)
	}
	sameGraph(t, got, want)

	bad := len(edges) - 10 // an edge in the last chunk
	lines := strings.SplitAfter(text, "\n")
	lines[bad+1] = "7 8 -3\n"
	_, _, err = importString(t, strings.Join(lines, ""), o)
	if wantErr := fmt.Sprintf(`edges.txt line %d: bad weight "-3"`, bad+2); err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("got %v, want an error containing %q", err, wantErr)
	}
}

// TestImportParquetProgressNamesRowGroups wants read progress to say which
// row group of how many the import has reached.
func TestImportParquetProgressNamesRowGroups(t *testing.T) {
	rows := make([]pqEdge, 5000)
	for i := range rows {
		rows[i] = pqEdge{Src: int64(i), Dst: int32(i % 77)}
	}
	path := writeParquet(t, rows, parquet.MaxRowsPerRowGroup(1000))
	var reports []Progress
	o := ImportOptions{Workers: 3, batchRows: 100, ProgressInterval: 1, Progress: func(p Progress) { reports = append(reports, p) }}
	if _, err := ImportParquet(context.Background(), path, filepath.Join(t.TempDir(), "g.wsg"), o); err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, p := range reports {
		if p.Phase != "read" {
			continue
		}
		if p.RowGroups != 5 || p.RowGroup < last {
			t.Fatalf("read progress %+v after row group %d, want row groups of 5 in order", p, last)
		}
		last = p.RowGroup
	}
	if last != 4 {
		t.Fatalf("read progress ended at row group %d, want 4", last)
	}
}

// appendBlocks must fill a run exactly as the serial loop does: the same
// records at the same positions, the same dropped self-loop ids in the same
// order and the same count.
func TestAppendBlocksMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	e := &edgeBatch{maxID: -1}
	for k := range 50000 {
		s, d := rng.Int64N(300), rng.Int64N(300)
		if k%97 == 0 {
			d = s
		}
		e.src, e.dst = append(e.src, s), append(e.dst, d)
		e.w, e.l = append(e.w, float32(k%13+1)), append(e.l, uint8(k%7))
	}
	for _, o := range []ImportOptions{
		{}, {Undirected: true}, {SelfLoops: true}, {Undirected: true, SelfLoops: true}, {DenseIDs: true, Undirected: true},
	} {
		t.Run(fmt.Sprintf("undirected=%v/selfloops=%v/dense=%v", o.Undirected, o.SelfLoops, o.DenseIDs), func(t *testing.T) {
			o.Workers, o.RunEdges = 5, 1<<20
			one, par := newRunBuilder(context.Background(), "x", t.TempDir(), o), newRunBuilder(context.Background(), "x", t.TempDir(), o)
			defer one.finish()
			defer par.finish()
			// A first short range puts the blocks at an offset in the run.
			for _, r := range [][2]int{{0, 1000}, {1000, 50000}} {
				one.appendSerial(e, r[0], r[1])
				par.appendBlocks(e, r[0], r[1])
			}
			if !slices.Equal(one.cur, par.cur) || !slices.Equal(one.dropped, par.dropped) || one.stats.SelfLoopsDropped != par.stats.SelfLoopsDropped {
				t.Fatalf("blocks: %d records, %d dropped ids, %d loops; serial: %d, %d, %d",
					len(par.cur), len(par.dropped), par.stats.SelfLoopsDropped, len(one.cur), len(one.dropped), one.stats.SelfLoopsDropped)
			}
		})
	}
}

// Row groups are read in row ranges of them, plain and dictionary-coded,
// and give the bytes of a read with fewer cuts.
func TestImportParquetCutsFewRowGroups(t *testing.T) {
	edges := randomEdges(rand.New(rand.NewPCG(9, 10)), 7000)
	plain := make([]pqEdge, len(edges))
	dict := make([]pqDictEdge, len(edges))
	for i, e := range edges {
		plain[i] = pqEdge{Src: e.Src, Dst: int32(e.Dst), Weight: float64(e.Weight), Label: int32(e.Label)}
		d, w := e.Dst, e.Weight
		dict[i] = pqDictEdge{Src: int32(e.Src), Dst: &d, Weight: &w, Label: int64(e.Label)}
	}
	for name, path := range map[string]string{
		"plain": writeParquet(t, plain, parquet.MaxRowsPerRowGroup(4000), parquet.PageBufferSize(700)),
		"dict":  writeParquet(t, dict, parquet.MaxRowsPerRowGroup(4000), parquet.PageBufferSize(900)),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true))
			if err != nil {
				t.Fatal(err)
			}
			o := ImportOptions{Name: "p", Weighted: true, Labelled: true, RunEdges: 3000, batchRows: 100}
			cols, err := parquetColumns(pf.Schema(), o)
			if err != nil {
				t.Fatal(err)
			}
			// Groups of 4000 and 3000 rows: parts of at most 8 batches of
			// 100 rows (5 + 4), or, with batches of 1000, about 2 x 4
			// workers' parts of at least two batches (2 + 1).
			for _, c := range []struct{ batchRows, want int }{{100, 9}, {1000, 3}} {
				if parts := pqParts(pf.RowGroups(), cols, 4, c.batchRows); len(parts) != c.want {
					t.Fatalf("2 row groups, 4 workers, batches of %d: %d parts, want %d", c.batchRows, len(parts), c.want)
				}
			}
			var outs [][]byte
			for _, workers := range []int{1, 4, 7} {
				o.Workers = workers
				out := filepath.Join(t.TempDir(), "g.wsg")
				if _, err := ImportParquet(context.Background(), path, out, o); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if outs = append(outs, b); !bytes.Equal(b, outs[0]) {
					t.Fatalf("%d workers: the file differs from one worker's", workers)
				}
			}
		})
	}
}
