package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/demo"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/visits"
)

// A known failure is a reader that cannot decode what some option writes.
// The option's help names the reader (sink.ByteStreamSplit, the CLI's
// --walk-encoding). A case the condition selects must fail with an error
// containing match; if it reads, the entry (and the help) are out of date.
type knownFailure struct {
	reader, what, match string
	applies             func(files) bool
}

var knownFailures = []knownFailure{
	{"duckdb", "BYTE_STREAM_SPLIT on INT64 columns (DuckDB reads it for FLOAT and DOUBLE only)", "BYTE_STREAM_SPLIT",
		func(f files) bool { return f.splitInt64 }},
}

// nodeReaders finds node and the packages read.mjs needs, installed by
// scripts/test.sh (npm ci in this directory).
func nodeReaders(t *testing.T) (node string) {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("WALKSTAGE_INTEGRATION") == "1" {
			t.Fatalf("%s and WALKSTAGE_INTEGRATION=1 (scripts/test.sh installs the readers)", why)
		}
		t.Skip(why + ": run scripts/test.sh, or npm ci in conformance/")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node not found")
	}
	for _, pkg := range []string{"@duckdb/node-api", "hyparquet", "hyparquet-compressors", "icebird"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			skip("conformance/node_modules lacks " + pkg)
		}
	}
	return node
}

