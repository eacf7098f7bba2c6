package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// objectWriter is one object being written, through the bucket or straight
// to a local directory. Close makes it visible (durable, for a local
// directory); Abort discards it.
type objectWriter interface {
	io.Writer
	Close() error
	Abort()
}

// blobObject writes through gocloud; cancelling its context before Close
// makes gocloud discard the object.
type blobObject struct {
	*blob.Writer
	cancel context.CancelFunc
}

func (o *blobObject) Close() error {
	defer o.cancel()
	return o.Writer.Close()
}

func (o *blobObject) Abort() {
	o.cancel()
	o.Writer.Close()
}

// newObject starts writing key. exclusive asks for a create-if-absent
// (an atomic hard link locally, If-None-Match: * on S3); losing it is
// reported by isExists.
func (w *BatchWriter) newObject(ctx context.Context, key string, exclusive bool, opts *blob.WriterOptions) (objectWriter, error) {
	if w.local != "" {
		if path, ok := localPath(w.local, key); ok {
			return newLocalFile(w.staging, w.tag, path, exclusive)
		}
	}
	o := *opts
	o.IfNotExist = exclusive
	var c *s3.Client
	if !exclusive && w.bucket.As(&c) {
		// Parts: one request from a buffer (s3put.go). Exclusive creates
		// (markers, manifests) are small and few, and keep gocloud's path,
		// whose failed precondition isExists knows.
		return w.newS3PutObject(ctx, c, key, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	bw, err := w.bucket.NewWriter(ctx, key, &o)
	if err != nil {
		cancel()
		return nil, err
	}
	return &blobObject{Writer: bw, cancel: cancel}, nil
}

// isExists says whether an exclusive create lost because the object
// exists. gofakes3 and versitygw answer 412 PreconditionFailed like S3;
// fileblob (used for buckets not opened by OpenBucket) checks, non-atomically,
// before its rename.
func isExists(err error) bool {
	return errors.Is(err, errExists) || gcerrors.Code(err) == gcerrors.FailedPrecondition
}

// stallGuard fails an upload whose writes or completion take longer than d:
// it cancels the upload's context, which aborts the request in flight.
type stallGuard struct {
	objectWriter
	ctx    context.Context
	d      time.Duration
	cancel context.CancelCauseFunc
}

// errStalled is the cause recorded when a stalled upload is cancelled.
var errStalled = errors.New("object store accepted no data")

func (g *stallGuard) guard(f func() error) error {
	t := time.AfterFunc(g.d, func() { g.cancel(fmt.Errorf("%w for %v", errStalled, g.d)) })
	err := f()
	t.Stop()
	if err != nil && errors.Is(context.Cause(g.ctx), errStalled) {
		return fmt.Errorf("%w: %w", context.Cause(g.ctx), err)
	}
	return err
}

func (g *stallGuard) Write(p []byte) (n int, err error) {
	err = g.guard(func() error {
		n, err = g.objectWriter.Write(p)
		return err
	})
	return n, err
}

func (g *stallGuard) Close() error { return g.guard(g.objectWriter.Close) }

// heldWriter is an object writer that can take bytes without copying them
// (s3PutObject.writeHeld): held says it did, and the caller then leaves p
// unchanged until Close or Abort has returned.
type heldWriter interface {
	writeHeld(p []byte) (n int, held bool, err error)
}

func (g *stallGuard) writeHeld(p []byte) (n int, held bool, err error) {
	h, ok := g.objectWriter.(heldWriter)
	if !ok {
		n, err = g.Write(p)
		return n, false, err
	}
	err = g.guard(func() error {
		n, held, err = h.writeHeld(p)
		return err
	})
	return n, held, err
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
		dir, _ := localPath(w.local, w.layout.Dir)
		if _, err := removeStaleTemps(ctx, w.staging, w.tag+"-", dir, w.cfg.staleAfter); err != nil {
			return fmt.Errorf("sink: batch %s: remove stale temporary files: %w", w.meta.BatchID, err)
		}
		return nil
	}
	if _, err := abortStaleUploads(ctx, w.bucket, w.layout.Dir+"/", w.cfg.staleAfter, w.cfg.callTimeout); err != nil {
		return fmt.Errorf("sink: batch %s: abort stale multipart uploads: %w", w.meta.BatchID, err)
	}
	return nil
}
