package sink

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/fakes3"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

func s3Env(t testing.TB) { fakes3.Env(t) }

// fakeS3 serves gofakes3 over TCP and returns an s3:// URL for a fresh
// bucket on it.
func fakeS3(t testing.TB) (bucketURL string) { return fakes3.Serve(t, nil) }

// serveFakeS3 is fakeS3 through the handler wrap builds around it.
func serveFakeS3(t testing.TB, wrap func(faker http.Handler) http.Handler) (bucketURL string) {
	return fakes3.Serve(t, wrap)
}

func openS3(t testing.TB, u string) *blob.Bucket {
	t.Helper()
	b, err := store.OpenBucket(context.Background(), u)
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
	if _, err := output.ReadManifest(context.Background(), b, w.Layout().SuccessKey()); !errors.Is(err, output.ErrNoManifest) {
		t.Fatalf("manifest: %v", err)
	}
}

// hangingS3 serves gofakes3 through a switch: once hang is set, requests
// get no answer (the connection stays open) until the client gives up,
// like a store that stopped responding.
func hangingS3(t testing.TB) (bucketURL string, hang *atomic.Bool) {
	t.Helper()
	hang = new(atomic.Bool)
	release := make(chan struct{})
	u := serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() {
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return
			}
			faker.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(release) }) // runs first: unblocks handlers so Close can return
	return u, hang
}

// A store that stops answering turns into an error within the configured
// deadlines, wherever the writer is: uploading a part (the first, just after
// it opened), writing the manifest; and for Lookup, Check and Sweep.
func TestHungStoreTimesOut(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	chunks := runEngine(t, g, testAlgo, n, 91)
	ctx := context.Background()
	deadlines := []Option{WithCallTimeout(200 * time.Millisecond), WithUploadStallTimeout(300 * time.Millisecond)}
	opts := append([]Option{WithRowGroupRows(500), WithFileBytes(1)}, deadlines...)
	storeDeadlines := []store.Option{store.WithCallTimeout(200 * time.Millisecond)}
	// bounded fails the test if f does not return in far more time than the
	// deadlines allow; how long it took is not asserted.
	bounded := func(t *testing.T, what string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s succeeded against a hung store", what)
			}
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s stalled on a hung store", what)
			return nil
		}
	}
	writeHung := func(t *testing.T, b *blob.Bucket, hang *atomic.Bool, opts []Option) error {
		hang.Store(true)
		w, err := NewBatchWriter(ctx, b, "walks", fpMeta("h", n, "fp"), g, opts...)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		for _, c := range chunks {
			if err := w.Write(ctx, cloneChunk(c)); err != nil {
				return err
			}
		}
		_, err = w.Commit(ctx)
		if err != nil && !errors.Is(err, store.ErrStalled) {
			t.Errorf("error %v does not say the upload stalled", err)
		}
		return err
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error
	}{
		// Opening a writer on a store does no I/O (leftovers are removed
		// by the commit, or when an attempt ends without one): the hung
		// store shows at the first part, and the commit says so in time.
		{"open and write", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			return writeHung(t, b, hang, opts)
		}},
		{"open and write, sweeping while writing", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			return writeHung(t, b, hang, append(opts, WithSweepWhileWriting()))
		}},
		{"manifest", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			w := writeAll(t, b, fpMeta("h", n, "fp"), chunks, opts...)
			for w.WalksWritten() < n { // every part uploaded
				time.Sleep(5 * time.Millisecond)
			}
			hang.Store(true)
			_, err := w.Commit(ctx)
			return err
		}},
		{"lookup", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			writeBatch(t, b, fpMeta("h", n, "fp"), g, chunks, opts...)
			hang.Store(true)
			_, err := Lookup(ctx, b, "walks", "h", "fp", deadlines...)
			return err
		}},
		{"check", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			hang.Store(true)
			err := store.Check(ctx, b, "walks", storeDeadlines...)
			if errors.Is(err, store.ErrConfig) {
				t.Errorf("a hung store is not a configuration error: %v", err)
			}
			return err
		}},
		{"sweep", func(t *testing.T, b *blob.Bucket, hang *atomic.Bool) error {
			hang.Store(true)
			_, err := store.Sweep(ctx, b, "walks", time.Hour, storeDeadlines...)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, hang := hangingS3(t)
			b := openS3(t, u)
			err := bounded(t, tc.name, func() error { return tc.run(t, b, hang) })
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

// Sweep aborts multipart uploads under the prefix that are older than the
// age given, as a killed writer leaves them, and no others.
func TestSweepAbortsStaleUploads(t *testing.T) {
	b := openS3(t, fakeS3(t))
	sweepUploads(t, b)
}

// sweepUploads opens uploads as a killed writer leaves them (inside and
// outside the prefix) and checks that Sweep aborts exactly the stale ones
// under the prefix.
func sweepUploads(t *testing.T, b *blob.Bucket) {
	t.Helper()
	ctx := context.Background()
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not S3")
	}
	open := func(key string) {
		if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: ptr("walks"), Key: &key}); err != nil {
			t.Fatal(err)
		}
	}
	inside := "walks/kind=walks/graph=g/algorithm=deepwalk/batch=k/part-00000-0123456789ab.parquet"
	open(inside)
	open("other/graph=g/algorithm=deepwalk/batch=k/part-00000-0123456789ab.parquet")
	if st, err := store.Sweep(ctx, b, "walks", time.Hour); err != nil || st.UploadsAborted != 0 {
		t.Fatalf("young uploads: %+v, %v; want none aborted", st, err)
	}
	time.Sleep(1100 * time.Millisecond) // S3 reports Initiated in whole seconds
	st, err := store.Sweep(ctx, b, "walks/", time.Second)
	if err != nil || st.UploadsAborted != 1 {
		t.Fatalf("Sweep = %+v, %v; want one upload aborted", st, err)
	}
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: ptr("walks")})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range out.Uploads {
		if *u.Key == inside {
			t.Errorf("upload of %s still open", inside)
		}
	}
	if len(out.Uploads) != 1 {
		t.Errorf("%d uploads open, want the one outside the prefix", len(out.Uploads))
	}
}

