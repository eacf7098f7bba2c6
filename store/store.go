// Package store is walkstage's object-store layer: it opens buckets
// (OpenBucket: file://, s3:// and gs:// URLs through gocloud.dev/blob, with
// the S3 client tuned for many concurrent uploads), writes objects
// (S3PutObject sends an object of up to 16 MiB as one PutObject from a
// pooled buffer; LocalFile writes a local directory's objects through a
// staging directory, fsynced and renamed or hard-linked into place;
// NewBlobObject is gocloud's writer; GuardStall fails an upload that stops
// accepting bytes), aborts multipart uploads (S3Target, AbortStaleUploads),
// removes what killed writers left (Sweep, RemoveStaleTemps), proves a
// bucket usable at start-up (Check), names objects for readers
// (ObjectURL) and computes objects' CRC32C checksums (CRC32CUpdate,
// CRC32CCombine for a checksum made of known sections' sums,
// CRC32CString in the form S3 and GCS report). Every store call it makes
// has a deadline (WithCallTimeout).
//
// It knows buckets, keys and bytes: nothing of Parquet, walks, batches or
// manifests (the sink names keys and decides what to write), and nothing of
// Kafka or the stage. Packages that only need a bucket (catalog, the
// commands' output listings) import it rather than the sink.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/gcsblob"  // gs:// buckets
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets

	"github.com/walkstage/walkstage/internal/redact"
)

// ErrConfig is wrapped by Check when the bucket is missing or the
// credentials may not write to it: a configuration error that no retry
// fixes.
var ErrConfig = errors.New("object store misconfigured")

// DefaultCallTimeout bounds each small store call unless WithCallTimeout
// says otherwise.
const DefaultCallTimeout = 10 * time.Second

// Option configures Sweep and Check, and the store calls of packages that
// take these options (CallTimeout).
type Option func(*config)

type config struct{ callTimeout time.Duration }

// WithCallTimeout bounds each store call (listing, writing, reading or
// deleting a probe, aborting an upload). A store that does not answer in
// time turns into an error instead of a stall. Defaults to
// DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }

// CallTimeout resolves the call timeout of opts (WithCallTimeout, else
// DefaultCallTimeout), for packages whose store calls take this package's
// options (the output listings of sink/output); an error for a timeout that
// is not positive.
func CallTimeout(opts ...Option) (time.Duration, error) {
	cfg := config{callTimeout: DefaultCallTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.callTimeout <= 0 {
		return 0, fmt.Errorf("store: call timeout %v must be positive", cfg.callTimeout)
	}
	return cfg.callTimeout, nil
}

// OpenBucket opens the bucket named by a URL:
//
//   - file:///data/walks: a local directory, created when missing. The
//     writer stages objects in {prefix}/.walkstage-tmp/, fsyncs them and
//     moves them into place (see TempDirName), and no attribute sidecar
//     files are written (Spark and DuckDB would try to read them as data).
//   - s3://bucket?region=us-east-1: AWS S3, credentials from the usual AWS
//     environment. For S3-compatible stores add
//     endpoint=http://host:port&use_path_style=true (and disable_https=true
//     for plain HTTP endpoints without a scheme). Bodies go without their
//     SHA-256 in the signature (unsigned_payload=false signs them; see
//     unsignedPayloadParam), over plain HTTP with a CRC checksum header
//     instead (request_checksum_calculation sets it; see checksumDefault).
//     No upload waits for "100 Continue" unless expect_continue=true (see
//     noExpectContinue).
//   - gs://bucket: Google Cloud Storage with application default credentials.
//
// The URL's path (for s3:// and gs://) is not a prefix: pass the prefix to
// the writer (sink.NewBatchWriter). The caller closes the bucket.
func OpenBucket(ctx context.Context, rawURL string) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", redact.String(rawURL), redact.Error(err))
	}
	var sc s3Client
	switch u.Scheme {
	case "", "file":
		q := u.Query()
		if u.Scheme == "" {
			// A bare path: treat it as a local directory.
			u = &url.URL{Scheme: "file", Path: rawURL}
			q = url.Values{}
		}
		setDefault(q, "create_dir", "true")
		setDefault(q, "metadata", "skip")
		// Temporary files next to the target, so the final rename never
		// crosses a mount point (os.TempDir is often a different one).
		setDefault(q, "no_tmp_dir", "true")
		u.RawQuery = q.Encode()
	case "s3":
		q := u.Query()
		if sc, err = takeS3Params(q); err != nil {
			return nil, fmt.Errorf("open bucket %s: %w", redact.String(u.String()), redact.Error(err))
		}
		// S3-compatible stores commonly reject the SDK's default trailing
		// checksums on streaming uploads over HTTPS: there a checksum is
		// asked for only when required; over plain HTTP, see
		// checksumDefault.
		if q.Get("endpoint") != "" {
			setDefault(q, "request_checksum_calculation", checksumDefault(q, sc.unsigned))
			setDefault(q, "response_checksum_validation", "when_required")
		}
		u.RawQuery = q.Encode()
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", redact.String(u.String()), redact.Error(err))
	}
	if u.Scheme == "file" {
		// As fileblob's URL opener resolves it: host "." is a relative path.
		dir := u.Path
		if u.Host == "." {
			dir = strings.TrimPrefix(dir, "/")
		}
		if abs, err := filepath.Abs(filepath.FromSlash(dir)); err == nil {
			registerBucket(b, bucketInfo{localDir: abs})
		}
	}
	if u.Scheme == "s3" {
		if b, err = reopenS3(ctx, b, u, sc); err != nil {
			return nil, fmt.Errorf("open bucket %s: %w", redact.String(u.String()), redact.Error(err))
		}
		registerBucket(b, bucketInfo{s3Name: u.Host})
	}
	return b, nil
}

func setDefault(q url.Values, k, v string) {
	if _, ok := q[k]; !ok {
		q.Set(k, v)
	}
}

// ObjectURL joins a bucket URL (as given to OpenBucket) and a key, for
// messages that point readers at the output: "s3://bucket?region=x" and
// "part-1" give "s3://bucket/part-1"; query parameters are dropped.
func ObjectURL(bucketURL, key string) string {
	u, err := url.Parse(bucketURL)
	if err != nil || u.Scheme == "" {
		return path.Join(bucketURL, key)
	}
	u.RawQuery = ""
	u.User = nil
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	if u.Host == "" && u.Scheme == "file" {
		return "file://" + u.Path
	}
	return u.String()
}
