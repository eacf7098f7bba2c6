package loadgen

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/store"
)

// PlainUpload is a measurement of the object store alone: objects of random
// bytes uploaded the way the sink uploads its parts, several at once, with
// no Parquet, no Kafka and no manifest. Run beside a stage measurement it
// shows the store's own ceiling for the same byte volume.
//
// On S3 an object of up to 16 MiB goes as the sink's parts go
// (store.S3PutObject: one PUT of the body as it is, its CRC32C in a
// header), a larger one through gocloud's multipart writer with the sink's
// buffer and concurrency per object, as the sink's larger parts do.
// Through gocloud's writer a small object was a different request (a
// CRC32 header, the body copied into the transfer manager's buffer), so
// the ceiling was not measured with the requests the stage sends; Via
// "gocloud" keeps that form for comparison.
type PlainUpload struct {
	BucketURL   string
	Prefix      string // key prefix of the objects (they are deleted after)
	Bytes       int64  // total volume
	ObjectBytes int64  // size of each object
	Parallel    int    // objects uploaded at once
	Via         string // PlainViaSink (the default when empty) or PlainViaGocloud
	// Keep leaves the objects in the bucket for the caller to remove, so
	// that what a caller counts around Run (the store's CPU) holds the
	// uploads alone, not their deletes.
	Keep bool
}

// The writers a PlainUpload can send its objects through.
const (
	PlainViaSink    = "sink"    // the sink's object writer (store.S3PutObject on S3)
	PlainViaGocloud = "gocloud" // gocloud's blob writer for every object
)

// PlainResult is what a PlainUpload measured.
type PlainResult struct {
	Objects int
	Bytes   int64
	Elapsed time.Duration
}

// Run uploads the objects, measures until the last one is closed (durable
// for S3), then deletes them (not timed) unless p.Keep.
func (p PlainUpload) Run(ctx context.Context) (*PlainResult, error) {
	if p.Bytes < 1 || p.ObjectBytes < 1 || p.Parallel < 1 {
		return nil, fmt.Errorf("plain upload: bytes %d, object bytes %d, parallel %d: want at least 1 each", p.Bytes, p.ObjectBytes, p.Parallel)
	}
	if p.Via == "" {
		p.Via = PlainViaSink
	}
	if p.Via != PlainViaSink && p.Via != PlainViaGocloud {
		return nil, fmt.Errorf("plain upload: via %q: want %s or %s", p.Via, PlainViaSink, PlainViaGocloud)
	}
	b, err := store.OpenBucket(ctx, p.BucketURL)
	if err != nil {
		return nil, fmt.Errorf("plain upload: %w", err)
	}
	defer b.Close()
	n := int((p.Bytes + p.ObjectBytes - 1) / p.ObjectBytes)
	// One random buffer, written again and again: the store sees
	// incompressible bytes and the generator costs nothing per object.
	src := make([]byte, 8<<20)
	rand.Read(src)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/plain-%05d", p.Prefix, i)
	}
	var s3c *s3.Client
	if p.Via == PlainViaSink && !b.As(&s3c) {
		s3c = nil
	}
	var bodies store.BodyPool
	var next atomic.Int64
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, p.Parallel)
	t0 := time.Now()
	for w := range p.Parallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				size := min(p.ObjectBytes, p.Bytes-int64(i)*p.ObjectBytes)
				if err := upload(ctx, b, s3c, &bodies, keys[i], src, size); err != nil {
					errs[w] = err
					return
				}
				written.Add(size)
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	for _, k := range keys {
		if p.Keep {
			break
		}
		b.Delete(context.WithoutCancel(ctx), k)
	}
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("plain upload: %w", err)
		}
	}
	return &PlainResult{Objects: n, Bytes: written.Load(), Elapsed: el}, nil
}

