package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink/output"
)

func weightedTestGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var edges []graph.Edge
	for v := range int64(300) {
		for range 2 + r.IntN(8) {
			edges = append(edges, graph.Edge{Src: v*10 + 1, Dst: int64(r.IntN(300))*10 + 1, Weight: float32(1 + r.IntN(9))})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "weighted", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var sampleParams = graphsample.SampleParams{Kind: graphsample.NeighborSampling, Seed: 5, InstancesPerSeed: 2, Fanouts: []int{5, 3}, EdgeBias: graphsample.Bias{Kind: graphsample.BiasEdgeWeight}}

func runSample(t testing.TB, g *graph.Graph, p graphsample.SampleParams, n int) ([]int64, [][]graphsample.SampledEdge) {
	t.Helper()
	starts := make([]uint32, n)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	edges, _, err := graphsample.Sample(context.Background(), g, p, starts, 0)
	if err != nil {
		t.Fatal(err)
	}
	seeds := make([]int64, len(edges))
	for i := range seeds {
		seeds[i] = g.ExternalID(starts[i/p.InstancesPerSeed])
	}
	return seeds, edges
}

// denseTestGraph is weightedTestGraph's shape with ids that are the dense
// ids, unweighted.
func denseTestGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	var edges []graph.Edge
	for v := range int64(3000) {
		for range 2 + r.IntN(8) {
			edges = append(edges, graph.Edge{Src: v, Dst: int64(r.IntN(3000))})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "dense", DenseIDs: true, NumVertices: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if g.IDs != nil {
		t.Fatal("dense ids mapped")
	}
	return g
}

func sampleMeta(id string, p graphsample.SampleParams, instances int, weight bool) BatchMeta {
	return BatchMeta{BatchID: id, Seed: p.Seed, Engine: "cpu", WalkstageVersion: "test", Sample: &p, Instances: int64(instances),
		SampleEdgeWeight: weight, Fingerprint: "fp-" + id}
}

func writeSamples(t testing.TB, b *blob.Bucket, meta BatchMeta, g *graph.Graph, seeds []int64, edges [][]graphsample.SampledEdge, per int, opts ...Option) *output.Manifest {
	t.Helper()
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", meta, g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < len(edges); lo += per {
		hi := min(lo+per, len(edges))
		if err := w.WriteSamples(ctx, int64(lo), seeds[lo:hi], edges[lo:hi]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Arrow reads instance_id, seed, hop, src, dst (+ edge_weight), every row
// back in instance then hop order, under every codec, for a graph with
// external ids (seeds and vertices mapped as pages are written) and one
// whose ids are its dense ids (written from the columns as they lie).
func TestSamplesArrowReadsOutput(t *testing.T) {
	mapped := weightedTestGraph(t)
	dense := denseTestGraph(t)
	unbiased := sampleParams
	unbiased.EdgeBias = graphsample.Bias{}
	for _, c := range []struct {
		g      *graph.Graph
		p      graphsample.SampleParams
		weight bool
		comp   Compression
	}{
		{mapped, sampleParams, false, Zstd}, {mapped, sampleParams, true, Zstd}, {mapped, sampleParams, true, Snappy},
		{mapped, sampleParams, false, None}, {dense, unbiased, false, Zstd}, {dense, unbiased, false, Snappy},
	} {
		g, weight := c.g, c.weight
		ss, edges := runSample(t, g, c.p, 3000)
		var want []WeightedSampleRow
		for i, es := range edges {
			for _, e := range es {
				r := WeightedSampleRow{InstanceID: int64(i), Seed: ss[i], Hop: e.Hop, Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst)}
				if weight {
					r.EdgeWeight = g.Weights[e.Edge]
				}
				want = append(want, r)
			}
		}
		b, _ := fileBucket(t)
		m := writeSamples(t, b, sampleMeta(fmt.Sprint("s", weight), c.p, len(edges), weight), g, ss, edges, 777, WithFileBytes(64<<10), WithCompression(c.comp))
		if len(m.Files) < 2 || m.Output != OutputSamples || m.Instances != int64(len(edges)) || m.Edges != int64(len(want)) ||
			m.Algorithm.Name != "neighbor" || !reflect.DeepEqual(m.Algorithm.Fanouts, []int{5, 3}) {
			t.Fatalf("manifest %+v", m)
		}
		var got []WeightedSampleRow
		for _, f := range m.Files {
			data, err := b.ReadAll(context.Background(), f.Key)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, readSamplesArrow(t, data, weight)...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s, weight %v, %s: arrow read %d rows that differ from the %d written", g.Name, weight, c.comp, len(got), len(want))
		}
		for i := 1; i < len(got); i++ {
			if a, b := got[i-1], got[i]; a.InstanceID > b.InstanceID || a.InstanceID == b.InstanceID && a.Hop > b.Hop {
				t.Fatalf("row %d out of order", i)
			}
		}
		data, err := b.ReadAll(context.Background(), pathOfSuccess(t, m))
		if err != nil {
			t.Fatal(err)
		}
		if dm, err := output.DecodeManifest(data); err != nil || dm.Edges != m.Edges || dm.Instances != m.Instances {
			t.Fatalf("manifest decode: %v %+v", err, dm)
		}
	}
}

func TestSamplesDeterministicAndShareCommit(t *testing.T) {
	g := weightedTestGraph(t)
	// 4,000 seeds: about 130,000 edges, so several row groups, encoded
	// concurrently unless there is one encoder.
	ss, edges := runSample(t, g, sampleParams, 4000)
	var crcs [][]string
	// Parts are written by up to WithParallelParts goroutines at once.
	for _, c := range []struct{ per, encoders, parallel int }{{len(edges), 4, 4}, {1, 4, 2}, {333, 4, 1}, {333, 1, 4}, {5000, 3, 3}} {
		b, _ := fileBucket(t)
		m := writeSamples(t, b, sampleMeta("d", sampleParams, len(edges), false), g, ss, edges, c.per,
			WithFileBytes(32<<10), WithEncoders(c.encoders), WithParallelParts(c.parallel))
		var parts []string
		groups := 0
		for _, f := range m.Files {
			parts = append(parts, fmt.Sprint(f.CRC32C, f.Rows, f.Bytes))
			groups += f.RowGroups
		}
		if groups < 2 {
			t.Fatalf("%d row groups: the case does not exercise concurrent encoding", groups)
		}
		crcs = append(crcs, parts)
	}
	for i := 1; i < len(crcs); i++ {
		if !reflect.DeepEqual(crcs[0], crcs[i]) {
			t.Fatalf("parts differ by call size, encoders or parallel parts: %v", crcs)
		}
	}
	b, _ := fileBucket(t)
	first := writeSamples(t, b, sampleMeta("d", sampleParams, len(edges), false), g, ss, edges, 100)
	again := writeSamples(t, b, sampleMeta("d", sampleParams, len(edges), false), g, ss, edges, 100)
	if !reflect.DeepEqual(first.Files, again.Files) {
		t.Error("a second writer with the same fingerprint replaced the first's parts")
	}
	found, err := Lookup(context.Background(), b, "walks", "d", "fp-d")
	if err != nil || found == nil || found.Edges != first.Edges {
		t.Fatalf("lookup: %v %+v", err, found)
	}
	other := sampleMeta("d", sampleParams, len(edges), false)
	other.Fingerprint = "another"
	w, _ := NewBatchWriter(context.Background(), b, "walks", other, g)
	w.WriteSamples(context.Background(), 0, ss, edges)
	if _, err := w.Commit(context.Background()); !errors.Is(err, ErrBatchConflict) {
		t.Errorf("different fingerprint: %v, want a conflict", err)
	}
}

func TestSamplesWriterRefusesIncomplete(t *testing.T) {
	g := weightedTestGraph(t)
	ss, edges := runSample(t, g, sampleParams, 10)
	b, _ := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", sampleMeta("short", sampleParams, len(edges)+1, false), g)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSamples(ctx, 1, ss[:1], edges[:1]); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("out of order instances: %v", err)
	}
	w, _ = NewBatchWriter(ctx, b, "walks", sampleMeta("short", sampleParams, len(edges)+1, false), g)
	if err := w.WriteSamples(ctx, 0, ss, edges); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("commit of %d of %d instances: %v", len(edges), len(edges)+1, err)
	}
	// An edge beyond the graph, in the middle of a call large enough to be
	// mapped on several goroutines, and one in a small call.
	ss, edges = runSample(t, g, sampleParams, 4000)
	for _, at := range []int{len(edges) / 2, 3} {
		bad := slices.Clone(edges)
		bad[at] = slices.Clone(bad[at])
		bad[at][0].Dst = uint32(g.NumVertices()) + 5
		n := len(bad)
		if at == 3 {
			n = 10
		}
		w, _ = NewBatchWriter(ctx, b, "walks", sampleMeta("bad", sampleParams, n, false), g, WithEncoders(4))
		if err := w.WriteSamples(ctx, 0, ss[:n], bad[:n]); !errors.Is(err, ErrBadChunk) || !strings.Contains(err.Error(), "beyond the graph") {
			t.Fatalf("edge beyond the graph in instance %d of %d: %v", at, n, err)
		}
		if _, err := w.Commit(ctx); err == nil {
			t.Fatal("a failed writer committed")
		}
	}
	m := sampleMeta("x", sampleParams, 3, false)
	m.Walks = 3
	if _, err := NewBatchWriter(ctx, b, "walks", m, g); err == nil {
		t.Error("walks and samples both accepted")
	}
	if _, err := NewBatchWriter(ctx, b, "walks", sampleMeta("x", sampleParams, 3, true), testGraph(t)); err == nil {
		t.Error("edge weights of an unweighted graph accepted")
	}
}

func readSamplesArrow(t *testing.T, data []byte, weight bool) []WeightedSampleRow {
	t.Helper()
	want := []arrow.Field{
		{Name: "instance_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "seed", Type: arrow.PrimitiveTypes.Int64},
		{Name: "hop", Type: arrow.PrimitiveTypes.Int32},
		{Name: "src", Type: arrow.PrimitiveTypes.Int64},
		{Name: "dst", Type: arrow.PrimitiveTypes.Int64},
	}
	if weight {
		want = append(want, arrow.Field{Name: "edge_weight", Type: arrow.PrimitiveTypes.Float32})
	}
	tbl := arrowTable(t, data, OutputSamples, want)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 4096)
	defer tr.Release()
	var rows []WeightedSampleRow
	for tr.Next() {
		rec := tr.RecordBatch()
		inst, seed := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		hop, src, dst := rec.Column(2).(*array.Int32), rec.Column(3).(*array.Int64), rec.Column(4).(*array.Int64)
		for i := range int(rec.NumRows()) {
			r := WeightedSampleRow{InstanceID: inst.Value(i), Seed: seed.Value(i), Hop: hop.Value(i), Src: src.Value(i), Dst: dst.Value(i)}
			if weight {
				r.EdgeWeight = rec.Column(5).(*array.Float32).Value(i)
			}
			rows = append(rows, r)
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// WriteSampleColumns writes the bytes WriteSamples writes for the same
// edges, whatever the waves, with or without edge indices (unweighted
// output needs none); edge weights asked of columns without edge indices,
// and columns shorter than their offsets, are refused as bad chunks.
func TestSampleColumnsWriteWhatWriteSamplesWrites(t *testing.T) {
	ctx := context.Background()
	g := weightedTestGraph(t)
	ss, edges := runSample(t, g, sampleParams, 4000)
	for _, weight := range []bool{false, true} {
		b, _ := fileBucket(t)
		want := writeSamples(t, b, sampleMeta("w", sampleParams, len(edges), weight), g, ss, edges, 1000, WithFileBytes(32<<10), WithEncoders(3))
		for _, c := range []struct {
			per       int
			withEdges bool
		}{{len(edges), true}, {777, true}, {1, true}, {777, false}} {
			if weight && !c.withEdges {
				continue
			}
			b, _ := fileBucket(t)
			w, err := NewBatchWriter(ctx, b, "walks", sampleMeta("w", sampleParams, len(edges), weight), g, WithFileBytes(32<<10), WithEncoders(3))
			if err != nil {
				t.Fatal(err)
			}
			cols := &graphsample.Columns{WithEdges: c.withEdges}
			for lo := 0; lo < len(edges); lo += c.per {
				hi := min(lo+c.per, len(edges))
				cols.SetEdges(edges[lo:hi], 2)
				if err := w.WriteSampleColumns(ctx, int64(lo), ss[lo:hi], cols); err != nil {
					t.Fatal(err)
				}
			}
			m, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := partSums(m), partSums(want); !reflect.DeepEqual(got, want) {
				t.Errorf("weight %v, %d instances a call, edges %v: parts %v differ from WriteSamples' %v", weight, c.per, c.withEdges, got, want)
			}
		}
	}
	b, _ := fileBucket(t)
	w, _ := NewBatchWriter(ctx, b, "walks", sampleMeta("nw", sampleParams, 10, true), g)
	cols := &graphsample.Columns{}
	cols.SetEdges(edges[:10], 1)
	if err := w.WriteSampleColumns(ctx, 0, ss[:10], cols); !errors.Is(err, ErrBadChunk) || !strings.Contains(err.Error(), "edge indices") {
		t.Errorf("edge weights from columns without edge indices: %v", err)
	}
	w, _ = NewBatchWriter(ctx, b, "walks", sampleMeta("short", sampleParams, 10, false), g)
	cols.SetEdges(edges[:10], 1)
	cols.Dst = cols.Dst[:len(cols.Dst)-1]
	if err := w.WriteSampleColumns(ctx, 0, ss[:10], cols); !errors.Is(err, ErrBadChunk) {
		t.Errorf("a column shorter than the offsets: %v", err)
	}
}

// partSums are m's parts as checksum, rows and bytes (their keys name the
// writer's attempt).
func partSums(m *output.Manifest) []string {
	var out []string
	for _, f := range m.Files {
		out = append(out, fmt.Sprint(f.CRC32C, f.Rows, f.Bytes, f.RowGroups))
	}
	return out
}

// A samples batch aborted, or its call cancelled, while row groups are
// being encoded and appended leaves no object behind and stops every
// goroutine it started (Abort returns only then).
func TestSamplesAbortMidway(t *testing.T) {
	g := weightedTestGraph(t)
	ss, edges := runSample(t, g, sampleParams, 4000)
	for _, cancelCall := range []bool{false, true} {
		b, dir := fileBucket(t)
		ctx, cancel := context.WithCancel(context.Background())
		w, err := NewBatchWriter(ctx, b, "walks", sampleMeta("abort", sampleParams, len(edges), false), g, WithFileBytes(16<<10), WithEncoders(2))
		if err != nil {
			t.Fatal(err)
		}
		half := len(edges) / 2
		if err := w.WriteSamples(ctx, 0, ss[:half], edges[:half]); err != nil {
			t.Fatal(err)
		}
		if cancelCall {
			cancel()
			if err := w.WriteSamples(ctx, int64(half), ss[half:], edges[half:]); !errors.Is(err, context.Canceled) {
				t.Errorf("a cancelled call: %v", err)
			}
		}
		if err := w.Abort(context.Background()); err != nil {
			t.Fatal(err)
		}
		cancel()
		var left []string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, path)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("cancel %v: left %v", cancelCall, left)
		}
	}
}

// WriteSampleColumns reads the caller's columns during the call only:
// columns overwritten as soon as each call returns give the bytes of
// columns left alone (a writer that encoded whole row groups from the
// caller's columns after returning would fail it). Calls of several row
// groups each, with and without edge weights (run it under -race too).
func TestSampleColumnsReusedAfterTheCall(t *testing.T) {
	ctx := context.Background()
	g := weightedTestGraph(t)
	const per, calls = 275, 4
	instances := 1000 // 275,000 edges a call: four row groups and a piece
	r := rand.New(rand.NewPCG(5, 6))
	nv, ne := uint32(g.NumVertices()), uint64(len(g.Targets))
	waves := make([]*graphsample.Columns, calls)
	seeds := make([]int64, calls*instances)
	for i := range seeds {
		seeds[i] = g.ExternalID(r.Uint32N(nv))
	}
	for i := range waves {
		c := &graphsample.Columns{WithEdges: true}
		for k := range instances + 1 {
			c.Offsets = append(c.Offsets, int64(k*per))
		}
		for x := range instances * per {
			c.Hop = append(c.Hop, int32(min(x%per, 25)/25))
			c.Src = append(c.Src, r.Uint32N(nv))
			c.Dst = append(c.Dst, r.Uint32N(nv))
			c.Edge = append(c.Edge, r.Uint64N(ne))
		}
		waves[i] = c
	}
	write := func(weight, scribble bool) *output.Manifest {
		t.Helper()
		b, _ := fileBucket(t)
		w, err := NewBatchWriter(ctx, b, "walks", sampleMeta("reuse", sampleParams, calls*instances, weight), g, WithEncoders(3), WithFileBytes(256<<10))
		if err != nil {
			t.Fatal(err)
		}
		cols := &graphsample.Columns{WithEdges: true}
		for i, c := range waves {
			cols.Offsets = append(cols.Offsets[:0], c.Offsets...)
			cols.Hop, cols.Src = append(cols.Hop[:0], c.Hop...), append(cols.Src[:0], c.Src...)
			cols.Dst, cols.Edge = append(cols.Dst[:0], c.Dst...), append(cols.Edge[:0], c.Edge...)
			if err := w.WriteSampleColumns(ctx, int64(i*instances), seeds[i*instances:(i+1)*instances], cols); err != nil {
				t.Fatal(err)
			}
			if scribble {
				for x := range cols.Hop {
					cols.Hop[x], cols.Src[x], cols.Dst[x], cols.Edge[x] = 0, 0, 0, 0
				}
			}
		}
		m, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, weight := range []bool{false, true} {
		want, got := write(weight, false), write(weight, true)
		if !reflect.DeepEqual(partSums(got), partSums(want)) {
			t.Errorf("weight %v: parts %v of columns overwritten after each call, want %v", weight, partSums(got), partSums(want))
		}
	}
}