// A redelivered batch aborts the multipart uploads a killed writer of it
// left open, once they are older than WithStaleAfter.
// openOrphanUpload opens the multipart upload of part 0 of an attempt of
// meta's batch, as a writer killed mid-part leaves it.
func openOrphanUpload(t *testing.T, b *blob.Bucket, g *graph.Graph, meta BatchMeta) {
	t.Helper()
	l, err := output.BatchLayout("walks", output.KindWalks, g.Name, meta.Algorithm.Kind.String(), meta.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	var c *s3.Client
	b.As(&c)
	if _, err := c.CreateMultipartUpload(context.Background(), &s3.CreateMultipartUploadInput{Bucket: ptr("walks"), Key: ptr(l.AttemptPartKey(0, "0123456789ab"))}); err != nil {
		t.Fatal(err)
	}
}

func TestRedeliveryAbortsOrphanedUpload(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"at open", nil}, {"while writing", []Option{WithSweepWhileWriting()}}} {
		t.Run(mode.name, func(t *testing.T) {
			b := openS3(t, fakeS3(t))
			g := testGraph(t)
			ctx := context.Background()
			meta := fpMeta("orphan", 500, "fp")
			openOrphanUpload(t, b, g, meta)
			w, err := NewBatchWriter(ctx, b, "walks", meta, g, append([]Option{WithStaleAfter(time.Hour)}, mode.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			w.Abort(ctx)
			if up := pendingUploads(t, b); up != 1 {
				t.Fatalf("%d uploads open; a young upload may be a live writer's and must stay", up)
			}
			time.Sleep(1100 * time.Millisecond) // S3 reports Initiated in whole seconds
			w, err = NewBatchWriter(ctx, b, "walks", meta, g, append([]Option{WithStaleAfter(time.Second)}, mode.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			w.Abort(ctx)
			if up := pendingUploads(t, b); up != 0 {
				t.Fatalf("%d uploads left open after redelivery", up)
			}
		})
	}
}

// A batch that commits lists the store's multipart uploads once, after its
// manifest stands, to abort what killed attempts left: a listing at open
// as well was one more request a batch for nothing the commit's would not
// remove. (TestRedeliveryAbortsOrphanedUpload covers an attempt that ends
// without a manifest.)
func TestCommitListsUploadsOnce(t *testing.T) {
	var listings atomic.Int64
	b := openS3(t, serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Query().Has("uploads") {
				listings.Add(1)
			}
			faker.ServeHTTP(w, r)
		})
	}))
	g := testGraph(t)
	meta := fpMeta("once", 500, "fp")
	openOrphanUpload(t, b, g, meta)
	listings.Store(0)
	for _, mode := range [][]Option{nil, {WithSweepWhileWriting()}} {
		writeBatch(t, b, meta, g, runEngine(t, g, testAlgo, 500, 31), mode...)
	}
	if n := listings.Load(); n != 2 {
		t.Errorf("%d listings of multipart uploads for two commits, want 2", n)
	}
	if up := pendingUploads(t, b); up != 0 {
		t.Errorf("%d uploads open after the commits; the killed attempt's must go", up)
	}
}

