package sink

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walkstage/walkstage/internal/testseaweed"
	"github.com/walkstage/walkstage/walk"
)

// SeaweedFS (`weed server -s3`, its default S3 settings) run as a separate
// process is the second S3 server the sink meets over the wire, beside
// versitygw: a batch of several parts, its rewrite, a multipart part and
// a cancelled upload, under the client's defaults (unsigned bodies with a
// CRC header) and with signed bodies. The binary is taken from $WEED, then
// PATH, then ./bin at the repository root. Without it the test skips,
// unless WALKSTAGE_INTEGRATION=1, when it fails.
func TestSeaweedFS(t *testing.T) {
	s3Env(t)
	endpoint := testseaweed.Start(t)
	ctx := context.Background()
	base := "s3://walks?" + url.Values{"endpoint": {endpoint}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
	var c *s3.Client
	if !openS3(t, base).As(&c) {
		t.Fatal("not an S3 bucket")
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: ptr("walks")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	big := ringGraph(t, 1<<20)
	const n = 100000 // ~27 MB uncompressed: multipart uploads of 5 MiB parts
	bigChunks := bigChunks(big, n, 80, 1000)
	for i, params := range []string{"", "&unsigned_payload=false"} {
		t.Run(fmt.Sprintf("params=%q", params), func(t *testing.T) {
			b := openS3(t, base+params)
			g := testGraph(t)
			const small = 4000
			chunks := runEngine(t, g, testAlgo, small, 41)
			m := writeBatch(t, b, testMeta(fmt.Sprintf("swfs-%d", i), small), g, chunks, WithRowGroupRows(500), WithFileBytes(30<<10))
			if len(m.Files) < 2 {
				t.Fatalf("%d parts, want several", len(m.Files))
			}
			compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, small))
			// Rewrite with fewer parts: replaced, stale parts gone.
			m2 := writeBatch(t, b, testMeta(fmt.Sprintf("swfs-%d", i), small), g, chunks)
			if keys := listPrefix(t, b, path.Dir(m2.Files[0].Key)+"/"); len(keys) != 2 {
				t.Fatalf("after rewrite: %v", keys)
			}
			compareRows(t, readBatch(t, b, m2), expectedRows(g, chunks, small))

			meta := BatchMeta{BatchID: fmt.Sprintf("swfs-big-%d", i), Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80},
				Seed: 1, Engine: "cpu", WalkstageVersion: "test", Walks: n}
			mb := writeBatch(t, b, meta, big, bigChunks, WithCompression(None), WithUploadBuffer(5<<20, 2), WithFileBytes(20<<20))
			if mb.Files[0].Bytes < 15<<20 {
				t.Fatalf("first part %d bytes: too small to need a multipart upload", mb.Files[0].Bytes)
			}
			compareRows(t, readBatchMeta(t, b, mb), expectedRows(big, bigChunks, n))
		})
	}
}
