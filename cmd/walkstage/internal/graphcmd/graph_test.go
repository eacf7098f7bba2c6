package graphcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
)

// graph info tells what the CPU engine's tables will add, so a deployment
// can be sized before it starts.
func TestGraphInfoSizesTables(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		gen  []string
		want []string
		not  []string
	}{
		{"weighted, labelled", []string{"--weighted", "--labels", "3"},
			[]string{"cpu alias:", "fused (when within WALKSTAGE_CPU_FUSED_TABLE_BYTES", "packed", "cpu node2vec:", "cpu metapath:"}, nil},
		{"plain", nil, []string{"cpu node2vec:"}, []string{"cpu alias:", "cpu metapath:"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".wsg")
			args := append([]string{"graph", "generate", "--scale", "8", "--edge-factor", "4", "--seed", strconv.Itoa(i + 1), "--out", path}, c.gen...)
			var out, errOut bytes.Buffer
			if rc := walkstage(context.Background(), args, &out, &errOut); rc != 0 {
				t.Fatalf("graph generate: rc %d: %s", rc, errOut.String())
			}
			out.Reset()
			if rc := walkstage(context.Background(), []string{"graph", "info", path}, &out, &errOut); rc != 0 {
				t.Fatalf("graph info: rc %d: %s", rc, errOut.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("graph info lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range c.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("graph info shows %q for a graph without its table:\n%s", w, out.String())
				}
			}
		})
	}
}

// graph export | graph import gives back the graph's version, with the
// import flags that export prints, for both formats.
func TestGraphExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		gen  []string
	}{{"weighted-labelled", []string{"--weighted", "--labels", "4", "--undirected"}}, {"plain", nil}} {
		g := filepath.Join(dir, c.name+".wsg")
		var out, errOut bytes.Buffer
		args := append([]string{"graph", "generate", "--scale", "7", "--edge-factor", "4", "--out", g}, c.gen...)
		if rc := walkstage(context.Background(), args, &out, &errOut); rc != 0 {
			t.Fatalf("generate: %s", errOut.String())
		}
		version := func(path string) string {
			var o, e bytes.Buffer
			if rc := walkstage(context.Background(), []string{"graph", "info", path}, &o, &e); rc != 0 {
				t.Fatalf("info %s: %s", path, e.String())
			}
			for _, line := range strings.Split(o.String(), "\n") {
				if v, ok := strings.CutPrefix(line, "version:"); ok {
					return strings.TrimSpace(v)
				}
			}
			t.Fatalf("no version in %s", o.String())
			return ""
		}
		want := version(g)
		for _, ext := range []string{"txt", "parquet"} {
			t.Run(c.name+"/"+ext, func(t *testing.T) {
				edges := filepath.Join(dir, c.name+"."+ext)
				var o, e bytes.Buffer
				if rc := walkstage(context.Background(), []string{"graph", "export", g, "--out", edges}, &o, &e); rc != 0 {
					t.Fatalf("export: %s", e.String())
				}
				// "rebuild with: walkstage graph import --format F FLAGS --name N IN --out OUT"
				_, cmd, ok := strings.Cut(o.String(), "rebuild with: walkstage ")
				if !ok || e.Len() > 0 {
					t.Fatalf("export output %q, stderr %q", o.String(), e.String())
				}
				fields := strings.Fields(cmd)
				back := filepath.Join(dir, c.name+"-"+ext+"-back.wsg")
				fields[len(fields)-1] = back
				for i, f := range fields {
					fields[i] = strings.Trim(f, `"`)
				}
				e.Reset()
				if rc := walkstage(context.Background(), append(fields, "--quiet"), &o, &e); rc != 0 {
					t.Fatalf("%v: %s", fields, e.String())
				}
				if got := version(back); got != want {
					t.Fatalf("version %s after export and import, want %s", got, want)
				}
			})
		}
	}
}

// TestGraphInfoPlacement: with --gpu-memory below what the graph needs on
// the device, graph info prints the placement plan the GPU engine would
// make; above it, that the graph fits; far below, which parts do not fit.
func TestGraphInfoPlacement(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.wsg")
	var out, errOut bytes.Buffer
	if rc := walkstage(context.Background(), []string{"graph", "generate", "--scale", "10", "--edge-factor", "8", "--weighted", "--labels", "3", "--out", path}, &out, &errOut); rc != 0 {
		t.Fatalf("graph generate: rc %d: %s", rc, errOut.String())
	}
	for _, c := range []struct {
		mem  string
		want []string
	}{
		{"1000000000", []string{"gpu placement:", "the whole graph fits"}},
		{"120000", []string{"gpu placement:", "% of", "edges on the device", "alias.table.host", "on the host"}},
		{"1000", []string{"gpu placement:", "graph.offsets", "graph.place"}},
	} {
		out.Reset()
		if rc := walkstage(context.Background(), []string{"graph", "info", "--gpu-memory", c.mem, path}, &out, &errOut); rc != 0 {
			t.Fatalf("graph info: rc %d: %s", rc, errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--gpu-memory %s: graph info lacks %q:\n%s", c.mem, w, out.String())
			}
		}
	}
}

