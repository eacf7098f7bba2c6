package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// SweepStats counts what Sweep removed.
type SweepStats struct {
	UploadsAborted   int // S3 multipart uploads
	TempFilesRemoved int // local temporary files
}

// Sweep removes what killed writers left under prefix and no live writer
// can still be using: S3 multipart uploads initiated more than olderThan
// ago (a killed upload stays open, and billed, for good unless a lifecycle
// rule ends it), and, for a file:// bucket opened by OpenBucket, temporary
// files not modified for olderThan, in the staging directory (see
// TempDirName) and, left by earlier versions, inside batch directories.
// The stage calls it at start-up; sink.NewBatchWriter does the same for its own
// batch. olderThan must exceed the longest part upload (see
// sink.WithStaleAfter): every replica sweeps the shared prefix.
//
// Sweep walks every local directory under the prefix (old temporary files
// can be anywhere) but lists only multipart uploads on S3, never objects.
// Other stores and buckets not opened by OpenBucket are left alone. Of opts
// only WithCallTimeout applies, to each store call.
func Sweep(ctx context.Context, bucket *blob.Bucket, prefix string, olderThan time.Duration, opts ...Option) (SweepStats, error) {
	var st SweepStats
	timeout, err := CallTimeout(opts...)
	if err != nil {
		return st, err
	}
	if olderThan <= 0 {
		return st, fmt.Errorf("store: sweep: age %v must be positive", olderThan)
	}
	prefix = strings.Trim(prefix, "/")
	if root, ok := LocalRoot(bucket); ok {
		n, err := sweepLocal(ctx, root, prefix, olderThan)
		st.TempFilesRemoved = n
		if err != nil {
			return st, fmt.Errorf("store: sweep %s: %w", filepath.Join(root, prefix), err)
		}
		return st, nil
	}
	keyPrefix := prefix
	if keyPrefix != "" {
		keyPrefix += "/"
	}
	n, err := AbortStaleUploads(ctx, bucket, keyPrefix, olderThan, timeout)
	st.UploadsAborted = n
	if err != nil {
		return st, fmt.Errorf("store: sweep %q: %w", prefix, err)
	}
	return st, nil
}

// fileblobTemp matches the temporary files of gocloud's fileblob writer
// ("<name>.<hex nanoseconds>.tmp"), which walkstage used inside batch
// directories before it staged its own.
var fileblobTemp = regexp.MustCompile(`^(part-.*\.parquet|_SUCCESS)\.[0-9a-f]+\.tmp$`)

func sweepLocal(ctx context.Context, root, prefix string, olderThan time.Duration) (int, error) {
	base, ok := root, true
	if prefix != "" {
		base, ok = LocalPath(root, prefix)
	}
	if !ok {
		return 0, fmt.Errorf("prefix %q is not a local path", prefix)
	}
	removed, err := RemoveStaleTemps(ctx, filepath.Join(base, TempDirName), "", "", olderThan)
	cutoff := time.Now().Add(-olderThan)
	errs := []error{err}
	werr := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == TempDirName {
				return filepath.SkipDir
			}
			return nil
		}
		if !fileblobTemp.MatchString(d.Name()) || !strings.HasPrefix(filepath.Base(filepath.Dir(p)), "batch=") {
			return nil
		}
		if info, err := d.Info(); err != nil || !info.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			removed++
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return nil
	})
	return removed, errors.Join(append(errs, werr)...)
}

// Check proves at start-up that the bucket exists and this process may
// write, read and delete objects under prefix, with a small probe object
// (under "{prefix}/.walkstage-probe-*", removed again). A missing bucket or
// refused access (NotFound, PermissionDenied, or the S3 codes for bad
// credentials) is a configuration error, wrapping ErrConfig: no retry
// fixes it. Any other failure (an unreachable or slow store) is returned
// wrapped as it is and may pass on a retry. Of opts only WithCallTimeout
// applies, to each store call.
func Check(ctx context.Context, bucket *blob.Bucket, prefix string, opts ...Option) error {
	timeout, err := CallTimeout(opts...)
	if err != nil {
		return err
	}
	prefix = strings.Trim(prefix, "/")
	var rnd [6]byte
	rand.Read(rnd[:])
	key := ".walkstage-probe-" + hex.EncodeToString(rnd[:])
	if prefix != "" {
		key = prefix + "/" + key
	}
	data := []byte("walkstage write probe " + key + "\n")
	classify := func(op string, err error) error {
		if isConfigError(err) {
			return fmt.Errorf("store: check store: %s probe %s: %w: %w", op, key, ErrConfig, err)
		}
		return fmt.Errorf("store: check store: %s probe %s: %w", op, key, err)
	}
	call := func(f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(cctx)
	}
	if root, ok := LocalRoot(bucket); ok {
		staging := LocalStaging(root, prefix)
		if err := os.MkdirAll(staging, 0o777); err != nil {
			return classify("create staging directory for", err)
		}
	}
	if err := call(func(ctx context.Context) error {
		return bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "text/plain"})
	}); err != nil {
		return classify("write", err)
	}
	var got []byte
	if err := call(func(ctx context.Context) (err error) {
		got, err = bucket.ReadAll(ctx, key)
		return err
	}); err != nil {
		return classify("read", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("store: check store: probe %s read back %d bytes that differ from the %d written", key, len(got), len(data))
	}
	if err := call(func(ctx context.Context) error { return bucket.Delete(ctx, key) }); err != nil {
		return classify("delete", err)
	}
	return nil
}

// isConfigError says whether err means the bucket is missing or access is
// refused.
func isConfigError(err error) bool {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.PermissionDenied:
		return true
	}
	if errors.Is(err, fs.ErrPermission) {
		return true
	}
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchBucket", "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "InvalidBucketName":
			return true
		}
	}
	return false
}