// testGraph has external ids above 2^53, which a reader that holds 64-bit
// integers as doubles would round, and out-edges at every vertex.
func testGraph(t *testing.T) *graph.Graph {
	t.Helper()
	const n = 400
	ext := func(v int) int64 { return 1<<60 + int64(v)*1_000_003 }
	r := rand.New(rand.NewPCG(33, 1))
	var edges []graph.Edge
	for v := range n {
		for range 2 + r.IntN(6) {
			edges = append(edges, graph.Edge{Src: ext(v), Dst: ext(r.IntN(n)), Weight: float32(1 + r.IntN(4))})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "conformance", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// totals are what every reader must find in a batch: rows, then three sums
// whose meaning is the kind's (read.mjs, kinds):
//
//	walks:   steps (sum of length), vertices (sum of list lengths), sum of every vertex id
//	visits:  sum of steps, candidates, sum of every candidate's vertex id
//	samples: distinct instances, sum of hop, sum of every src and dst
type totals [4]*big.Int

func newTotals() totals { return totals{new(big.Int), new(big.Int), new(big.Int), new(big.Int)} }

func (t totals) add(i int, v int64) { t[i].Add(t[i], big.NewInt(v)) }

func (t totals) String() string {
	return fmt.Sprintf("[%s %s %s %s]", t[0], t[1], t[2], t[3])
}

func (t totals) equal(o []string) bool {
	if len(o) != len(t) {
		return false
	}
	for i, s := range o {
		v, ok := new(big.Int).SetString(s, 10)
		if !ok || v.Cmp(t[i]) != 0 {
			return false
		}
	}
	return true
}

// files describes the parts of a batch as Arrow's reader saw them.
type files struct {
	splitInt64 bool // some INT64 column chunk is BYTE_STREAM_SPLIT
	encodings  []string
}

// check is one written batch and what its readers must find.
type check struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Glob   string   `json:"glob"`
	Files  []string `json:"files"`
	Sample int      `json:"sample"`

	isDefault bool
	m         *output.Manifest
	want      totals
	parts     files
}

// readerResult is one reader's answer for a check (read.mjs).
type readerResult struct {
	OK     bool              `json:"ok"`
	Error  string            `json:"error"`
	Totals []string          `json:"totals"`
	Sample []json.RawMessage `json:"sample"`
}

type results struct {
	Checks []struct {
		Name      string       `json:"name"`
		DuckDB    readerResult `json:"duckdb"`
		Hyparquet readerResult `json:"hyparquet"`
	} `json:"checks"`
	Queries []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		Rows  int    `json:"rows"`
	} `json:"queries"`
}

// Every output kind, written with every compression and walk encoding by the
// real writer, is read by Arrow (Go), DuckDB through the glob over its kind
// that docs/reference/messages.md gives, and hyparquet through its manifest: the row
// counts match the manifest, the totals over every row match what was
// written (ids above 2^53 included), and sampled walks and sampled edges
// follow edges of the graph. Encodings a reader cannot decode are the known
// failures above; the defaults must be readable by every reader; and the
// query the demo prints works on the demo's output.
func TestReadersReadEveryOutput(t *testing.T) {
	node := nodeReaders(t)
	ctx := context.Background()
	g := testGraph(t)
	root := t.TempDir()
	bucket, err := store.OpenBucket(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	in := newInputs(t, g)

	type variant struct {
		prefix string
		opts   []sink.Option
		weight bool
	}
	variants := []variant{{prefix: "default", weight: true}}
	for _, c := range []sink.Compression{sink.Zstd, sink.Snappy, sink.None} {
		for _, e := range []sink.WalkEncoding{sink.AutoWalkEncoding, sink.ByteStreamSplit, sink.DeltaBinaryPacked} {
			name := string(e)
			if e == sink.AutoWalkEncoding {
				name = "auto"
			}
			variants = append(variants, variant{prefix: string(c) + "-" + name, weight: c == sink.Snappy,
				opts: []sink.Option{sink.WithCompression(c), sink.WithWalkEncoding(e)}})
		}
	}
	var checks []*check
	for _, v := range variants {
		// Small row groups and parts, so readers cross both.
		opts := append([]sink.Option{sink.WithRowGroupRows(256), sink.WithFileBytes(24 << 10)}, v.opts...)
		if v.prefix == "default" {
			opts = nil
		}
		for _, kind := range []string{output.KindWalks, output.KindVisits, output.KindSamples} {
			m := in.write(t, bucket, v.prefix, kind, v.weight, opts)
			c := &check{Name: v.prefix + "/" + kind, Kind: kind, Sample: 25, isDefault: v.prefix == "default", m: m,
				want: in.want[kind],
				Glob: filepath.ToSlash(root) + "/" + v.prefix + "/kind=" + kind + "/**/*.parquet"}
			for _, f := range m.Files {
				c.Files = append(c.Files, filepath.Join(root, filepath.FromSlash(f.Key)))
			}
			checks = append(checks, c)
		}
	}

	// Arrow (Go): every part the manifest lists.
	for _, c := range checks {
		t.Run(c.Name+"/arrow", func(t *testing.T) {
			got, sample, parts := readArrow(t, c)
			c.parts = parts
			if got.String() != c.want.String() || got[0].Int64() != manifestRows(c.m) {
				t.Errorf("arrow totals %s, want %s (manifest rows %d)", got, c.want, manifestRows(c.m))
			}
			checkSample(t, g, c.Kind, sample)
		})
	}

	demoDir := filepath.Join(t.TempDir(), "demo")
	var demoOut bytes.Buffer
	if err := demo.Run(ctx, demo.Options{Dir: demoDir, Scale: 8, Engine: "cpu"}, &demoOut); err != nil {
		t.Fatalf("demo: %v\n%s", err, demoOut.String())
	}
	query := demo.ReaderQuery(demoDir)
	if !strings.Contains(demoOut.String(), query) {
		t.Fatalf("the demo does not print ReaderQuery:\n%s", demoOut.String())
	}

	// The same query on a tree with every kind under prefix "walks" and
	// walks that every reader decodes: it must read the walks alone.
	mixed := t.TempDir()
	mb, err := store.OpenBucket(ctx, "file://"+mixed)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	for _, kind := range []string{output.KindWalks, output.KindVisits, output.KindSamples} {
		in.write(t, mb, "walks", kind, false, []sink.Option{sink.WithWalkEncoding(sink.DeltaBinaryPacked)})
	}

	res := runNode(t, node, checks, []map[string]string{{"name": "demo", "sql": query}, {"name": "every kind", "sql": demo.ReaderQuery(mixed)}})
	byName := map[string]*check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	type failure struct{ check, reader, error string }
	var defaultFailures []failure
	for _, r := range res.Checks {
		c := byName[r.Name]
		for _, rr := range []struct {
			reader string
			res    readerResult
		}{{"duckdb", r.DuckDB}, {"hyparquet", r.Hyparquet}} {
			if c.isDefault && !rr.res.OK {
				defaultFailures = append(defaultFailures, failure{c.Name, rr.reader, rr.res.Error})
			}
			t.Run(c.Name+"/"+rr.reader, func(t *testing.T) {
				for _, kf := range knownFailures {
					if kf.reader != rr.reader || !kf.applies(c.parts) {
						continue
					}
					switch {
					case rr.res.OK:
						t.Errorf("%s read %s (%v), a known failure: drop it from knownFailures and from the option's help", kf.reader, kf.what, c.parts.encodings)
					case !strings.Contains(rr.res.Error, kf.match):
						t.Errorf("%s failed otherwise than the known failure (%s): %s", kf.reader, kf.what, rr.res.Error)
					default:
						t.Logf("expected failure: %s cannot read %s: %s", kf.reader, kf.what, firstLine(rr.res.Error))
					}
					return
				}
				if !rr.res.OK {
					t.Fatalf("%s failed (encodings %v): %s", rr.reader, c.parts.encodings, rr.res.Error)
				}
				if !c.want.equal(rr.res.Totals) || rr.res.Totals[0] != fmt.Sprint(manifestRows(c.m)) {
					t.Errorf("%s totals %v, want %s (manifest rows %d)", rr.reader, rr.res.Totals, c.want, manifestRows(c.m))
				}
				sample, err := decodeSample(c.Kind, rr.res.Sample)
				if err != nil {
					t.Fatal(err)
				}
				if len(sample) != min(c.Sample, int(manifestRows(c.m))) {
					t.Errorf("%s sampled %d rows, want %d", rr.reader, len(sample), c.Sample)
				}
				checkSample(t, g, c.Kind, sample)
			})
		}
	}

	t.Run("default readable by every reader", func(t *testing.T) {
		for _, f := range defaultFailures {
			t.Errorf("%s cannot read the default output %s: %s", f.reader, f.check, firstLine(f.error))
		}
	})

	if len(res.Queries) != 2 {
		t.Fatalf("queries %+v", res.Queries)
	}
	t.Run("demo query on every kind", func(t *testing.T) {
		if q := res.Queries[1]; !q.OK || q.Rows != 5 {
			t.Errorf("DuckDB on the demo's query over walks, visits and samples: %d rows, error %s", q.Rows, q.Error)
		}
	})
	t.Run("demo query", func(t *testing.T) {
		if q := res.Queries[0]; !q.OK || q.Rows != 5 {
			t.Errorf("DuckDB on the demo's query %q: %d rows, error %s", query, q.Rows, q.Error)
		}
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func manifestRows(m *output.Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Rows
	}
	return n
}

// runNode runs read.mjs on the checks and queries.
func runNode(t *testing.T, node string, checks []*check, queries []map[string]string) results {
	t.Helper()
	spec, err := json.Marshal(map[string]any{"checks": checks, "queries": queries})
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, "read.mjs", specPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node read.mjs: %v\n%s", err, stderr.String())
	}
	var res results
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("read.mjs output: %v\n%s", err, stdout.String())
	}
	if len(res.Checks) != len(checks) {
		t.Fatalf("read.mjs answered %d checks of %d", len(res.Checks), len(checks))
	}
	return res
}

// inputs are the rows every batch of a kind holds, made once by the CPU
// engine, and their totals.
type inputs struct {
	g       *graph.Graph
	chunks  []walk.Chunk
	walks   int
	algo    walk.Algorithm
	qids    []string
	visits  []visits.VisitResult
	vp      visits.VisitParams
	sp      graphsample.SampleParams
	seeds   []int64
	samples [][]graphsample.SampledEdge
	want    map[string]totals
}

func newInputs(t *testing.T, g *graph.Graph) *inputs {
	t.Helper()
	ctx := context.Background()
	// PPR walks and PPR visits on one graph used to share a directory.
	in := &inputs{g: g, walks: 2000, algo: walk.Algorithm{Kind: walk.PPR, Length: 40, StopProb: 0.1}, want: map[string]totals{}}
	e, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	starts := make([]uint32, in.walks)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	err = e.Run(ctx, []walk.Job{{Algorithm: in.algo, Seed: 7, Starts: starts}}, func(c walk.Chunk) error {
		in.chunks = append(in.chunks, cloneChunk(c))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wt := newTotals()
	for _, c := range in.chunks {
		for k := range c.Len() {
			vs := c.Walk(k)
			wt.add(0, 1)
			wt.add(1, int64(len(vs)-1))
			wt.add(2, int64(len(vs)))
			for _, v := range vs {
				wt.add(3, g.ExternalID(v))
			}
		}
	}
	in.want[output.KindWalks] = wt

	queries := make([]visits.VisitQuery, 300)
	for i := range queries {
		queries[i] = visits.VisitQuery{Starts: []uint32{uint32(i)}}
		in.qids = append(in.qids, fmt.Sprint(g.ExternalID(uint32(i))))
	}
	in.vp = visits.VisitParams{Algorithm: in.algo, Seed: 7, StepsPerQuery: 500, TopK: 20}
	if in.visits, _, err = visits.CountVisits(ctx, e, g, in.vp, queries); err != nil {
		t.Fatal(err)
	}
	vt := newTotals()
	for _, r := range in.visits {
		vt.add(0, 1)
		vt.add(1, r.Steps)
		vt.add(2, int64(len(r.Candidates)))
		for _, c := range r.Candidates {
			vt.add(3, g.ExternalID(c.Vertex))
		}
	}
	in.want[output.KindVisits] = vt

	in.sp = graphsample.SampleParams{Kind: graphsample.NeighborSampling, Seed: 7, InstancesPerSeed: 2, Fanouts: []int{4, 3}}
	seedVertices := make([]uint32, 250)
	for i := range seedVertices {
		seedVertices[i] = uint32(i)
	}
	if in.samples, _, err = graphsample.Sample(ctx, g, in.sp, seedVertices, 0); err != nil {
		t.Fatal(err)
	}
	st := newTotals()
	for i, es := range in.samples {
		in.seeds = append(in.seeds, g.ExternalID(seedVertices[i/in.sp.InstancesPerSeed]))
		if len(es) > 0 {
			st.add(1, 1)
		}
		for _, e := range es {
			st.add(0, 1)
			st.add(2, int64(e.Hop))
			st.add(3, g.ExternalID(e.Src))
			st.add(3, g.ExternalID(e.Dst))
		}
	}
	in.want[output.KindSamples] = st
	return in
}

func cloneChunk(c walk.Chunk) walk.Chunk {
	d := walk.Chunk{Tag: c.Tag, WalkIDs: append([]uint64(nil), c.WalkIDs...), Offsets: append([]uint32(nil), c.Offsets...),
		Vertices: append([]uint32(nil), c.Vertices...)}
	if c.Starts != nil {
		d.Starts = append([]uint32(nil), c.Starts...)
	}
	if c.Times != nil {
		d.Times = append([]int64(nil), c.Times...)
	}
	return d
}

// write writes one batch of kind under prefix and commits it.
func (in *inputs) write(t *testing.T, b *blob.Bucket, prefix, kind string, weight bool, opts []sink.Option) *output.Manifest {
	t.Helper()
	ctx := context.Background()
	meta := sink.BatchMeta{BatchID: "conf-" + kind, Seed: 7, Engine: "cpu", WalkstageVersion: "conformance", Fingerprint: "fp-" + kind}
	switch kind {
	case output.KindWalks:
		meta.Algorithm, meta.Walks = in.algo, int64(in.walks)
	case output.KindVisits:
		meta.Algorithm, meta.Queries = in.algo, int64(len(in.visits))
	case output.KindSamples:
		meta.Sample, meta.Instances, meta.SampleEdgeWeight = &in.sp, int64(len(in.samples)), weight
	}
	w, err := sink.NewBatchWriter(ctx, b, prefix, meta, in.g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	switch kind {
	case output.KindWalks:
		for _, c := range in.chunks {
			err = errors.Join(err, w.Write(ctx, cloneChunk(c)))
		}
	case output.KindVisits:
		err = w.WriteVisits(ctx, in.qids, in.visits)
	case output.KindSamples:
		err = w.WriteSamples(ctx, 0, in.seeds, in.samples)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sampled is one sampled row: the vertex ids that must be the graph's (a
// walk, a query's candidates, an edge) and whether consecutive ones must
// be edges.
type sampled struct {
	ids   []int64
	edges bool
}

// decodeSample turns read.mjs's sampled rows into sampled.
func decodeSample(kind string, rows []json.RawMessage) ([]sampled, error) {
	var out []sampled
	for _, raw := range rows {
		var row []json.RawMessage
		if err := json.Unmarshal(raw, &row); err != nil || len(row) != 2 {
			return nil, fmt.Errorf("sampled row %s: %v", raw, err)
		}
		var s sampled
		switch kind {
		case output.KindSamples:
			var src, dst string
			if err := errors.Join(json.Unmarshal(row[0], &src), json.Unmarshal(row[1], &dst)); err != nil {
				return nil, fmt.Errorf("sampled edge %s: %w", raw, err)
			}
			s = sampled{ids: []int64{parseInt(src), parseInt(dst)}, edges: true}
		default:
			var ids []string
			if err := json.Unmarshal(row[1], &ids); err != nil {
				return nil, fmt.Errorf("sampled row %s: %w", raw, err)
			}
			s.edges = kind == output.KindWalks
			for _, id := range ids {
				s.ids = append(s.ids, parseInt(id))
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func parseInt(s string) int64 {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || !v.IsInt64() {
		return -1 // no vertex has it: checkSample reports it
	}
	return v.Int64()
}

// checkSample checks that sampled ids are vertices of g and, for walks and
// edges, that each consecutive pair is an edge.
func checkSample(t *testing.T, g *graph.Graph, kind string, rows []sampled) {
	t.Helper()
	if len(rows) == 0 {
		t.Errorf("no %s rows sampled", kind)
	}
	for i, r := range rows {
		for k, id := range r.ids {
			v, ok := g.DenseID(id)
			if !ok {
				t.Errorf("sampled %s row %d: %d is not a vertex of the graph", kind, i, id)
				break
			}
			if k > 0 && r.edges {
				u, _ := g.DenseID(r.ids[k-1])
				if !g.HasEdge(u, v) {
					t.Errorf("sampled %s row %d: %d -> %d is not an edge", kind, i, r.ids[k-1], id)
				}
			}
		}
	}
}

// readArrow reads a check's parts with Arrow's Go reader and returns the
// totals, the first Sample rows and what the parts' metadata says of their
// encodings.
func readArrow(t *testing.T, c *check) (totals, []sampled, files) {
	t.Helper()
	got := newTotals()
	var sample []sampled
	var info files
	seen := map[string]bool{}
	instances := map[int64]bool{}
	for _, path := range c.Files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		mem := memory.DefaultAllocator
		pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
		if err != nil {
			t.Fatal(err)
		}
		md := pr.MetaData()
		for i := range md.NumRowGroups() {
			rg := md.RowGroup(i)
			for j := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(j)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range cc.Encodings() {
					name := cc.PathInSchema().String() + ":" + e.String()
					if !seen[name] {
						seen[name] = true
						info.encodings = append(info.encodings, name)
					}
					if e == parquet.Encodings.ByteStreamSplit && cc.Type() == parquet.Types.Int64 {
						info.splitInt64 = true
					}
				}
			}
		}
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1024}, mem)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		pr.Close()
		if err != nil {
			t.Fatal(err)
		}
		tr := array.NewTableReader(tbl, 1024)
		for tr.Next() {
			rec := tr.RecordBatch()
			col := func(name string) arrow.Array {
				idx := rec.Schema().FieldIndices(name)
				if len(idx) != 1 {
					t.Fatalf("%s: no column %s in %s", path, name, rec.Schema())
				}
				return rec.Column(idx[0])
			}
			for i := range int(rec.NumRows()) {
				got.add(0, 1)
				var s sampled
				switch c.Kind {
				case output.KindWalks:
					got.add(1, int64(col("length").(*array.Int32).Value(i)))
					l := col("walk").(*array.List)
					vals := l.ListValues().(*array.Int64)
					lo, hi := l.ValueOffsets(i)
					got.add(2, hi-lo)
					s.edges = true
					for k := lo; k < hi; k++ {
						got.add(3, vals.Value(int(k)))
						s.ids = append(s.ids, vals.Value(int(k)))
					}
				case output.KindVisits:
					got.add(1, col("steps").(*array.Int64).Value(i))
					l := col("candidates").(*array.List)
					st := l.ListValues().(*array.Struct)
					vert := st.Field(0).(*array.Int64)
					lo, hi := l.ValueOffsets(i)
					got.add(2, hi-lo)
					for k := lo; k < hi; k++ {
						got.add(3, vert.Value(int(k)))
						s.ids = append(s.ids, vert.Value(int(k)))
					}
				case output.KindSamples:
					id := col("instance_id").(*array.Int64).Value(i)
					instances[id] = true
					got.add(2, int64(col("hop").(*array.Int32).Value(i)))
					src, dst := col("src").(*array.Int64).Value(i), col("dst").(*array.Int64).Value(i)
					got.add(3, src)
					got.add(3, dst)
					s = sampled{ids: []int64{src, dst}, edges: true}
				}
				if len(sample) < c.Sample {
					sample = append(sample, s)
				}
			}
		}
		if err := tr.Err(); err != nil {
			t.Fatal(err)
		}
		tr.Release()
		tbl.Release()
	}
	if c.Kind == output.KindSamples {
		got[1].SetInt64(int64(len(instances)))
	}
	return got, sample, info
}
