package sink

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/testversity"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// versitygw is a real S3 gateway (github.com/versity/versitygw) run as a
// separate process with its POSIX backend: signatures, multipart uploads
// and their abort go over the wire exactly as against a production store.
//
// The binary is taken from $VERSITYGW, then PATH, then ./bin at the
// repository root (make tools installs it there). Without it the test
// skips, unless WALKSTAGE_INTEGRATION=1, when it fails.
func versityGW(t testing.TB) (bucketURL string) {
	t.Helper()
	s3Env(t)
	endpoint := testversity.Start(t)
	u := "s3://walks?" + url.Values{"endpoint": {endpoint}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
	b := openS3(t, u)
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not an S3 bucket")
	}
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: ptr("walks")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return u
}

func TestVersityGW(t *testing.T) {
	u := versityGW(t)
	b := openS3(t, u)
	ctx := context.Background()

	t.Run("round trip from the engine", func(t *testing.T) {
		g := testGraph(t)
		const n = 4000
		chunks := runEngine(t, g, testAlgo, n, 41)
		m := writeBatch(t, b, testMeta("vgw", n), g, chunks, WithRowGroupRows(500), WithFileBytes(30<<10))
		if len(m.Files) < 2 {
			t.Fatalf("%d parts, want several", len(m.Files))
		}
		compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
		// Rewrite with fewer parts: replaced, stale parts gone.
		m2 := writeBatch(t, b, testMeta("vgw", n), g, chunks)
		if keys := listPrefix(t, b, path.Dir(m2.Files[0].Key)+"/"); len(keys) != 2 {
			t.Fatalf("after rewrite: %v", keys)
		}
		compareRows(t, readBatch(t, b, m2), expectedRows(g, chunks, n))
	})

	g := ringGraph(t, 1<<20)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 100000 // ~27 MB uncompressed: multipart uploads of 5 MiB parts
	chunks := bigChunks(g, n, 80, 1000)
	meta := BatchMeta{BatchID: "big", Algorithm: algo, Seed: 1, Engine: "cpu", WalkstageVersion: "test", Walks: n}

	t.Run("multipart round trip", func(t *testing.T) {
		m := writeBatch(t, b, meta, g, chunks, WithCompression(None), WithUploadBuffer(5<<20, 2), WithFileBytes(20<<20))
		if m.Files[0].Bytes < 15<<20 {
			t.Fatalf("first part %d bytes: too small to need a multipart upload", m.Files[0].Bytes)
		}
		compareRows(t, readBatchMeta(t, b, m), expectedRows(g, chunks, n))
	})

	// The gateway checks every request's signature: bodies sent as
	// UNSIGNED-PAYLOAD, single and multipart, are accepted and read back.
	t.Run("unsigned payload", func(t *testing.T) {
		ub := openS3(t, u+"&unsigned_payload=true")
		m := meta
		m.BatchID = "unsigned"
		man := writeBatch(t, ub, m, g, chunks, WithCompression(None), WithUploadBuffer(5<<20, 2), WithFileBytes(20<<20))
		if man.Files[0].Bytes < 15<<20 {
			t.Fatalf("first part %d bytes: too small to need a multipart upload", man.Files[0].Bytes)
		}
		compareRows(t, readBatchMeta(t, ub, man), expectedRows(g, chunks, n))
		small := runEngine(t, testGraph(t), testAlgo, 1000, 43)
		compareRows(t, readBatch(t, ub, writeBatch(t, ub, testMeta("vgw-unsigned", 1000), testGraph(t), small)), expectedRows(testGraph(t), small, 1000))
	})

	// With checksums on (when_supported), a single PUT carries its CRC32C
	// in a header, which the gateway checks; multipart uploads go through
	// gocloud's writer. Both, signed and unsigned, are accepted and read
	// back.
	t.Run("crc32c header", func(t *testing.T) {
		for i, extra := range []string{"", "&unsigned_payload=true"} {
			cb := openS3(t, u+"&request_checksum_calculation=when_supported"+extra)
			small := runEngine(t, testGraph(t), testAlgo, 1000, 44)
			m := testMeta(fmt.Sprintf("vgw-crc32c-%d", i), 1000)
			compareRows(t, readBatch(t, cb, writeBatch(t, cb, m, testGraph(t), small)), expectedRows(testGraph(t), small, 1000))
		}
	})

	t.Run("cancel mid-upload", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		m := meta
		m.BatchID = "cancelled"
		w, err := NewBatchWriter(cctx, b, "walks", m, g, WithCompression(None), WithRowGroupRows(4000), WithUploadBuffer(5<<20, 2))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunks[:len(chunks)-1] {
			if err := w.Write(cctx, c); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for w.BytesWritten() < 12<<20 || pendingUploads(t, b) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("no multipart upload in progress (%d bytes written)", w.BytesWritten())
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if _, err := w.Commit(ctx); err == nil {
			t.Fatal("Commit succeeded after cancellation")
		}
		if err := w.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := listPrefix(t, b, w.Layout().Dir+"/"); len(keys) != 0 {
			t.Fatalf("visible after cancel: %v", keys)
		}
		if up := pendingUploads(t, b); up != 0 {
			t.Fatalf("%d multipart uploads left open", up)
		}
		if _, err := output.ReadManifest(ctx, b, w.Layout().SuccessKey()); !errors.Is(err, output.ErrNoManifest) {
			t.Fatalf("manifest: %v", err)
		}
	})

	t.Run("check", func(t *testing.T) {
		if err := store.Check(ctx, b, "walks"); err != nil {
			t.Fatalf("usable bucket: %v", err)
		}
		// Credentials the gateway does not know: a configuration error.
		t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
		bad := openS3(t, u)
		if err := store.Check(ctx, bad, "walks"); !errors.Is(err, store.ErrConfig) {
			t.Fatalf("wrong secret: %v, want store.ErrConfig", err)
		}
	})

	// Last: it counts every upload the bucket holds.
	t.Run("sweep aborts stale uploads", func(t *testing.T) { sweepUploads(t, b) })
}

