package sink

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/sink/pages"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// testGraph is a small graph with sparse external ids (so a dense id leaking
// into the output is caught) and a dead end (so walks of several lengths
// occur).
func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var edges []graph.Edge
	const n = 300
	for v := range int64(n) {
		if v == 7 {
			continue // vertex 7 has no out-edges
		}
		for range 1 + r.IntN(6) {
			edges = append(edges, graph.Edge{Src: v*1000 + 3, Dst: int64(r.IntN(n))*1000 + 3})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "test graph/1"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var testAlgo = walk.Algorithm{Kind: walk.Node2Vec, Length: 20, P: 2, Q: 0.5}

// runEngine walks n walks on the CPU engine and returns its chunks.
func runEngine(t testing.TB, g *graph.Graph, algo walk.Algorithm, n int, seed uint64) []walk.Chunk {
	t.Helper()
	e, err := cpu.New(g, cpu.WithChunkSize(97))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	starts := make([]uint32, n)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	var chunks []walk.Chunk
	err = e.Run(context.Background(), []walk.Job{{Algorithm: algo, Seed: seed, Starts: starts}}, func(c walk.Chunk) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// expectedRows turns chunks into the rows the sink must write, by walk id.
func expectedRows(g *graph.Graph, chunks []walk.Chunk, n int) []Row {
	rows := make([]Row, n)
	for _, c := range chunks {
		for k := range c.Len() {
			vs := c.Walk(k)
			ext := make([]int64, len(vs))
			for i, v := range vs {
				ext[i] = g.ExternalID(v)
			}
			rows[c.WalkIDs[k]] = Row{WalkID: int64(c.WalkIDs[k]), Start: ext[0], Length: int32(len(vs) - 1), Walk: ext}
		}
	}
	return rows
}

func fileBucket(t testing.TB) (*blob.Bucket, string) {
	dir := t.TempDir()
	b, err := store.OpenBucket(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dir
}

func testMeta(id string, n int) BatchMeta {
	return BatchMeta{BatchID: id, Algorithm: testAlgo, Seed: 42, Engine: "cpu", WalkstageVersion: "test", Walks: int64(n)}
}

// writeBatch writes chunks in the given order and commits.
func writeBatch(t testing.TB, b *blob.Bucket, meta BatchMeta, g *graph.Graph, chunks []walk.Chunk, opts ...Option) *output.Manifest {
	t.Helper()
	_, m := writeBatchBy(t, b, meta, g, chunks, opts...)
	return m
}

// writeBatchBy is writeBatch returning the writer too.
func writeBatchBy(t testing.TB, b *blob.Bucket, meta BatchMeta, g *graph.Graph, chunks []walk.Chunk, opts ...Option) (*BatchWriter, *output.Manifest) {
	t.Helper()
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", meta, g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit(ctx)
	<-w.Tidied()
	if err != nil {
		t.Fatal(err)
	}
	return w, m
}

func cloneChunk(c walk.Chunk) walk.Chunk {
	return walk.Chunk{Tag: c.Tag, WalkIDs: slices.Clone(c.WalkIDs), Offsets: slices.Clone(c.Offsets), Starts: slices.Clone(c.Starts),
		Vertices: slices.Clone(c.Vertices), Times: slices.Clone(c.Times)}
}

// readBatch reads every part of a manifest back with parquet-go, checking
// sizes and checksums on the way.
func readBatch(t testing.TB, b *blob.Bucket, m *output.Manifest) []Row {
	t.Helper()
	var rows []Row
	for _, f := range m.Files {
		data, err := b.ReadAll(context.Background(), f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != f.Bytes {
			t.Errorf("%s: %d bytes, manifest says %d", f.Key, len(data), f.Bytes)
		}
		if sum := PartCRC32C(data); sum != f.CRC32C {
			t.Errorf("%s: crc32c %s, manifest says %s", f.Key, sum, f.CRC32C)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(pf.RowGroups()); got != f.RowGroups {
			t.Errorf("%s: %d row groups, manifest says %d", f.Key, got, f.RowGroups)
		}
		part, err := parquet.Read[Row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(part)) != f.Rows || part[0].WalkID != f.FirstWalkID || part[len(part)-1].WalkID != f.LastWalkID {
			t.Errorf("%s: %d rows %d..%d, manifest says %d rows %d..%d", f.Key, len(part), part[0].WalkID,
				part[len(part)-1].WalkID, f.Rows, f.FirstWalkID, f.LastWalkID)
		}
		for k, want := range map[string]string{MetaBatchID: m.BatchID, MetaSeed: "42", MetaEngine: "cpu", MetaGraph: m.Graph} {
			if got, _ := pf.Lookup(k); got != want {
				t.Errorf("%s: metadata %s = %q, want %q", f.Key, k, got, want)
			}
		}
		rows = append(rows, part...)
	}
	return rows
}

func compareRows(t testing.TB, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.WalkID != w.WalkID || g.Start != w.Start || g.Length != w.Length || !slices.Equal(g.Walk, w.Walk) {
			t.Fatalf("row %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestRoundTripMatchesEngine(t *testing.T) {
	g := testGraph(t)
	const n = 5000
	chunks := runEngine(t, g, testAlgo, n, 42)
	want := expectedRows(g, chunks, n)
	short := 0
	for _, r := range want {
		if int(r.Length) < testAlgo.Length {
			short++
		}
	}
	if short == 0 {
		t.Fatal("test graph gave no early-stopped walks; the test would not cover them")
	}
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"zstd defaults", nil},
		{"snappy small groups many parts", []Option{WithCompression(Snappy), WithRowGroupRows(300), WithFileBytes(20 << 10)}},
		{"none one encoder", []Option{WithCompression(None), WithRowGroupRows(777), WithEncoders(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := fileBucket(t)
			m := writeBatch(t, b, testMeta("b1", n), g, chunks, tc.opts...)
			if m.Walks != n || len(m.Files) == 0 {
				t.Fatalf("manifest: %d walks, %d files", m.Walks, len(m.Files))
			}
			var steps int64
			for _, r := range want {
				steps += int64(r.Length)
			}
			if m.Steps != steps {
				t.Errorf("manifest steps %d, want %d", m.Steps, steps)
			}
			compareRows(t, readBatch(t, b, m), want)
			m2, err := output.ReadManifest(context.Background(), b, "walks/kind=walks/graph=test%20graph%2F1/algorithm=node2vec/batch=b1/_SUCCESS")
			if err != nil {
				t.Fatal(err)
			}
			if m2.Bytes != m.Bytes || len(m2.Files) != len(m.Files) {
				t.Errorf("manifest read back differs: %+v", m2)
			}
		})
	}
}

// The same walks must give byte-identical objects whatever order chunks
// arrive in and however many encoders run.
func TestOutputIndependentOfChunkOrder(t *testing.T) {
	g := testGraph(t)
	const n = 4000
	chunks := runEngine(t, g, testAlgo, n, 7)
	opts := []Option{WithRowGroupRows(500), WithFileBytes(30 << 10)}
	b1, dir1 := fileBucket(t)
	writeBatch(t, b1, testMeta("x", n), g, chunks, append(opts, WithEncoders(1), WithParallelParts(1))...)
	shuffled := slices.Clone(chunks)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b2, dir2 := fileBucket(t)
	writeBatch(t, b2, testMeta("x", n), g, shuffled, append(opts, WithEncoders(4))...)
	a, bb := treeDigest(t, dir1), treeDigest(t, dir2)
	if len(a) < 3 {
		t.Fatalf("only %d objects; want several parts", len(a))
	}
	if !slices.Equal(a, bb) {
		t.Fatalf("outputs differ:\n%v\n%v", a, bb)
	}
}

// attemptID matches the attempt id in part names.
var attemptID = regexp.MustCompile(`-[0-9a-f]{12}\.parquet`)

// treeDigest lists every file under dir with its sha256, attempt ids in
// names and manifests replaced by a placeholder: they differ between
// writers by design, everything else must not.
func treeDigest(t testing.TB, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		data = attemptID.ReplaceAll(data, []byte("-ATTEMPT.parquet"))
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(dir, p)
		out = append(out, attemptID.ReplaceAllString(rel, "-ATTEMPT.parquet")+" "+hex.EncodeToString(sum[:]))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRewriteReplacesBatch(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 9)
	b, dir := fileBucket(t)
	// First write: many small parts.
	m1 := writeBatch(t, b, testMeta("r", n), g, chunks, WithRowGroupRows(200), WithFileBytes(1))
	if len(m1.Files) != 15 {
		t.Fatalf("first write: %d parts, want 15", len(m1.Files))
	}
	// Second write of the same batch: fewer parts; stale ones must go.
	m2 := writeBatch(t, b, testMeta("r", n), g, chunks, WithRowGroupRows(1000), WithFileBytes(1))
	files := treeDigest(t, dir)
	if len(files) != len(m2.Files)+1 {
		t.Fatalf("after rewrite %d objects, want %d parts + _SUCCESS: %v", len(files), len(m2.Files), files)
	}
	compareRows(t, readBatch(t, b, m2), expectedRows(g, chunks, n))
	// Third write identical to the second: identical bytes.
	writeBatch(t, b, testMeta("r", n), g, chunks, WithRowGroupRows(1000), WithFileBytes(1))
	if again := treeDigest(t, dir); !slices.Equal(files, again) {
		t.Fatalf("rewrite changed bytes:\n%v\n%v", files, again)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 11)
	b, dir := fileBucket(t)
	m1 := writeBatch(t, b, testMeta("a", n), g, chunks) // a complete earlier write
	before := treeDigest(t, dir)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", testMeta("a", n), g, WithRowGroupRows(100), WithFileBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks[:len(chunks)/2] {
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	// The aborted rewrite took nothing of the complete batch with it.
	m, err := output.ReadManifest(ctx, b, w.Layout().SuccessKey())
	if err != nil {
		t.Fatalf("after abort: %v", err)
	}
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
	if after := treeDigest(t, dir); !slices.Equal(after, before) || m.Files[0].Key != m1.Files[0].Key {
		t.Errorf("abort changed the batch:\n%v\n%v", before, after)
	}
	if err := w.Write(ctx, cloneChunk(chunks[0])); err == nil {
		t.Error("Write after Abort succeeded")
	}
}

func TestCancelDuringWrite(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 12)
	b, dir := fileBucket(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := NewBatchWriter(ctx, b, "walks", testMeta("c", n), g, WithRowGroupRows(100), WithFileBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks[:len(chunks)-1] {
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := w.Write(ctx, cloneChunk(chunks[len(chunks)-1])); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("write after cancel: %v", err)
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Fatal("Commit after cancellation succeeded")
	}
	if err := w.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if files := treeDigest(t, dir); len(files) != 0 {
		t.Fatalf("left behind after cancel: %v", files)
	}
}

func TestRejectsBadInput(t *testing.T) {
	g := testGraph(t)
	chunks := runEngine(t, g, testAlgo, 1000, 5)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mod  func([]walk.Chunk) []walk.Chunk
	}{
		{"duplicate walk", func(c []walk.Chunk) []walk.Chunk { return append(c, c[0]) }},
		{"missing walk", func(c []walk.Chunk) []walk.Chunk { return c[1:] }},
		{"walk id beyond batch", func(c []walk.Chunk) []walk.Chunk {
			x := cloneChunk(c[0])
			x.WalkIDs[len(x.WalkIDs)-1] = 5000
			return append(c[1:], x)
		}},
		{"vertex beyond graph", func(c []walk.Chunk) []walk.Chunk {
			x := cloneChunk(c[0])
			x.Vertices[0] = uint32(g.NumVertices())
			return append(c[1:], x)
		}},
		{"offsets inconsistent", func(c []walk.Chunk) []walk.Chunk {
			x := cloneChunk(c[0])
			x.Offsets = x.Offsets[:len(x.Offsets)-1]
			return append(c[1:], x)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dir := fileBucket(t)
			w, err := NewBatchWriter(ctx, b, "", testMeta("bad", 1000), g, WithRowGroupRows(100))
			if err != nil {
				t.Fatal(err)
			}
			var werr error
			for _, c := range tc.mod(slices.Clone(chunks)) {
				if werr = w.Write(ctx, cloneChunk(c)); werr != nil {
					break
				}
			}
			_, cerr := w.Commit(ctx)
			if werr == nil && cerr == nil {
				t.Fatal("bad input accepted")
			}
			if err := cmpErr(werr, cerr); !errors.Is(err, ErrBadChunk) {
				t.Fatalf("error %v, want ErrBadChunk", err)
			}
			if files := treeDigest(t, dir); len(files) != 0 {
				t.Fatalf("left behind: %v", files)
			}
		})
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func TestReorderWindowBounded(t *testing.T) {
	g := testGraph(t)
	const n = 4000
	chunks := runEngine(t, g, testAlgo, n, 13)
	b, _ := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "", testMeta("o", n), g, WithRowGroupRows(100), WithMemoryLimit(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort(ctx)
	// Withhold the first chunk: nothing can be uploaded, memory fills up.
	var werr error
	for _, c := range chunks[1:] {
		if werr = w.Write(ctx, cloneChunk(c)); werr != nil {
			break
		}
	}
	if !errors.Is(werr, ErrReorderWindow) {
		t.Fatalf("error %v, want ErrReorderWindow", werr)
	}
}

func TestMemoryLimitMustFitRowGroups(t *testing.T) {
	g := testGraph(t)
	b, _ := fileBucket(t)
	// 1000 walks of up to 21 vertices: 96,000 bytes per row group.
	if _, err := NewBatchWriter(context.Background(), b, "", testMeta("m", 10), g, WithRowGroupRows(1000), WithMemoryLimit(150_000)); err == nil {
		t.Fatal("a limit below two row groups was accepted")
	}
	w, err := NewBatchWriter(context.Background(), b, "", testMeta("m", 10), g, WithRowGroupRows(1000), WithMemoryLimit(200_000))
	if err != nil {
		t.Fatal(err)
	}
	w.Abort(context.Background())
}

func TestEmptyBatch(t *testing.T) {
	g := testGraph(t)
	b, _ := fileBucket(t)
	m := writeBatch(t, b, testMeta("e", 0), g, nil)
	if len(m.Files) != 0 || m.Walks != 0 {
		t.Fatalf("manifest %+v", m)
	}
}

func TestBatchLayoutEscapes(t *testing.T) {
	for _, tc := range []struct {
		prefix, kind, graph, algo, batch, want string
		err                                    bool
	}{
		{"walks/", output.KindWalks, "g", "deepwalk", "b-1", "walks/kind=walks/graph=g/algorithm=deepwalk/batch=b-1", false},
		{"", output.KindVisits, "a/b", "ppr", "x y", "kind=visits/graph=a%2Fb/algorithm=ppr/batch=x%20y", false},
		{"p", output.KindSamples, "..", "neighbor", "1.5", "p/kind=samples/graph=%2E%2E/algorithm=neighbor/batch=1.5", false},
		{"p/../q", output.KindWalks, "g", "ppr", "1", "", true},
		{"p", output.KindWalks, "g", "ppr", "", "", true},
		{"p", "", "g", "ppr", "1", "", true},
		{"p", "Walks", "g", "ppr", "1", "", true},
	} {
		l, err := output.BatchLayout(tc.prefix, tc.kind, tc.graph, tc.algo, tc.batch)
		if (err != nil) != tc.err || l.Dir != tc.want {
			t.Errorf("BatchLayout(%q,%q,%q,%q,%q) = %q, %v", tc.prefix, tc.kind, tc.graph, tc.algo, tc.batch, l.Dir, err)
		}
	}
	l := output.Layout{Dir: "d"}
	for key, want := range map[string]bool{
		l.AttemptPartKey(12, "0123456789ab"): true,
		l.PartKey(3):                         true, // named before attempts
		"d/part-00001.parquet.1a2b.tmp":      false,
		"d/_SUCCESS":                         false,
		"d/x/part-00001.parquet":             false,
		"dd/part-00001.parquet":              false,
	} {
		if got := l.IsPart(key); got != want {
			t.Errorf("isPart(%q) = %v, want %v", key, got, want)
		}
	}
	if got := l.AttemptPartKey(12, "0123456789ab"); got != "d/part-00012-0123456789ab.parquet" {
		t.Errorf("AttemptPartKey = %q", got)
	}
}

var _ = io.EOF

func readRows(data []byte) ([]Row, error) {
	return parquet.Read[Row](bytes.NewReader(data), int64(len(data)))
}

// A chunk's Starts (walk.Chunk.Starts), when an engine gives them, are
// what the start column is written from: the output is byte-identical to
// that of chunks without them, and starts that disagree with the walks
// change it (so they are read, and the walks are not). A Starts of the
// wrong length is a bad chunk.
func TestChunkStarts(t *testing.T) {
	g, chunks, opts, want := releaseCase(t)
	withStarts := func(shift uint32) []walk.Chunk {
		out := make([]walk.Chunk, len(chunks))
		for i, c := range chunks {
			c = cloneChunk(c)
			c.Starts = make([]uint32, c.Len())
			for k := range c.Starts {
				c.Starts[k] = (c.Walk(k)[0] + shift) % uint32(g.NumVertices())
			}
			out[i] = c
		}
		return out
	}
	b1, dir1 := fileBucket(t)
	writeBatch(t, b1, testMeta("x", releaseWalks), g, withStarts(0), opts...)
	if got := treeDigest(t, dir1); !slices.Equal(want, got) {
		t.Fatalf("chunks with their starts wrote other bytes:\n%v\n%v", want, got)
	}
	b2, dir2 := fileBucket(t)
	writeBatch(t, b2, testMeta("x", releaseWalks), g, withStarts(1), opts...)
	if got := treeDigest(t, dir2); slices.Equal(want, got) {
		t.Fatal("starts that disagree with the walks left the output unchanged: the writer does not read them")
	}
	w, err := NewBatchWriter(context.Background(), b2, "walks", testMeta("y", releaseWalks), g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	bad := withStarts(0)[0]
	bad.Starts = bad.Starts[1:]
	if err := w.Write(context.Background(), bad); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("a chunk with %d starts for %d walks: %v, want ErrBadChunk", len(bad.Starts), bad.Len(), err)
	}
	_ = w.Abort(context.Background())
}

// releaseCase is the chunk-release tests' batch: chunks of 97 walks over
// row groups of 500 walks (so chunks span groups), the writer options, and
// the digest of what a writer given owned chunks writes.
func releaseCase(t *testing.T) (*graph.Graph, []walk.Chunk, []Option, []string) {
	g := testGraph(t)
	chunks := runEngine(t, g, testAlgo, releaseWalks, 7)
	opts := []Option{WithRowGroupRows(500), WithFileBytes(30 << 10), WithEncoders(4)}
	b, dir := fileBucket(t)
	writeBatch(t, b, testMeta("x", releaseWalks), g, chunks, opts...)
	return g, chunks, opts, treeDigest(t, dir)
}

// commitMatches commits w and checks that the batch under dir is the one
// whose digest is want.
func commitMatches(t *testing.T, w *BatchWriter, dir string, want []string, what string) {
	t.Helper()
	if _, err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-w.Tidied()
	if got := treeDigest(t, dir); !slices.Equal(want, got) {
		t.Fatalf("%s gave other output:\n%v\n%v", what, want, got)
	}
}

// sortedReleaseCase is releaseCase with its chunks in walk id order, as
// an engine lending one buffer after another emits them.
func sortedReleaseCase(t *testing.T) (*graph.Graph, []walk.Chunk, []Option, []string) {
	g, chunks, opts, want := releaseCase(t)
	chunks = slices.Clone(chunks)
	slices.SortFunc(chunks, func(a, b walk.Chunk) int { return cmp.Compare(a.WalkIDs[0], b.WalkIDs[0]) })
	return g, chunks, opts, want
}

// releaseWalks is the walks of releaseCase's batch.
const releaseWalks = 4000

// WithChunkRelease hands each chunk back exactly once, and only when no
// encoder reads it any more: a callback that scribbles over the chunk it
// gets back leaves the output byte-identical to a writer without one.
func TestChunkReleaseAfterEncoding(t *testing.T) {
	g, chunks, opts, want := releaseCase(t)
	var mu sync.Mutex
	released := map[*uint32]int{}
	scribble := func(c walk.Chunk) {
		mu.Lock()
		released[&c.Vertices[0]]++
		mu.Unlock()
		clear(c.Vertices)
		clear(c.Offsets)
	}
	b2, dir2 := fileBucket(t)
	writeBatch(t, b2, testMeta("x", releaseWalks), g, chunks, append(opts, WithChunkRelease(scribble))...)
	if got := treeDigest(t, dir2); !slices.Equal(want, got) {
		t.Fatalf("a chunk was released while still read: outputs differ:\n%v\n%v", want, got)
	}
	if len(released) != len(chunks) {
		t.Fatalf("%d of %d chunks released", len(released), len(chunks))
	}
	for p, k := range released {
		if k != 1 {
			t.Fatalf("chunk at %p released %d times", p, k)
		}
	}
}

// A lent chunk (walk.Chunk.Lent) comes back without waiting for later
// chunks: the walks that wait in an incomplete row group are copied, so
// every chunk is released once the groups it completes are encoded, before
// the next Write; a callback that then scribbles over it leaves the output
// byte-identical to a writer given owned chunks. Without the copy the
// first chunk ending inside a row group is never released and this waits
// in vain.
func TestLentChunksReturnBeforeLaterChunks(t *testing.T) {
	g, chunks, opts, want := releaseCase(t)
	var mu sync.Mutex
	released := map[*uint32]int{}
	back := make(chan struct{}, len(chunks))
	scribble := func(c walk.Chunk) {
		mu.Lock()
		released[&c.Vertices[0]]++
		mu.Unlock()
		if c.Lent {
			clear(c.Vertices)
			back <- struct{}{}
		}
	}
	b2, dir2 := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b2, "walks", testMeta("x", releaseWalks), g, append(opts, WithChunkRelease(scribble))...)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chunks {
		lent := cloneChunk(c)
		lent.Lent = true
		if err := w.Write(ctx, lent); err != nil {
			t.Fatal(err)
		}
		select {
		case <-back:
		case <-time.After(10 * time.Second):
			t.Fatalf("lent chunk %d (walks %d..%d) not given back before the next Write", i, c.WalkIDs[0], c.WalkIDs[c.Len()-1])
		}
	}
	commitMatches(t, w, dir2, want, "lent chunks")
	for p, k := range released {
		if k != 1 {
			t.Fatalf("chunk at %p released %d times", p, k)
		}
	}
}

// Lent chunks in runs (walk.Chunk.LentRunEnd), as the GPU engine lends a
// batch slot's walks: the writer keeps the walks that wait only for walks
// of their own run, and copies exactly those that wait beyond it, the run's
// share of the row group its end falls in. A fake engine of one slot emits
// run r only once every chunk of run r-1 is back: keeping a walk that
// waits beyond its run would hang it, copying more than the run's
// share fails the count, and a chunk released while still read changes the
// output (the callback scribbles over it).
func TestLentRunsCopyOnlyWhatWaitsBeyondThem(t *testing.T) {
	g, chunks, opts, want := sortedReleaseCase(t)
	const perRun, slots, rows = 7, 1, 500 // chunks a run; runs lent at once; releaseCase's row group walks
	runs := (len(chunks) + perRun - 1) / perRun
	runOf := func(id uint64) int {
		for r := range runs {
			if end := chunks[min(len(chunks), (r+1)*perRun)-1]; id <= end.WalkIDs[end.Len()-1] {
				return r
			}
		}
		t.Fatalf("walk %d in no run", id)
		return -1
	}
	var mu sync.Mutex
	out := make([]int, runs) // lent chunks of each run not yet back
	back := make([]chan struct{}, runs)
	for r := range back {
		back[r] = make(chan struct{})
		out[r] = min(len(chunks), (r+1)*perRun) - r*perRun
	}
	scribble := func(c walk.Chunk) {
		if !c.Lent {
			return // the writer's own copy
		}
		clear(c.Vertices)
		r := runOf(c.WalkIDs[0])
		mu.Lock()
		defer mu.Unlock()
		if out[r]--; out[r] == 0 {
			close(back[r])
		}
	}
	b2, dir2 := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b2, "walks", testMeta("x", releaseWalks), g, append(opts, WithChunkRelease(scribble))...)
	if err != nil {
		t.Fatal(err)
	}
	var wantCopied int64
	for r := range runs {
		if r >= slots {
			select {
			case <-back[r-slots]:
			case <-time.After(10 * time.Second):
				t.Fatalf("run %d not given back before run %d: the writer keeps walks waiting beyond their run", r-slots, r)
			}
		}
		run := chunks[r*perRun : min(len(chunks), (r+1)*perRun)]
		last := run[len(run)-1]
		end := last.WalkIDs[last.Len()-1] + 1
		// The run's walks in the row group its end cuts (none when the end
		// is a group boundary or the batch's end) wait beyond it.
		cut := end / rows * rows
		for _, c := range run {
			lent := cloneChunk(c)
			lent.Lent, lent.LentRunEnd = true, end
			for k, id := range c.WalkIDs {
				if id >= cut && end%rows != 0 {
					wantCopied += int64(c.Offsets[k+1] - c.Offsets[k])
				}
			}
			if err := w.Write(ctx, lent); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitMatches(t, w, dir2, want, "lent runs")
	if got := w.CopiedLentVertices(); got != wantCopied || wantCopied == 0 {
		t.Fatalf("copied %d lent vertices, want %d (the runs' shares of the groups their ends cut)", got, wantCopied)
	}
	for r, n := range out {
		if n != 0 {
			t.Fatalf("%d chunks of run %d never given back", n, r)
		}
	}
}

// Every chunk given to Write comes back exactly once (WithChunkRelease),
// also when the batch fails: a chunk Write refuses at once, those held in
// row groups never encoded when the batch is aborted, and one written
// after the abort. An engine lending its buffers (walk.Chunk.Lent) would
// otherwise wait for them for ever.
func TestChunksComeBackAfterFailure(t *testing.T) {
	g, chunks, opts, _ := sortedReleaseCase(t)
	for _, tc := range []struct {
		name string
		bad  bool // the fifth Write gets a chunk with a walk id beyond the batch
	}{{"abort", false}, {"refused chunk", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			back := map[uint64]int{} // by first walk id: lent chunks given back
			release := func(c walk.Chunk) {
				if c.Lent {
					mu.Lock()
					back[c.WalkIDs[0]]++
					mu.Unlock()
				}
			}
			b, _ := fileBucket(t)
			ctx := context.Background()
			w, err := NewBatchWriter(ctx, b, "walks", testMeta("x", releaseWalks), g, append(opts, WithChunkRelease(release))...)
			if err != nil {
				t.Fatal(err)
			}
			var sent []uint64
			write := func(c walk.Chunk) error {
				lent := cloneChunk(c)
				// All walks promised: the writer keeps every chunk whose
				// groups wait, none copied.
				lent.Lent, lent.LentRunEnd = true, releaseWalks
				sent = append(sent, lent.WalkIDs[0])
				return w.Write(ctx, lent)
			}
			for i, c := range chunks[:len(chunks)/2] {
				if tc.bad && i == 4 {
					c = cloneChunk(c)
					c.WalkIDs[c.Len()-1] = releaseWalks + 7
					if err := write(c); !errors.Is(err, ErrBadChunk) {
						t.Fatalf("a walk id beyond the batch: %v, want ErrBadChunk", err)
					}
					mu.Lock()
					n := back[c.WalkIDs[0]]
					mu.Unlock()
					if n != 1 {
						t.Fatalf("the refused chunk came back %d times before Write returned, want 1", n)
					}
					break
				}
				if err := write(c); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			if err := write(chunks[len(chunks)-1]); err == nil {
				t.Fatal("a Write after Abort succeeded")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range sent {
				if back[id] != 1 {
					t.Fatalf("the chunk from walk %d came back %d times, want 1 (%d chunks written)", id, back[id], len(sent))
				}
			}
			if len(back) != len(sent) {
				t.Fatalf("%d chunks came back, %d were written", len(back), len(sent))
			}
		})
	}
}

// The parts' checksums come mostly from the encoders' sums of the column
// chunks (pages.SectionSum), and are right: readBatch checks every part's bytes
// against its manifest CRC32C.
func TestPartChecksumsFromEncoders(t *testing.T) {
	g, chunks, opts, _ := releaseCase(t)
	b, _ := fileBucket(t)
	w, m := writeBatchBy(t, b, testMeta("x", releaseWalks), g, chunks, opts...)
	if rows := readBatch(t, b, m); len(rows) != releaseWalks {
		t.Fatalf("read %d rows back, want %d", len(rows), releaseWalks)
	}
	if got := w.sumsCombined.Load(); got < m.Bytes*3/4 || got > m.Bytes {
		t.Fatalf("%d of %d part bytes' sums combined from the encoders', want most", got, m.Bytes)
	}
}

// countingWriter writes a section of a fragment from the fragment's own
// bytes, also when the section was partly read already (by the part
// writer's buffer), and any other reader as io.Copy would; the count and
// checksum cover exactly what was written. A section whose CRC32C the
// encoder computed is combined, not read again: a wrong known sum shows in
// the checksum; a sum known for another section or fragment is not used.
func TestCountingWriterReadFrom(t *testing.T) {
	frag := fragment(bytes.Repeat([]byte("0123456789abcdef"), 1000))
	other := fragment(bytes.Clone(frag))
	sum := func(off, n int64) pages.SectionSum {
		return pages.SectionSum{Off: off, N: n, CRC: crc32.Checksum(frag[off:off+n], castagnoli)}
	}
	section := func() io.Reader { return io.NewSectionReader(frag, 100, 5000) }
	for _, tc := range []struct {
		name     string
		r        func() io.Reader
		want     []byte
		known    []pages.SectionSum
		of       *byte
		combined int64
		wrong    bool // the known sum is wrong, so must the checksum be
	}{
		{name: "section", r: section, want: frag[100:5100]},
		{name: "section read in part", r: func() io.Reader {
			s := io.NewSectionReader(frag, 100, 5000)
			_, _ = s.Read(make([]byte, 777))
			return s
		}, want: frag[877:5100], known: []pages.SectionSum{sum(100, 5000)}, of: &frag[0]},
		{name: "other reader", r: func() io.Reader { return bytes.NewBufferString("walks") }, want: []byte("walks")},
		{name: "section, sum known", r: section, want: frag[100:5100], known: []pages.SectionSum{sum(0, 100), sum(100, 5000)}, of: &frag[0], combined: 5000},
		{name: "section, wrong sum known", r: section, want: frag[100:5100],
			known: []pages.SectionSum{{Off: 100, N: 5000, CRC: sum(100, 5000).CRC ^ 4}}, of: &frag[0], combined: 5000, wrong: true},
		{name: "section, sum known of another", r: section, want: frag[100:5100], known: []pages.SectionSum{sum(100, 4999), sum(99, 5000)}, of: &frag[0]},
		{name: "section, sum known of another fragment", r: section, want: frag[100:5100], known: []pages.SectionSum{sum(100, 5000)}, of: &other[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var total atomic.Int64
			c := &countingWriter{w: &out, total: &total, known: tc.known, knownOf: tc.of}
			if _, err := c.Write([]byte("PAR1")); err != nil {
				t.Fatal(err)
			}
			r := tc.r()
			n, err := c.ReadFrom(r)
			if err != nil || n != int64(len(tc.want)) || !bytes.Equal(out.Bytes()[4:], tc.want) {
				t.Fatalf("ReadFrom wrote %d bytes (%v), want %d", n, err, len(tc.want))
			}
			want := crc32.Checksum(append([]byte("PAR1"), tc.want...), castagnoli)
			if c.n != n+4 || total.Load() != n+4 || (c.Sum32() == want) == tc.wrong {
				t.Fatalf("counted %d bytes, total %d, checksum %08x (want %08x, wrong known sum %v)", c.n, total.Load(), c.Sum32(), want, tc.wrong)
			}
			if c.combined != tc.combined {
				t.Fatalf("%d bytes' sums combined, want %d", c.combined, tc.combined)
			}
			if rest, _ := io.ReadAll(r); len(rest) != 0 {
				t.Fatalf("%d bytes of the reader left unread", len(rest))
			}
		})
	}
}

// TestTailSharedByParts checks a batch's tail: the row groups left once no
// more than a full part's remain go to tailParts parts of equal share, so
// that they are written at once, and every other part is full. The walks
// come back whole and in order (the read-back checks of writeBatch).
func TestTailSharedByParts(t *testing.T) {
	g := testGraph(t)
	const n = 4000
	chunks := runEngine(t, g, testAlgo, n, 7)
	b, _ := fileBucket(t)
	m := writeBatch(t, b, testMeta("x", n), g, chunks, WithRowGroupRows(100), WithFileBytes(30<<10))
	groups := make([]int, len(m.Files))
	total := 0
	for i, f := range m.Files {
		groups[i] = f.RowGroups
		total += f.RowGroups
	}
	if total != n/100 {
		t.Fatalf("%d row groups in the parts %v, want %d", total, groups, n/100)
	}
	// The full parts: each ends at the file size, so the tail starts after
	// the first part whose successor is smaller than it.
	tail := 1
	for tail < len(groups) && groups[tail] >= groups[tail-1] {
		tail++
	}
	if tail == len(groups) || tail < 2 {
		t.Fatalf("row groups by part %v: want full parts, then a tail", groups)
	}
	full, rest := groups[tail-1], groups[tail:]
	left := 0
	for _, k := range rest {
		left += k
	}
	share := tailShare(int64(left), int64(full))
	if share == 0 || left > full {
		t.Fatalf("row groups by part %v: a tail of %d row groups after full parts of %d", groups, left, full)
	}
	for i, k := range rest {
		if k != int(share) && !(i == len(rest)-1 && k < int(share)) {
			t.Fatalf("row groups by part %v: the tail's parts take %d each", groups, share)
		}
	}
	if len(rest) != min(tailParts, (left+int(share)-1)/int(share)) {
		t.Fatalf("row groups by part %v: %d tail parts, want up to %d", groups, len(rest), tailParts)
	}
}

func TestTailShare(t *testing.T) {
	for _, c := range []struct{ remaining, lastFull, want int64 }{
		{10, 0, 0},  // no full part yet: a small batch is one part
		{17, 16, 0}, // more than a full part left
		{16, 16, 4}, {15, 16, 4}, {13, 16, 4}, {12, 16, 3}, {3, 16, 1}, {1, 16, 1},
	} {
		if got := tailShare(c.remaining, c.lastFull); got != c.want {
			t.Errorf("tailShare(%d, %d) = %d, want %d", c.remaining, c.lastFull, got, c.want)
		}
	}
}
