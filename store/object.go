package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Object is one object being written, through the bucket or straight
// to a local directory. Close makes it visible (durable, for a local
// directory); Abort discards it.
type Object interface {
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

// NewBlobObject starts writing key through gocloud: the object becomes
// visible at Close, and Abort discards it by cancelling the context the
// writer was given before closing it.
func NewBlobObject(ctx context.Context, b *blob.Bucket, key string, opts *blob.WriterOptions) (Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	bw, err := b.NewWriter(ctx, key, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	return &blobObject{Writer: bw, cancel: cancel}, nil
}

// IsExists says whether an exclusive create (a LocalFile's, or a blob
// writer's with IfNotExist) lost because the object exists. gofakes3 and versitygw answer 412 PreconditionFailed like S3;
// fileblob (used for buckets not opened by OpenBucket) checks, non-atomically,
// before its rename.
func IsExists(err error) bool {
	return errors.Is(err, ErrExists) || gcerrors.Code(err) == gcerrors.FailedPrecondition
}

// GuardStall wraps o, an upload written under ctx, so that it fails when
// a write into it or its Close takes longer than d: the guard cancels ctx
// (with cancel, which must be ctx's), which aborts the request in flight,
// and the error then wraps ErrStalled. Bytes o can hold without copying
// (HeldWriter) it still holds.
func GuardStall(ctx context.Context, cancel context.CancelCauseFunc, d time.Duration, o Object) Object {
	return &stallGuard{Object: o, ctx: ctx, d: d, cancel: cancel}
}

// stallGuard fails an upload whose writes or completion take longer than d:
// it cancels the upload's context, which aborts the request in flight.
type stallGuard struct {
	Object
	ctx    context.Context
	d      time.Duration
	cancel context.CancelCauseFunc
}

// ErrStalled is the cause recorded when a stalled upload is cancelled
// (see GuardStall).
var ErrStalled = errors.New("object store accepted no data")

func (g *stallGuard) guard(f func() error) error {
	t := time.AfterFunc(g.d, func() { g.cancel(fmt.Errorf("%w for %v", ErrStalled, g.d)) })
	err := f()
	t.Stop()
	if err != nil && errors.Is(context.Cause(g.ctx), ErrStalled) {
		return fmt.Errorf("%w: %w", context.Cause(g.ctx), err)
	}
	return err
}

func (g *stallGuard) Write(p []byte) (n int, err error) {
	err = g.guard(func() error {
		n, err = g.Object.Write(p)
		return err
	})
	return n, err
}

func (g *stallGuard) Close() error { return g.guard(g.Object.Close) }

// HeldWriter is an object writer that can take bytes without copying them
// (S3Put.WriteHeld): held says it did, and the caller then leaves p
// unchanged until Close or Abort has returned.
type HeldWriter interface {
	WriteHeld(p []byte) (n int, held bool, err error)
}

func (g *stallGuard) WriteHeld(p []byte) (n int, held bool, err error) {
	h, ok := g.Object.(HeldWriter)
	if !ok {
		n, err = g.Write(p)
		return n, false, err
	}
	err = g.guard(func() error {
		n, held, err = h.WriteHeld(p)
		return err
	})
	return n, held, err
}
