package walkcmd

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
)

// `walk --algorithm neighbor` writes the rows the stage writes for the
// sampling request that lists the same seeds with rng_seed = --seed.
func TestWalkCommandWritesSamples(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	out, err := runWalk(t, "--graph", gp, "--algorithm", "neighbor", "--fanouts", "2,2", "--weighted", "--edge-weight",
		"--walks-per-seed", "3", "--seeds", "100-400", "--rng-seed", "9", "--batch-id", "nbr", "--out", "file://"+dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "wrote 93 instances") {
		t.Errorf("output: %s", out)
	}
	g, err := graph.Load(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, "walks/kind=samples/graph=tiny/algorithm=neighbor/batch=nbr/_SUCCESS")))
	if err != nil || m.Output != sink.OutputSamples || m.Instances != 93 {
		t.Fatalf("manifest %v %+v", err, m)
	}
	got := readPartRows[sink.WeightedSampleRow](t, dir, m)
	r, edges := stageSamples(t, g, `{"version":1,"batch_id":"nbr","algorithm":"neighbor","fanouts":[2,2],"weighted":true,"edge_weight":true,`+
		`"instances_per_seed":3,"rng_seed":9,"seed_range":{"first":100,"count":301}}`)
	var want []sink.WeightedSampleRow
	for i, es := range edges {
		for _, e := range es {
			want = append(want, sink.WeightedSampleRow{InstanceID: int64(i), Seed: r.Seeds[i/3], Hop: e.Hop,
				Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst), EdgeWeight: g.Weights[e.Edge]})
		}
	}
	if len(want) != 93*6 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rows differ from graphsample.Sample's %d", len(got), len(want))
	}
	for _, bad := range [][]string{
		{"--algorithm", "neighbor", "--length", "5"},
		{"--algorithm", "layer", "--fanouts", "5"},
		{"--algorithm", "deepwalk", "--depth", "2"},
		{"--algorithm", "frontier", "--frontier-size", "2", "--samples", "5", "--seeds", "100-120"},
	} {
		args := append([]string{"--graph", gp, "--out", "file://" + dir, "--seeds", "100-130"}, bad...)
		if _, err := runWalk(t, args...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// --engine picks where the samplers run: without a GPU, auto samples on
// the CPU with the same bytes as --engine cpu and says so in the
// manifest, and gpu is an error rather than a silent CPU run; a sampler
// without device kernels does not open a GPU engine under auto.
func TestWalkCommandSamplesEngine(t *testing.T) {
	if gpu.Available() == nil {
		t.Skip("a GPU is present: gpu/sample_cuda_test.go compares the engines")
	}
	gp := walkTestGraph(t)
	for _, args := range [][]string{
		{"--algorithm", "neighbor", "--fanouts", "3,2", "--weighted"},
		{"--algorithm", "layer", "--layer-sizes", "4,6"},
	} {
		var digests []string
		for _, engine := range []string{"cpu", "auto"} {
			dir := t.TempDir()
			out, err := runWalk(t, append([]string{"--graph", gp, "--seeds", "100-400", "--batch-id", "b", "--out", "file://" + dir,
				"--engine", engine}, args...)...)
			if err != nil {
				t.Fatalf("%v %s: %v\n%s", args, engine, err, out)
			}
			if !strings.Contains(out, "with the cpu engine") {
				t.Errorf("%v %s: %s", args, engine, out)
			}
			m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, "walks/kind=samples/graph=tiny/algorithm="+args[1]+"/batch=b/_SUCCESS")))
			if err != nil || m.Engine != "cpu" {
				t.Fatalf("%v %s: manifest %v %+v", args, engine, err, m)
			}
			digests = append(digests, dirDigest(t, dir))
		}
		if digests[0] != digests[1] {
			t.Errorf("%v: --engine cpu and auto wrote different bytes", args)
		}
		out, err := runWalk(t, append([]string{"--graph", gp, "--seeds", "100-400", "--out", "file://" + t.TempDir(),
			"--engine", "gpu"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "gpu engine") {
			t.Errorf("%v --engine gpu without a GPU: %v\n%s", args, err, out)
		}
	}
	// A sampler without device kernels does not look for a GPU under auto.
	out, err := runWalk(t, "--graph", gp, "--seeds", "100-400", "--out", "file://"+t.TempDir(), "--engine", "auto",
		"--algorithm", "neighbor", "--fanouts", "3,2", "--replace")
	if err != nil || strings.Contains(out, "GPU engine unavailable") || !strings.Contains(out, "with the cpu engine") {
		t.Errorf("neighbor --replace under auto: %v\n%s", err, out)
	}
}

// Forest fire's waves are sized by max_vertices at first (838 instances at
// 10,000), so 930 instances take two waves, written while the next one
// samples: the rows are still graphsample.Sample's, in order; and as many
// more waves as --sample-wave-edges 20,000 makes (two instances at first)
// write the same rows.
func TestWalkCommandWritesSamplesInWaves(t *testing.T) {
	for name, waves := range map[string][]string{"default": nil, "small": {"--sample-wave-edges", "20000"}} {
		t.Run(name, func(t *testing.T) { testWalkCommandWritesSamplesInWaves(t, waves) })
	}
	if _, err := runWalk(t, "--graph", walkTestGraph(t), "--algorithm", "forest_fire", "--burn-probability", "0.5", "--depth", "2",
		"--seeds", "100-400", "--out", "file://"+t.TempDir(), "--sample-wave-edges", "0"); err == nil || !strings.Contains(err.Error(), "--sample-wave-edges 0") {
		t.Errorf("--sample-wave-edges 0: %v", err)
	}
}

func testWalkCommandWritesSamplesInWaves(t *testing.T, waves []string) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	out, err := runWalk(t, append([]string{"--graph", gp, "--algorithm", "forest_fire", "--burn-probability", "0.5", "--depth", "2",
		"--max-vertices", "10000", "--walks-per-seed", "30", "--seeds", "100-400", "--rng-seed", "4", "--batch-id", "ff",
		"--engine", "cpu", "--out", "file://" + dir}, waves...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "wrote 930 instances") {
		t.Fatalf("output: %s", out)
	}
	g, err := graph.Load(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, "walks/kind=samples/graph=tiny/algorithm=forest_fire/batch=ff/_SUCCESS")))
	if err != nil {
		t.Fatal(err)
	}
	got := readPartRows[sink.SampleRow](t, dir, m)
	r, edges := stageSamples(t, g, `{"version":1,"batch_id":"ff","algorithm":"forest_fire","burn_probability":0.5,"depth":2,"max_vertices":10000,`+
		`"instances_per_seed":30,"rng_seed":4,"seed_range":{"first":100,"count":301}}`)
	var want []sink.SampleRow
	for i, es := range edges {
		for _, e := range es {
			want = append(want, sink.SampleRow{InstanceID: int64(i), Seed: r.Seeds[i/30], Hop: e.Hop,
				Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst)})
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rows differ from graphsample.Sample's %d", len(got), len(want))
	}
}

// readPartRows reads the rows of every part m lists, in order.
func readPartRows[T any](t *testing.T, dir string, m *output.Manifest) []T {
	t.Helper()
	var got []T
	for _, f := range m.Files {
		data := mustRead(t, filepath.Join(dir, f.Key))
		rows, err := parquet.Read[T](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows...)
	}
	return got
}

// stageSamples decodes a sampling request as the stage does (unknown
// seeds skipped) and samples it with graphsample.Sample.
func stageSamples(t *testing.T, g *graph.Graph, body string) (*message.Request, [][]graphsample.SampledEdge) {
	t.Helper()
	lim := message.DefaultLimits()
	lim.SkipUnknown = true
	r, err := message.DecodeRequest(nil, []byte(body), g, lim)
	if err != nil {
		t.Fatal(err)
	}
	edges, _, err := graphsample.Sample(context.Background(), g, r.Sample.Params, r.Starts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r, edges
}
