package sink

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// s3Env points the AWS SDK at dummy credentials and no shared config, so
// tests never pick up a developer's real account.
func s3Env(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", "walkstage")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "walkstage-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_PROFILE", "")
}

// fakeS3 serves gofakes3 with an in-memory backend over TCP and returns an
// s3:// URL for a fresh bucket on it.
func fakeS3(t testing.TB) (bucketURL string) {
	t.Helper()
	s3Env(t)
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	return "s3://walks?" + url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
}

func openS3(t testing.TB, u string) *blob.Bucket {
	t.Helper()
	b, err := OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// listAll returns every key in the bucket.
func listAll(t testing.TB, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// pendingUploads lists multipart uploads the store still holds open.
func pendingUploads(t testing.TB, b *blob.Bucket) int {
	t.Helper()
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("bucket is not S3")
	}
	out, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: ptr("walks")})
	if err != nil && strings.Contains(err.Error(), "NoSuchUpload") {
		return 0 // gofakes3's answer for a bucket that never had an upload
	}
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	return len(out.Uploads)
}

func ptr[T any](v T) *T { return &v }

func TestS3RoundTrip(t *testing.T) {
	b := openS3(t, fakeS3(t))
	g := testGraph(t)
	const n = 4000
	chunks := runEngine(t, g, testAlgo, n, 31)
	m := writeBatch(t, b, testMeta("s3", n), g, chunks, WithRowGroupRows(600), WithFileBytes(30<<10))
	if len(m.Files) < 2 {
		t.Fatalf("%d parts, want several", len(m.Files))
	}
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
	// A rewrite with fewer parts replaces the batch and drops stale parts.
	m2 := writeBatch(t, b, testMeta("s3", n), g, chunks, WithRowGroupRows(4000))
	if keys := listAll(t, b); len(keys) != len(m2.Files)+1 {
		t.Fatalf("after rewrite: %v", keys)
	}
	compareRows(t, readBatch(t, b, m2), expectedRows(g, chunks, n))
}

// bigChunks synthesises walks of full length over a dense-id graph, without
// the engine, sized so a part needs a multipart upload.
func bigChunks(g *graph.Graph, walks, length, per int) []walk.Chunk {
	var out []walk.Chunk
	x := uint64(0x9e3779b97f4a7c15)
	nv := uint64(g.NumVertices())
	for lo := 0; lo < walks; lo += per {
		hi := min(walks, lo+per)
		c := walk.Chunk{Offsets: []uint32{0}}
		for id := lo; id < hi; id++ {
			c.WalkIDs = append(c.WalkIDs, uint64(id))
			for range length + 1 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				c.Vertices = append(c.Vertices, uint32(x%nv))
			}
			c.Offsets = append(c.Offsets, uint32(len(c.Vertices)))
		}
		out = append(out, c)
	}
	return out
}

func ringGraph(t testing.TB, n int) *graph.Graph {
	t.Helper()
	edges := make([]graph.Edge, n)
	for i := range edges {
		edges[i] = graph.Edge{Src: int64(i), Dst: int64((i + 1) % n)}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "ring", DenseIDs: true, NumVertices: n})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Cancelling while a part is mid-way through a multipart upload must leave
// no object, no open multipart upload and no _SUCCESS.
func TestS3CancelMidUpload(t *testing.T) {
	b := openS3(t, fakeS3(t))
	g := ringGraph(t, 1<<20)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 100000 // ~27 MB: one part, several 5 MiB upload parts
	chunks := bigChunks(g, n, 80, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	meta := BatchMeta{BatchID: "cancel", Algorithm: algo, Seed: 1, Engine: "cpu", Walks: n}
	w, err := NewBatchWriter(ctx, b, "p", meta, g, WithCompression(None), WithRowGroupRows(4000), WithUploadBuffer(5<<20, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks[:len(chunks)-1] {
		if err := w.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until at least one 5 MiB upload part has been handed over.
	deadline := time.Now().Add(time.Minute)
	for w.BytesWritten() < 12<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes written", w.BytesWritten())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The last chunk is withheld, so the part cannot complete: its
	// multipart upload must show up and stay open.
	for pendingUploads(t, b) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no multipart upload open before cancel")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if _, err := w.Commit(context.Background()); err == nil {
		t.Fatal("Commit succeeded with a walk chunk missing after cancellation")
	}
	if err := w.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := listAll(t, b); len(keys) != 0 {
		t.Fatalf("visible after cancel: %v", keys)
	}
	if up := pendingUploads(t, b); up != 0 {
		t.Fatalf("%d multipart uploads left open", up)
	}
	if _, err := ReadManifest(context.Background(), b, w.Layout().SuccessKey()); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("manifest: %v", err)
	}
}
