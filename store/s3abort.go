package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/ctxsleep"
)

// S3Target remembers the bucket and escaped key of an S3 upload, captured
// when the writer is created, so an interrupted multipart upload can be
// aborted. gocloud's writer aborts with the context it was given, which is
// already cancelled when we abort, so its own abort request never leaves
// and the store keeps the uploaded parts (and bills for them) until a
// lifecycle rule removes them.
type S3Target struct {
	bucket, key string
}

// BeforeWrite is the blob.WriterOptions hook that records the target.
func (t *S3Target) BeforeWrite(as func(any) bool) error {
	var in *transfermanager.UploadObjectInput
	if as(&in) && in.Bucket != nil && in.Key != nil {
		t.bucket, t.key = *in.Bucket, *in.Key
	}
	return nil
}

// AbortUploads aborts every multipart upload still open for the target's
// key. It is a no-op for other stores.
//
// S3 warns that a part upload in flight while the upload is aborted may
// still succeed, so an upload must be aborted until listing shows none;
// with a cancelled writer, the request that created the upload can also
// land after a first listing. So this lists, aborts what it finds, and
// lists again (with a short pause) until the key has had no open upload
// in emptyListings listings in a row: a single empty listing let a
// create that landed just after it leave an upload open (CI's versitygw
// test, on a loaded 2-core machine).
func (t *S3Target) AbortUploads(ctx context.Context, b *blob.Bucket, callTimeout time.Duration) error {
	var c *s3.Client
	if t.key == "" || !b.As(&c) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(30*time.Second, 3*callTimeout))
	defer cancel()
	const rounds, emptyListings = 8, 3
	pause := 20 * time.Millisecond
	empty := 0
	for round := 0; ; round++ {
		found, err := t.abortOnce(ctx, c, callTimeout)
		if err != nil {
			return err
		}
		if found > 0 {
			empty = 0
		} else if empty++; empty == emptyListings {
			return nil
		}
		if round == rounds-1 {
			if found == 0 {
				return nil
			}
			return fmt.Errorf("multipart upload of %s still open after %d aborts", t.key, rounds)
		}
		if err := ctxsleep.Sleep(ctx, pause); err != nil {
			return fmt.Errorf("abort multipart upload of %s: %w", t.key, err)
		}
		pause *= 2
	}
}

// abortOnce aborts the uploads open for the key now and says how many it found.
func (t *S3Target) abortOnce(ctx context.Context, c *s3.Client, callTimeout time.Duration) (found int, err error) {
	in := &s3.ListMultipartUploadsInput{Bucket: &t.bucket, Prefix: &t.key}
	var errs []error
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := c.ListMultipartUploads(cctx, in)
		cancel()
		if err != nil {
			if isNoSuchUpload(err) {
				return found, nil
			}
			return found, fmt.Errorf("list multipart uploads of %s: %w", t.key, err)
		}
		for _, u := range out.Uploads {
			if u.Key == nil || *u.Key != t.key {
				continue
			}
			found++
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err := c.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: &t.bucket, Key: u.Key, UploadId: u.UploadId})
			cancel()
			if err != nil && !isNoSuchUpload(err) {
				errs = append(errs, fmt.Errorf("abort multipart upload of %s: %w", t.key, err))
			}
		}
		if out.IsTruncated == nil || !*out.IsTruncated {
			return found, errors.Join(errs...)
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

func isNoSuchUpload(err error) bool {
	var e interface{ ErrorCode() string }
	return errors.As(err, &e) && e.ErrorCode() == "NoSuchUpload"
}

// AbortStaleUploads aborts the multipart uploads under prefix (a key
// prefix, as S3 matches it) initiated more than olderThan ago, and says how
// many it aborted. A killed process leaves its uploads open for good, and
// the store keeps (and bills) their parts; younger uploads may belong to a
// live writer and are left alone. It needs the bucket's name, which
// OpenBucket records: for other buckets, and for stores other than S3, it
// does nothing.
func AbortStaleUploads(ctx context.Context, b *blob.Bucket, prefix string, olderThan, callTimeout time.Duration) (int, error) {
	var c *s3.Client
	name := lookupBucket(b).s3Name
	if name == "" || !b.As(&c) {
		return 0, nil
	}
	cutoff := time.Now().Add(-olderThan)
	in := &s3.ListMultipartUploadsInput{Bucket: &name, Prefix: &prefix}
	aborted := 0
	var errs []error
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := c.ListMultipartUploads(cctx, in)
		cancel()
		if err != nil {
			if isNoSuchUpload(err) {
				// gofakes3's answer for a bucket that never had an upload.
				return aborted, errors.Join(errs...)
			}
			return aborted, errors.Join(append(errs, fmt.Errorf("list multipart uploads under %s: %w", prefix, err))...)
		}
		for _, u := range out.Uploads {
			if u.Key == nil || u.Initiated == nil || !u.Initiated.Before(cutoff) {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err := c.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: &name, Key: u.Key, UploadId: u.UploadId})
			cancel()
			switch {
			case err == nil:
				aborted++
			case !isNoSuchUpload(err):
				errs = append(errs, fmt.Errorf("abort multipart upload of %s: %w", *u.Key, err))
			}
		}
		if out.IsTruncated == nil || !*out.IsTruncated {
			return aborted, errors.Join(errs...)
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
