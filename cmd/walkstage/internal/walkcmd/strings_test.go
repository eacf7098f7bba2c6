package walkcmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// stringWalkGraph saves walkTestGraph's shape with string ids, some with
// spaces and a #, and returns its path and the graph.
func stringWalkGraph(t *testing.T) (string, *graph.Graph) {
	t.Helper()
	name := func(v int) string {
		if v%10 == 0 {
			return fmt.Sprintf("team #%d (ops)", v)
		}
		return fmt.Sprintf("user:%d", v)
	}
	var edges []graph.StringEdge
	for v := range 200 {
		for _, d := range []int{1, 7, 31} {
			edges = append(edges, graph.StringEdge{Src: name(v), Dst: name((v + d) % 200), Weight: float32(d)})
		}
	}
	g, err := graph.FromStringEdges(edges, graph.BuildOptions{Name: "strs", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "strs.wsg")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	return path, g
}

// readOutput reads the parts of the batch under dir as rows of T.
func readOutput[T any](t *testing.T, dir, kind, algo string) []T {
	t.Helper()
	ctx := context.Background()
	b, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := output.ReadManifest(ctx, b, "walks/kind="+kind+"/graph=strs/algorithm="+algo+"/batch=b/_SUCCESS")
	if err != nil {
		t.Fatal(err)
	}
	var rows []T
	for _, f := range m.Files {
		data, err := b.ReadAll(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		part, err := parquet.Read[T](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	return rows
}

// walkstage walk on a graph with string ids takes string seeds (a file,
// whose lines are ids exactly, or list:) and writes walks, visits and
// samples in string ids.
func TestWalkCommandStringIDs(t *testing.T) {
	gp, g := stringWalkGraph(t)
	seedFile := filepath.Join(t.TempDir(), "seeds.txt")
	os.WriteFile(seedFile, []byte("# seeds\nteam #10 (ops)\r\n\nuser:7\n"), 0o644)
	edge := func(a, b string) bool {
		u, ok1 := g.DenseIDString(a)
		v, ok2 := g.DenseIDString(b)
		return ok1 && ok2 && g.HasEdge(u, v)
	}
	run := func(args ...string) string {
		t.Helper()
		dir := t.TempDir()
		out, err := runWalk(t, append([]string{"--graph", gp, "--out", "file://" + dir, "--batch-id", "b"}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return dir
	}

	for _, tc := range []struct {
		seeds string
		want  []string
	}{
		{seedFile, []string{"team #10 (ops)", "user:7"}},
		{"list:user:3,team #20 (ops)", []string{"user:3", "team #20 (ops)"}},
	} {
		dir := run("--algorithm", "node2vec", "--p", "2", "--q", "0.5", "--length", "20", "--walks-per-seed", "3", "--seeds", tc.seeds)
		walks := readOutput[sink.StringRow](t, dir, "walks", "node2vec")
		if len(walks) != 3*len(tc.want) {
			t.Fatalf("--seeds %s: %d walks", tc.seeds, len(walks))
		}
		for k, w := range walks {
			if w.Start != tc.want[k/3] || w.Walk[0] != tc.want[k/3] || len(w.Walk) != 21 {
				t.Fatalf("--seeds %s: walk %d %+v", tc.seeds, k, w)
			}
			for i := 1; i < len(w.Walk); i++ {
				if !edge(w.Walk[i-1], w.Walk[i]) {
					t.Fatalf("walk %d: %q -> %q is not an edge", k, w.Walk[i-1], w.Walk[i])
				}
			}
		}
	}

	dir := run("--output", "visits", "--algorithm", "ppr", "--top-k", "5", "--steps-per-query", "500", "--seeds", seedFile)
	vrows := readOutput[sink.StringVisitRow](t, dir, "visits", "ppr")
	if len(vrows) != 2 || vrows[0].QueryID != "team #10 (ops)" || vrows[1].QueryID != "user:7" || len(vrows[0].Candidates) == 0 {
		t.Fatalf("visits %+v", vrows)
	}
	for _, r := range vrows {
		for _, c := range r.Candidates {
			if _, ok := g.DenseIDString(c.Vertex); !ok {
				t.Fatalf("candidate %q is not a vertex", c.Vertex)
			}
		}
	}

	dir = run("--algorithm", "neighbor", "--fanouts", "3,2", "--seeds", "all")
	srows := readOutput[sink.StringSampleRow](t, dir, "samples", "neighbor")
	if len(srows) == 0 {
		t.Fatal("no sampled edges")
	}
	for _, r := range srows {
		if r.Seed != g.ExternalString(uint32(r.InstanceID)) || !edge(r.Src, r.Dst) {
			t.Fatalf("sampled edge %+v", r)
		}
	}
}

func TestWalkCommandRejectsStringSeeds(t *testing.T) {
	gp, _ := stringWalkGraph(t)
	out := "file://" + t.TempDir()
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.txt")
	os.WriteFile(unknown, []byte("user:1\nuser:1 \n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "5-9"}, "a range needs integer ids, graph strs has string ids"},
		{[]string{"--seeds", unknown}, `line 2: vertex "user:1 " is not in graph strs`},
		{[]string{"--seeds", "list:user:1,,user:2"}, `id 2: "" is not a string id (1 to 1024 bytes)`},
		{[]string{"--seeds", "list:" + strings.Repeat("x", 1025)}, "is not a string id (1 to 1024 bytes)"},
		{[]string{"--seeds", "list:nobody"}, `vertex "nobody" is not in graph strs`},
	} {
		_, err := runWalk(t, append([]string{"--graph", gp, "--out", out}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	// Integer graphs take list: too, as decimal ids.
	ip := walkTestGraph(t)
	if _, err := runWalk(t, "--graph", ip, "--out", out, "--seeds", "list:10,1990"); err != nil {
		t.Fatal(err)
	}
	if _, err := runWalk(t, "--graph", ip, "--out", out, "--seeds", "list:10,user"); err == nil || !strings.Contains(err.Error(), `"user" is not a vertex id`) {
		t.Fatalf("list:10,user: %v", err)
	}
}