// A manifest put whose answer never comes is resolved by reading the
// manifest back: the commit succeeds when the put landed, and otherwise
// fails keeping its parts (the put may still land later), which the next
// successful commit of the batch removes.
func TestManifestPutWithoutAnswer(t *testing.T) {
	g := testGraph(t)
	const n = 1000
	chunks := runEngine(t, g, testAlgo, n, 93)
	ctx := context.Background()
	opts := []Option{WithRowGroupRows(250), WithFileBytes(1), WithCallTimeout(300 * time.Millisecond)}
	for _, tc := range []struct {
		name   string
		landed bool
	}{{"put landed", true}, {"put lost", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s3Env(t)
			backend := s3mem.New()
			if err := backend.CreateBucket("walks"); err != nil {
				t.Fatal(err)
			}
			faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
			var swallow atomic.Bool
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if swallow.Load() && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+output.SuccessName) {
					if tc.landed {
						faker.ServeHTTP(httptest.NewRecorder(), r) // stored, answer dropped
					}
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				faker.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			b := openS3(t, "s3://walks?"+url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode())

			w := writeAll(t, b, fpMeta("q", n, "fp"), chunks, opts...)
			swallow.Store(true)
			m, err := w.Commit(ctx)
			dir := w.Layout().Dir
			if tc.landed {
				if err != nil {
					t.Fatalf("Commit: %v; the manifest landed", err)
				}
				if got, want := batchKeys(t, b, dir), manifestKeys(m, dir); !slices.Equal(got, want) {
					t.Fatalf("directory holds %v, want %v", got, want)
				}
				return
			}
			if !errors.Is(err, errUnsure) {
				t.Fatalf("Commit: %v, want errUnsure", err)
			}
			if parts := batchKeys(t, b, dir); len(parts) == 0 {
				t.Fatal("parts deleted although the manifest put may still land")
			}
			swallow.Store(false)
			m = writeBatch(t, b, fpMeta("q", n, "fp"), g, chunks, opts...)
			if got, want := batchKeys(t, b, dir), manifestKeys(m, dir); !slices.Equal(got, want) {
				t.Fatalf("after the retry the directory holds %v, want %v", got, want)
			}
		})
	}
}

// TestCommitAbortsKilledAttemptsUploads: an attempt killed mid-part leaves
// a multipart upload under its own part name, which no later attempt
// resumes. Once a manifest stands, every upload still open under the batch
// is aborted, however young (the chaos suite found them left for good).
func TestCommitAbortsKilledAttemptsUploads(t *testing.T) {
	b := openS3(t, fakeS3(t))
	g := testGraph(t)
	const n = 500
	meta := fpMeta("killed", n, "fp")
	openOrphanUpload(t, b, g, meta)
	time.Sleep(1100 * time.Millisecond) // S3 reports Initiated in whole seconds
	writeBatch(t, b, meta, g, runEngine(t, g, testAlgo, n, 5), WithStaleAfter(time.Hour))
	if up := pendingUploads(t, b); up != 0 {
		t.Fatalf("%d uploads left open under a committed batch", up)
	}
}

// Uploads go over plain HTTP as UNSIGNED-PAYLOAD unless
// unsigned_payload=false, when the SDK signs each body's SHA-256. Either
// way the objects read back.
func TestUnsignedPayload(t *testing.T) {
	s3Env(t)
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	var mu sync.Mutex
	hashes := map[string]int{} // x-amz-content-sha256 of PUTs: "UNSIGNED-PAYLOAD" or "hex"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			h := r.Header.Get("X-Amz-Content-Sha256")
			if len(h) == 64 {
				h = "hex"
			}
			mu.Lock()
			hashes[h]++
			mu.Unlock()
		}
		faker.Server().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	base := "s3://walks?" + url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
	g := testGraph(t)
	chunks := runEngine(t, g, testAlgo, 500, 7)
	for _, tc := range []struct {
		param, want string
	}{{"", "UNSIGNED-PAYLOAD"}, {"&unsigned_payload=false", "hex"}, {"&unsigned_payload=true", "UNSIGNED-PAYLOAD"}} {
		mu.Lock()
		clear(hashes)
		mu.Unlock()
		b := openS3(t, base+tc.param)
		m := writeBatch(t, b, testMeta("u"+tc.want, 500), g, chunks)
		compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, 500))
		mu.Lock()
		if hashes[tc.want] == 0 || len(hashes) != 1 {
			t.Errorf("%q: PUT payload hashes %v, want only %s", tc.param, hashes, tc.want)
		}
		mu.Unlock()
	}
	if _, err := store.OpenBucket(context.Background(), base+"&unsigned_payload=maybe"); err == nil {
		t.Error("unsigned_payload=maybe accepted")
	}
}

// An abort that cuts a part's upload short leaves no part behind even when
// the store finishes the request after its client gave up: the gofakes3
// wrapper holds the first part's PUT until the writer cancels it, then
// stores it 60 ms later. Abort deletes the cut part, and again after short
// pauses; with a single delete the part stays.
func TestAbortDeletesPartStoredAfterCancel(t *testing.T) {
	held := make(chan struct{})
	stored := make(chan struct{})
	var once sync.Once
	u := serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/part-00000-") || r.URL.Query().Has("uploadId") {
				faker.ServeHTTP(rw, r)
				return
			}
			first := false
			once.Do(func() { first = true })
			if !first {
				faker.ServeHTTP(rw, r)
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			close(held)
			<-r.Context().Done() // the client gave up
			time.Sleep(60 * time.Millisecond)
			late := r.Clone(context.Background())
			late.Body = io.NopCloser(bytes.NewReader(body))
			faker.ServeHTTP(httptest.NewRecorder(), late)
			close(stored)
		})
	})
	b := openS3(t, u)
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 13)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", testMeta("cut", n), g, WithRowGroupRows(100), WithFileBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held:
		default:
			continue
		}
		break
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first part was never uploaded")
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	<-stored
	if keys := listPrefix(t, b, w.Layout().Dir+"/"); len(keys) != 0 {
		t.Fatalf("after abort the batch directory holds %v", keys)
	}
}