// Delete removes what plain uploads under p.Prefix left (Keep), however
// many objects they wrote, and returns how many it removed.
func (p PlainUpload) Delete(ctx context.Context) (int, error) {
	b, err := store.OpenBucket(ctx, p.BucketURL)
	if err != nil {
		return 0, fmt.Errorf("plain upload: %w", err)
	}
	defer b.Close()
	n := 0
	for it := b.List(&blob.ListOptions{Prefix: p.Prefix + "/plain-"}); ; n++ {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("plain upload: list %s: %w", p.Prefix, err)
		}
		if err := b.Delete(ctx, obj.Key); err != nil {
			return n, fmt.Errorf("plain upload: delete %s: %w", obj.Key, err)
		}
	}
}

// upload writes size bytes of src (repeated) to key: through
// store.S3PutObject when c (the bucket's S3 client) is set, as the sink
// writes a part, else through gocloud's writer. src is never changed, so
// the S3 object holds its bytes rather than copying them, as a part holds
// its encoded row groups.
func upload(ctx context.Context, b *blob.Bucket, c *s3.Client, bodies *store.BodyPool, key string, src []byte, size int64) error {
	opts := blob.WriterOptions{ContentType: "application/octet-stream",
		BufferSize: sink.DefaultUploadBuffer, MaxConcurrency: 4}
	var o store.Object
	var err error
	if c != nil {
		o, err = store.NewS3PutObject(ctx, b, c, key, opts, bodies)
	} else {
		o, err = store.NewBlobObject(ctx, b, key, &opts)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	h, held := o.(store.HeldWriter)
	for left := size; left > 0; {
		k := min(left, int64(len(src)))
		if held {
			_, _, err = h.WriteHeld(src[:k])
		} else {
			_, err = o.Write(src[:k])
		}
		if err != nil {
			o.Abort()
			return fmt.Errorf("write %s: %w", key, err)
		}
		left -= k
	}
	if err := o.Close(); err != nil {
		return fmt.Errorf("close %s: %w", key, err)
	}
	return nil
}

// Report writes r for a reader, then one line "RESULT k=v ..." for scripts.
func (r *PlainResult) Report(w io.Writer, p PlainUpload) {
	sec := r.Elapsed.Seconds()
	fmt.Fprintf(w, "plain upload: %d objects of %s, %.1f MB in %.3f s: %.3f GB/s, %.1f objects/s (%d at once)\n",
		r.Objects, strconv.FormatInt(p.ObjectBytes, 10)+" bytes", float64(r.Bytes)/1e6, sec, float64(r.Bytes)/1e9/sec,
		float64(r.Objects)/sec, p.Parallel)
	fmt.Fprintf(w, "RESULT mode=plain-upload objects=%d object_bytes=%d bytes=%d seconds=%.3f gb_per_s=%.3f parallel=%d via=%s\n",
		r.Objects, p.ObjectBytes, r.Bytes, sec, float64(r.Bytes)/1e9/sec, p.Parallel, cmp.Or(p.Via, PlainViaSink))
}

// PlainSummary is a plain upload as load --plain-upload --json prints it.
type PlainSummary struct {
	Mode            string  `json:"mode"` // plain-upload
	Objects         int     `json:"objects"`
	ObjectBytes     int64   `json:"object_bytes"`
	Bytes           int64   `json:"bytes"`
	Parallel        int     `json:"parallel"`
	Via             string  `json:"via"` // PlainViaSink or PlainViaGocloud
	DurationSeconds float64 `json:"duration_seconds"`
	BytesPerSecond  float64 `json:"bytes_per_second"`
}

// Summary returns r's figures for a JSON line.
func (r *PlainResult) Summary(p PlainUpload) PlainSummary {
	sec := r.Elapsed.Seconds()
	return PlainSummary{Mode: "plain-upload", Objects: r.Objects, ObjectBytes: p.ObjectBytes, Bytes: r.Bytes,
		Parallel: p.Parallel, Via: cmp.Or(p.Via, PlainViaSink), DurationSeconds: sec, BytesPerSecond: perSecond(float64(r.Bytes), sec)}
}
