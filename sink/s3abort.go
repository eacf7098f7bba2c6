package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// s3Target remembers the bucket and escaped key of an S3 upload, captured
// when the writer is created, so an interrupted multipart upload can be
// aborted. gocloud's writer aborts with the context it was given, which is
// already cancelled when we abort, so its own abort request never leaves
// and the store keeps the uploaded parts (and bills for them) until a
// lifecycle rule removes them.
type s3Target struct {
	bucket, key string
}

func (t *s3Target) beforeWrite(as func(any) bool) error {
	var in *transfermanager.UploadObjectInput
	if as(&in) && in.Bucket != nil && in.Key != nil {
		t.bucket, t.key = *in.Bucket, *in.Key
	}
	return nil
}

// abortUploads aborts every multipart upload still open for the target's
// key. It is a no-op for other stores.
func (t *s3Target) abortUploads(ctx context.Context, b *blob.Bucket) error {
	var c *s3.Client
	if t.key == "" || !b.As(&c) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in := &s3.ListMultipartUploadsInput{Bucket: &t.bucket, Prefix: &t.key}
	var errs []error
	for {
		out, err := c.ListMultipartUploads(ctx, in)
		if err != nil {
			if isNoSuchUpload(err) {
				return nil
			}
			return fmt.Errorf("list multipart uploads of %s: %w", t.key, err)
		}
		for _, u := range out.Uploads {
			if u.Key == nil || *u.Key != t.key {
				continue
			}
			if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &t.bucket, Key: u.Key, UploadId: u.UploadId}); err != nil && !isNoSuchUpload(err) {
				errs = append(errs, fmt.Errorf("abort multipart upload of %s: %w", t.key, err))
			}
		}
		if out.IsTruncated == nil || !*out.IsTruncated {
			return errors.Join(errs...)
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

func isNoSuchUpload(err error) bool {
	var e interface{ ErrorCode() string }
	return errors.As(err, &e) && e.ErrorCode() == "NoSuchUpload"
}
