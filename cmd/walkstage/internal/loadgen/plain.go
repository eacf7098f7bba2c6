package loadgen

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/store"
)

// PlainUpload is a measurement of the object store alone: objects of random
// bytes uploaded the way the sink uploads its parts (gocloud writers with
// the sink's default buffer and concurrency per object), several at once,
// with no Parquet, no Kafka and no manifest. Run beside a stage measurement
// it shows the store's own ceiling for the same byte volume.
type PlainUpload struct {
	BucketURL   string
	Prefix      string // key prefix of the objects (they are deleted after)
	Bytes       int64  // total volume
	ObjectBytes int64  // size of each object
	Parallel    int    // objects uploaded at once
}

// PlainResult is what a PlainUpload measured.
type PlainResult struct {
	Objects int
	Bytes   int64
	Elapsed time.Duration
}

// Run uploads the objects, measures until the last one is closed (durable
// for S3), then deletes them (not timed).
func (p PlainUpload) Run(ctx context.Context) (*PlainResult, error) {
	if p.Bytes < 1 || p.ObjectBytes < 1 || p.Parallel < 1 {
		return nil, fmt.Errorf("plain upload: bytes %d, object bytes %d, parallel %d: want at least 1 each", p.Bytes, p.ObjectBytes, p.Parallel)
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
				if err := upload(ctx, b, keys[i], src, size); err != nil {
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
		b.Delete(context.WithoutCancel(ctx), k)
	}
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("plain upload: %w", err)
		}
	}
	return &PlainResult{Objects: n, Bytes: written.Load(), Elapsed: el}, nil
}

func upload(ctx context.Context, b *blob.Bucket, key string, src []byte, size int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/octet-stream",
		BufferSize: sink.DefaultUploadBuffer, MaxConcurrency: 4})
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	for left := size; left > 0; {
		k := min(left, int64(len(src)))
		if _, err := w.Write(src[:k]); err != nil {
			cancel()
			w.Close()
			return fmt.Errorf("write %s: %w", key, err)
		}
		left -= k
	}
	if err := w.Close(); err != nil {
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
	fmt.Fprintf(w, "RESULT mode=plain-upload objects=%d object_bytes=%d bytes=%d seconds=%.3f gb_per_s=%.3f parallel=%d\n",
		r.Objects, p.ObjectBytes, r.Bytes, sec, float64(r.Bytes)/1e9/sec, p.Parallel)
}

// PlainSummary is a plain upload as load --plain-upload --json prints it.
type PlainSummary struct {
	Mode            string  `json:"mode"` // plain-upload
	Objects         int     `json:"objects"`
	ObjectBytes     int64   `json:"object_bytes"`
	Bytes           int64   `json:"bytes"`
	Parallel        int     `json:"parallel"`
	DurationSeconds float64 `json:"duration_seconds"`
	BytesPerSecond  float64 `json:"bytes_per_second"`
}

// Summary returns r's figures for a JSON line.
func (r *PlainResult) Summary(p PlainUpload) PlainSummary {
	sec := r.Elapsed.Seconds()
	return PlainSummary{Mode: "plain-upload", Objects: r.Objects, ObjectBytes: p.ObjectBytes, Bytes: r.Bytes,
		Parallel: p.Parallel, DurationSeconds: sec, BytesPerSecond: perSecond(float64(r.Bytes), sec)}
}