// readBatchMeta is readBatch for batches whose metadata differs from
// testMeta's.
func readBatchMeta(t *testing.T, b *blob.Bucket, m *output.Manifest) []Row {
	t.Helper()
	var rows []Row
	for _, f := range m.Files {
		data, err := b.ReadAll(context.Background(), f.Key)
		if err != nil {
			t.Fatal(err)
		}
		part, err := readRows(data)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	return rows
}

func listPrefix(t testing.TB, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// The phantom manifest a SIGKILL of versitygw left (issue 32), made as the
// crash makes it: the key's sidecar metadata without its data file. Every
// create of the key is refused, reads find nothing and a DELETE changes
// nothing; the commit's recovery (a plain put, read back) ends it, and the
// output is whole.
func TestVersityGWPhantomManifest(t *testing.T) {
	s3Env(t)
	endpoint, data, _ := testversity.Dirs(t)
	u := "s3://walks?" + url.Values{"endpoint": {endpoint}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
	b := openS3(t, u)
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not an S3 bucket")
	}
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: ptr("walks")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	g := testGraph(t)
	const n = 1000
	chunks := runEngine(t, g, testAlgo, n, 37)
	w := writeAll(t, b, fpMeta("phantom", n, "fp"), chunks, WithRowGroupRows(250), WithFileBytes(1), WithCallTimeout(300*time.Millisecond))
	key := w.Layout().SuccessKey()
	if err := b.WriteAll(ctx, key, []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(data, "walks", filepath.FromSlash(key))); err != nil {
		t.Fatalf("remove the manifest's data file, keeping its metadata: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: ptr("walks"), Key: &key, Body: strings.NewReader("{}"), IfNoneMatch: ptr("*")}); err == nil {
		t.Fatal("versitygw accepted a create of the phantom: the state is not the one the crash left")
	}
	m, err := w.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	checkOutput(t, b, w.Layout(), m)
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
}
