package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
)

// putThreshold is the size up to which gocloud's S3 writer (the transfer
// manager's default multipart threshold) sends an object as one PutObject,
// and so up to which s3PutObject holds an object to send it itself.
const putThreshold = 16 << 20

// s3PutObject writes an S3 object of up to putThreshold bytes with one
// PutObject from a buffer of its own (pooled in Buffers), and a larger one
// through gocloud's writer, which it opens once the buffer would overflow.
//
// Through gocloud, an object's bytes go through a pipe into the transfer
// manager, which reads the first 16 MiB with io.ReadAll into a slice grown
// from 512 bytes: every small object was copied three or four times and
// each grown slice cleared first. That was 10% of the stage's CPU with the
// GPU engine writing to versitygw (16-core host, profile of a backlog of
// 3,000 requests of 2.3 MB objects). The request is the one the transfer
// manager would send: the input gocloud builds (escaped key, content type,
// metadata, encryption) is taken from its BeforeWrite hook. Where checksums
// are on (the transfer manager would send a CRC32), the body's CRC32C goes
// in a header (putInput).
type s3PutObject struct {
	ctx    context.Context
	cancel context.CancelFunc
	client *s3.Client
	in     *transfermanager.UploadObjectInput
	bufs   *Buffers
	buf    []byte
	// open opens the gocloud writer that takes over past putThreshold;
	// big is that writer once open.
	open func() (objectWriter, error)
	big  objectWriter
	// crc32c, when set, holds the CRC32C of the bytes written so far (the
	// part's own, kept by its countingWriter); else putInput computes it.
	crc32c interface{ Sum32() uint32 }
}

// newS3PutObject starts key: it has gocloud build the request it would send
// (a BeforeWrite hook takes it and fails the open, so no writer is left
// behind) and keeps the options to open gocloud's writer later if the
// object grows.
func (w *BatchWriter) newS3PutObject(ctx context.Context, c *s3.Client, key string, opts blob.WriterOptions) (objectWriter, error) {
	var in *transfermanager.UploadObjectInput
	outer := opts.BeforeWrite
	probe := opts
	probe.BeforeWrite = func(as func(any) bool) error {
		if !as(&in) {
			return errNotS3Writer
		}
		return errProbed
	}
	if _, err := w.bucket.NewWriter(ctx, key, &probe); !errors.Is(err, errProbed) {
		if err == nil {
			err = errNotS3Writer
		}
		return nil, fmt.Errorf("build the request for %s: %w", key, err)
	}
	if outer != nil {
		// The caller's hook sees the same input (s3Target records the
		// bucket and escaped key from it).
		if err := outer(func(i any) bool {
			p, ok := i.(**transfermanager.UploadObjectInput)
			if ok {
				*p = in
			}
			return ok
		}); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &s3PutObject{ctx: ctx, cancel: cancel, client: c, in: in, bufs: w.buf, buf: w.buf.object()}
	o.open = func() (objectWriter, error) {
		bw, err := w.bucket.NewWriter(ctx, key, &opts)
		if err != nil {
			return nil, err
		}
		return &blobObject{Writer: bw, cancel: cancel}, nil
	}
	return o, nil
}

var (
	errProbed      = errors.New("request built")
	errNotS3Writer = errors.New("not gocloud's S3 writer")
)

func (o *s3PutObject) Write(p []byte) (int, error) {
	if o.big != nil {
		return o.big.Write(p)
	}
	if len(o.buf)+len(p) <= putThreshold {
		o.buf = append(o.buf, p...)
		return len(p), nil
	}
	big, err := o.open()
	if err != nil {
		return 0, err
	}
	o.big = big
	if _, err := big.Write(o.buf); err != nil {
		return 0, err
	}
	o.release()
	return big.Write(p)
}

func (o *s3PutObject) Close() error {
	if o.big != nil {
		return o.big.Close()
	}
	defer o.cancel()
	defer o.release()
	_, err := o.client.PutObject(o.ctx, o.putInput(), func(so *s3.Options) {
		// As the transfer manager does for each of its calls.
		so.RequestChecksumCalculation = o.client.Options().RequestChecksumCalculation
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", aws.ToString(o.in.Key), err)
	}
	return nil
}

func (o *s3PutObject) Abort() {
	if o.big != nil {
		o.big.Abort()
		return
	}
	o.cancel()
	o.release()
}

func (o *s3PutObject) release() {
	if o.buf != nil {
		o.bufs.putObject(o.buf)
		o.buf = nil
	}
}

// putInput is the PutObject request for the buffered bytes, with the fields
// gocloud sets on the transfer manager's input.
func (o *s3PutObject) putInput() *s3.PutObjectInput {
	in := o.in
	p := &s3.PutObjectInput{
		Bucket: in.Bucket, Key: in.Key, Body: bytes.NewReader(o.buf), ContentLength: aws.Int64(int64(len(o.buf))),
		CacheControl: in.CacheControl, ContentDisposition: in.ContentDisposition, ContentEncoding: in.ContentEncoding,
		ContentLanguage: in.ContentLanguage, ContentType: in.ContentType, IfNoneMatch: in.IfNoneMatch, Metadata: in.Metadata,
		ServerSideEncryption: s3types.ServerSideEncryption(in.ServerSideEncryption), SSEKMSKeyId: in.SSEKMSKeyID,
	}
	// A checksum unless they are only sent where required (the transfer
	// manager's rule), but CRC32C, computed here over the buffer and sent
	// in a header: given a CRC32, the SDK computes it itself into an
	// aws-chunked trailer over plain HTTP, which wraps the body in a reader
	// that the HTTP client copies 32 KiB at a time.
	if o.client.Options().RequestChecksumCalculation != aws.RequestChecksumCalculationWhenRequired {
		p.ChecksumAlgorithm = s3types.ChecksumAlgorithmCrc32c
		sum := crc32.Checksum(o.buf, castagnoli)
		if o.crc32c != nil {
			sum = o.crc32c.Sum32()
		}
		p.ChecksumCRC32C = aws.String(crc32cString(sum))
	}
	return p
}