// A Parquet import's progress line says which row group it has reached.
func TestPrintProgressNamesRowGroup(t *testing.T) {
	var buf bytes.Buffer
	printProgress(&buf, edgelist.Progress{Phase: "read", EdgesRead: 3e6, BytesRead: 1 << 20, TotalBytes: 4 << 20, RowGroup: 2, RowGroups: 30}, 3*time.Second)
	if got := buf.String(); !strings.Contains(got, "read 3.0M edges, 1.0 MiB of 4.0 MiB (25%), row group 3 of 30,") {
		t.Fatalf("progress line %q does not name the row group", got)
	}
}

// graph info --json prints one JSON line with the graph's figures.
func TestGraphInfoJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.wsg")
	var out, errOut bytes.Buffer
	if rc := walkstage(context.Background(), []string{"graph", "generate", "--scale", "8", "--weighted", "--out", path, "--quiet"}, &out, &errOut); rc != 0 {
		t.Fatalf("generate: rc %d: %s", rc, errOut.String())
	}
	out.Reset()
	if rc := walkstage(context.Background(), []string{"graph", "info", "--json", path}, &out, &errOut); rc != 0 {
		t.Fatalf("info: rc %d: %s", rc, errOut.String())
	}
	g, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var info graphInfoResult
	if err := json.Unmarshal(out.Bytes(), &info); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("not one JSON line: %q (%v)", out.String(), err)
	}
	if info.Vertices != g.NumVertices() || info.Edges != g.NumEdges() || !info.Weighted || info.Version != g.Version {
		t.Errorf("info %+v does not describe the graph (V=%d E=%d version %s)", info, g.NumVertices(), g.NumEdges(), g.Version)
	}
}

// graph import --id-type string --time-column N keeps string ids and
// times; graph info shows them; graph export and the import command it
// prints give back the same version, in both formats.
func TestGraphImportStringIDsAndTimes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "edges.txt")
	text := "# who follows whom, when\nuser:10 user:2 1700000000005\nuser:2 user:10 1700000000100\nuser:2 user:10 1700000000005\n日本 user:2 1700000000050\nuser:9 user:9 0\n"
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(dir, "g.wsg")
	run := func(args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		if rc := walkstage(context.Background(), args, &o, &e); rc != 0 {
			t.Fatalf("%v: rc %d: %s", args, rc, e.String())
		}
		return o.String()
	}
	run("graph", "import", "--id-type", "string", "--time-column", "3", in, "--out", g, "--quiet")
	info := run("graph", "info", g)
	for _, w := range []string{"string ids (4 entries", "times 1700000000005 .. 1700000000100", "edges:         4 ", `(external id "user:2")`} {
		if !strings.Contains(info, w) {
			t.Errorf("graph info lacks %q:\n%s", w, info)
		}
	}
	var js graphInfoResult
	if err := json.Unmarshal([]byte(run("graph", "info", "--json", g)), &js); err != nil {
		t.Fatal(err)
	}
	if js.IDType != "string" || !js.Timed || js.TimeMin != "1700000000005" || js.TimeMax != "1700000000100" || !js.ExternalIDs {
		t.Errorf("graph info --json %+v: want string ids and the time range", js)
	}
	want := js.Version
	for _, ext := range []string{"txt", "parquet"} {
		edges := filepath.Join(dir, "export."+ext)
		_, cmd, ok := strings.Cut(run("graph", "export", g, "--out", edges), "rebuild with: walkstage ")
		if !ok {
			t.Fatalf("export prints no rebuild command")
		}
		fields := strings.Fields(cmd)
		back := filepath.Join(dir, "back-"+ext+".wsg")
		fields[len(fields)-1] = back
		for i, f := range fields {
			fields[i] = strings.Trim(f, `"`)
		}
		run(append(fields, "--quiet")...)
		if err := json.Unmarshal([]byte(run("graph", "info", "--json", back)), &js); err != nil {
			t.Fatal(err)
		}
		if js.Version != want {
			t.Errorf("%s: version %s after %v, want %s", ext, js.Version, fields, want)
		}
	}
	// A time column that is not there is a usage error naming the flag.
	var o, e bytes.Buffer
	if rc := walkstage(context.Background(), []string{"graph", "import", "--time-column", "x", in, "--out", g}, &o, &e); rc != 2 || !strings.Contains(e.String(), "--time-column") {
		t.Errorf("--time-column x: rc %d, stderr %s", rc, e.String())
	}
}
