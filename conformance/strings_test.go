package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// stringTestGraph is an R-MAT graph whose vertices are named by strings:
// ASCII, non-ASCII, with quotes and commas, some of the longest a graph
// takes (1024 bytes).
func stringTestGraph(t *testing.T) *graph.Graph {
	t.Helper()
	r, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 5, Undirected: true, Name: "strings"})
	if err != nil {
		t.Fatal(err)
	}
	name := func(v uint32) string {
		switch v % 9 {
		case 0:
			return fmt.Sprintf("ユーザー:%d", v)
		case 1:
			return fmt.Sprintf(`o'brien, "%d"`, v)
		case 2:
			if v%45 == 2 {
				return fmt.Sprintf("%d:%s", v, bytes.Repeat([]byte("L"), 1000))
			}
		}
		return "user:" + strconv.Itoa(int(v))
	}
	var edges []graph.StringEdge
	for u := range uint32(r.NumVertices()) {
		for _, v := range r.Neighbors(u) {
			edges = append(edges, graph.StringEdge{Src: name(u), Dst: name(v)})
		}
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "strings"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stringReads is what strings.mjs answers for one check.
type stringReads struct {
	Name   string `json:"name"`
	DuckDB struct {
		OK    bool       `json:"ok"`
		Error string     `json:"error"`
		Type  string     `json:"type"`
		Rows  [][]string `json:"rows"`
	} `json:"duckdb"`
	Hyparquet struct {
		OK    bool       `json:"ok"`
		Error string     `json:"error"`
		Rows  [][]string `json:"rows"`
	} `json:"hyparquet"`
}

// sortedRows orders rows (as JSON), so that rows read in any order compare.
func sortedRows(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		b, _ := json.Marshal(r)
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}

// Output of a graph with string ids, every kind and compression, is read
// by DuckDB and hyparquet as the engine's walks, visits and samples in the
// graph's string ids, in STRING columns (DuckDB: VARCHAR), every walk a
// path of the graph's edges.
func TestReadersReadStringIDs(t *testing.T) {
	node := nodeReaders(t)
	g := stringTestGraph(t)
	in := newInputs(t, g)
	// Samples of a graph with string ids take dense seeds (sink.WriteSamples).
	for i := range in.seeds {
		in.seeds[i] = int64(i / in.sp.InstancesPerSeed)
	}
	want := map[string][][]string{}
	for _, c := range in.chunks {
		for k := range c.Len() {
			row := []string{strconv.FormatUint(c.WalkIDs[k], 10), g.ExternalString(c.Walk(k)[0])}
			for _, v := range c.Walk(k) {
				row = append(row, g.ExternalString(v))
			}
			want[output.KindWalks] = append(want[output.KindWalks], row)
		}
	}
	for q, r := range in.visits {
		row := []string{in.qids[q]}
		for _, c := range r.Candidates {
			row = append(row, g.ExternalString(c.Vertex))
		}
		want[output.KindVisits] = append(want[output.KindVisits], row)
	}
	for i, es := range in.samples {
		for _, e := range es {
			want[output.KindSamples] = append(want[output.KindSamples], []string{strconv.Itoa(i), strconv.Itoa(int(e.Hop)),
				g.ExternalString(uint32(in.seeds[i])), g.ExternalString(e.Src), g.ExternalString(e.Dst)})
		}
	}
	wantType := map[string]string{output.KindWalks: "VARCHAR[]", output.KindVisits: "VARCHAR[]", output.KindSamples: "VARCHAR"}

	ctx := context.Background()
	root := t.TempDir()
	bucket, err := store.OpenBucket(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	type check struct {
		Name  string   `json:"name"`
		Kind  string   `json:"kind"`
		Glob  string   `json:"glob"`
		Files []string `json:"files"`
	}
	var checks []check
	for _, c := range []sink.Compression{"", sink.Zstd, sink.Snappy, sink.None} {
		prefix, opts := "default", []sink.Option(nil)
		if c != "" {
			prefix, opts = string(c), []sink.Option{sink.WithCompression(c), sink.WithRowGroupRows(256), sink.WithFileBytes(24 << 10)}
		}
		for _, kind := range []string{output.KindWalks, output.KindVisits, output.KindSamples} {
			m := in.write(t, bucket, prefix, kind, false, opts)
			ch := check{Name: prefix + "/" + kind, Kind: kind, Glob: filepath.ToSlash(root) + "/" + prefix + "/kind=" + kind + "/**/*.parquet"}
			for _, f := range m.Files {
				ch.Files = append(ch.Files, filepath.Join(root, filepath.FromSlash(f.Key)))
			}
			checks = append(checks, ch)
		}
	}
	spec, _ := json.Marshal(map[string]any{"checks": checks})
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, "strings.mjs", specPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node strings.mjs: %v\n%s", err, stderr.String())
	}
	var res []stringReads
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res) != len(checks) {
		t.Fatalf("strings.mjs output (%d of %d checks): %v", len(res), len(checks), err)
	}
	for i, r := range res {
		kind := checks[i].Kind
		w := sortedRows(want[kind])
		if !r.DuckDB.OK || r.DuckDB.Type != wantType[kind] || !slices.Equal(sortedRows(r.DuckDB.Rows), w) {
			t.Errorf("%s: DuckDB read %d rows of %s (%s), want %d of %s", r.Name, len(r.DuckDB.Rows), r.DuckDB.Type, r.DuckDB.Error, len(w), wantType[kind])
		}
		if !r.Hyparquet.OK || !slices.Equal(sortedRows(r.Hyparquet.Rows), w) {
			t.Errorf("%s: hyparquet read %d rows (%s), want %d", r.Name, len(r.Hyparquet.Rows), r.Hyparquet.Error, len(w))
		}
		if kind == output.KindWalks {
			for _, row := range r.DuckDB.Rows {
				for j := 3; j < len(row); j++ {
					u, ok1 := g.DenseIDString(row[j-1])
					v, ok2 := g.DenseIDString(row[j])
					if !ok1 || !ok2 || !g.HasEdge(u, v) {
						t.Fatalf("%s: walk %s: %q -> %q is not an edge", r.Name, row[0], row[j-1], row[j])
					}
				}
			}
		}
	}
}
