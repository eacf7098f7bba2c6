package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/store"
)

// newObject starts writing key. exclusive asks for a create-if-absent
// (an atomic hard link locally, If-None-Match: * on S3); losing it is
// reported by store.IsExists.
func (w *BatchWriter) newObject(ctx context.Context, key string, exclusive bool, opts *blob.WriterOptions) (store.Object, error) {
	if w.local != "" {
		if path, ok := store.LocalPath(w.local, key); ok {
			return store.NewLocalFile(w.staging, w.tag, path, exclusive)
		}
	}
	o := *opts
	o.IfNotExist = exclusive
	var c *s3.Client
	if !exclusive && w.bucket.As(&c) {
		// Parts: one request from a buffer (store.S3PutObject). Exclusive
		// creates (markers, manifests) are small and few, and keep
		// gocloud's path, whose failed precondition store.IsExists knows.
		so, err := store.NewS3PutObject(ctx, w.bucket, c, key, o, &w.buf.objects)
		if err != nil {
			return nil, err
		}
		return so, nil
	}
	return store.NewBlobObject(ctx, w.bucket, key, &o)
}

// newAttemptID returns 12 random hex digits: unique enough among the
// attempts at one batch, short enough for file names.
func newAttemptID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// callCtx bounds one small store call (see WithCallTimeout).
func (w *BatchWriter) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.cfg.callTimeout)
}

// removeLeftovers deletes what killed writers of this batch left behind and
// no live writer can still be using (older than WithStaleAfter): local
// temporary files, and S3 multipart uploads under the batch directory.
func (w *BatchWriter) removeLeftovers(ctx context.Context) error {
	if w.local != "" {
		dir, _ := store.LocalPath(w.local, w.layout.Dir)
		if _, err := store.RemoveStaleTemps(ctx, w.staging, w.tag+"-", dir, w.cfg.staleAfter); err != nil {
			return fmt.Errorf("sink: batch %s: remove stale temporary files: %w", w.meta.BatchID, err)
		}
		return nil
	}
	if _, err := store.AbortStaleUploads(ctx, w.bucket, w.layout.Dir+"/", w.cfg.staleAfter, w.cfg.callTimeout); err != nil {
		return fmt.Errorf("sink: batch %s: abort stale multipart uploads: %w", w.meta.BatchID, err)
	}
	return nil
}
