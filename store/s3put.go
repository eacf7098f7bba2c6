package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
)

// putThreshold is the size up to which gocloud's S3 writer (the transfer
// manager's default multipart threshold) sends an object as one PutObject,
// and so up to which S3PutObject holds an object to send it itself.
const putThreshold = 16 << 20

// S3PutObject writes an S3 object of up to putThreshold bytes with one
// PutObject from a buffer of its own (pooled in a BodyPool), and a larger one
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
type S3PutObject struct {
	ctx    context.Context
	cancel context.CancelFunc
	client *s3.Client
	in     *transfermanager.UploadObjectInput
	bufs   *BodyPool
	buf    []byte
	// body is the object in order: spans of buf and slices held for it
	// (WriteHeld), which their writer leaves unchanged until Close or
	// Abort returns; size is its length.
	body []bodyPiece
	size int
	// open opens the gocloud writer that takes over past putThreshold;
	// big is that writer once open.
	open func() (Object, error)
	big  Object
	// crc32c, when set, holds the CRC32C of the bytes written so far (the
	// caller's, see UseCRC32C); else putInput computes it.
	crc32c interface{ Sum32() uint32 }
}

// NewS3PutObject starts key in b, an S3 bucket whose client is c: it has
// gocloud build the request it would send (a BeforeWrite hook takes it and
// fails the open, so no writer is left behind) and keeps the options to
// open gocloud's writer later if the object grows. The body's buffer
// comes from bodies and goes back there at Close or Abort.
func NewS3PutObject(ctx context.Context, b *blob.Bucket, c *s3.Client, key string, opts blob.WriterOptions, bodies *BodyPool) (*S3PutObject, error) {
	var in *transfermanager.UploadObjectInput
	outer := opts.BeforeWrite
	probe := opts
	probe.BeforeWrite = func(as func(any) bool) error {
		if !as(&in) {
			return errNotS3Writer
		}
		return errProbed
	}
	if _, err := b.NewWriter(ctx, key, &probe); !errors.Is(err, errProbed) {
		if err == nil {
			err = errNotS3Writer
		}
		return nil, fmt.Errorf("build the request for %s: %w", key, err)
	}
	if outer != nil {
		// The caller's hook sees the same input (S3Target records the
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
	o := &S3PutObject{ctx: ctx, cancel: cancel, client: c, in: in, bufs: bodies, buf: bodies.get()}
	o.open = func() (Object, error) {
		bw, err := b.NewWriter(ctx, key, &opts)
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

// bodyPiece is a span of the object: held, or else buf[from:to].
type bodyPiece struct {
	held     []byte
	from, to int
}

func (o *S3PutObject) Write(p []byte) (int, error) {
	if o.big != nil {
		return o.big.Write(p)
	}
	if o.size+len(p) <= putThreshold {
		from := len(o.buf)
		o.buf = append(o.buf, p...)
		if n := len(o.body); n > 0 && o.body[n-1].held == nil && o.body[n-1].to == from {
			o.body[n-1].to = len(o.buf)
		} else {
			o.body = append(o.body, bodyPiece{from: from, to: len(o.buf)})
		}
		o.size += len(p)
		return len(p), nil
	}
	if err := o.toBig(); err != nil {
		return 0, err
	}
	return o.big.Write(p)
}

// WriteHeld adds p to the object without copying it, where it fits the
// single request: held reports whether it did, and then the caller leaves
// p unchanged until Close or Abort has returned. (The copy of every
// fragment section into the object's buffer was 1.3 of 28.6 core-s of a
// GPU backlog to versitygw.) Otherwise p is written as by Write.
func (o *S3PutObject) WriteHeld(p []byte) (n int, held bool, err error) {
	if o.big != nil || o.size+len(p) > putThreshold {
		n, err = o.Write(p)
		return n, false, err
	}
	o.body = append(o.body, bodyPiece{held: p})
	o.size += len(p)
	return len(p), true, nil
}

// toBig switches to gocloud's writer, sending it the object so far.
func (o *S3PutObject) toBig() error {
	big, err := o.open()
	if err != nil {
		return err
	}
	o.big = big
	for _, b := range o.pieces() {
		if _, err := big.Write(b); err != nil {
			return err
		}
	}
	o.release()
	return nil
}

// pieces is the object's bytes so far, in order.
func (o *S3PutObject) pieces() [][]byte {
	ps := make([][]byte, len(o.body))
	for i, p := range o.body {
		ps[i] = p.held
		if p.held == nil {
			ps[i] = o.buf[p.from:p.to]
		}
	}
	return ps
}

func (o *S3PutObject) Close() error {
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

func (o *S3PutObject) Abort() {
	if o.big != nil {
		o.big.Abort()
		return
	}
	o.cancel()
	o.release()
}

func (o *S3PutObject) release() {
	if o.buf != nil {
		o.bufs.put(o.buf)
		o.buf = nil
	}
	o.body, o.size = nil, 0
}

// putInput is the PutObject request for the buffered bytes, with the fields
// gocloud sets on the transfer manager's input.
func (o *S3PutObject) putInput() *s3.PutObjectInput {
	in := o.in
	p := &s3.PutObjectInput{
		Bucket: in.Bucket, Key: in.Key, Body: newPiecesReader(o.pieces()), ContentLength: aws.Int64(int64(o.size)),
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
		var sum uint32
		if o.crc32c != nil {
			sum = o.crc32c.Sum32()
		} else {
			for _, b := range o.pieces() {
				sum = crc32.Update(sum, castagnoli, b)
			}
		}
		p.ChecksumCRC32C = aws.String(CRC32CString(sum))
	}
	return p
}

// piecesReader reads byte slices one after the other as one seekable
// body (the SDK rewinds a body to retry a request).
type piecesReader struct {
	pieces [][]byte
	size   int64
	off    int64 // read position
	i, at  int   // the piece holding off, and off's index in it
}

func newPiecesReader(pieces [][]byte) *piecesReader {
	r := &piecesReader{pieces: pieces}
	for _, p := range pieces {
		r.size += int64(len(p))
	}
	return r
}

func (r *piecesReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.pieces) {
		c := copy(p[n:], r.pieces[r.i][r.at:])
		n += c
		r.at += c
		if r.at == len(r.pieces[r.i]) {
			r.i, r.at = r.i+1, 0
		}
	}
	r.off += int64(n)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *piecesReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return r.off, fmt.Errorf("store: seek to %d of a %d-byte body", offset, r.size)
	}
	r.off, r.i, r.at = offset, 0, 0
	for rest := offset; r.i < len(r.pieces); r.i++ {
		if rest < int64(len(r.pieces[r.i])) {
			r.at = int(rest)
			break
		}
		rest -= int64(len(r.pieces[r.i]))
	}
	return offset, nil
}

// Len is the bytes left to read (the SDK reads a body's length from it).
func (r *piecesReader) Len() int { return int(max(0, r.size-r.off)) }

// UseCRC32C makes the request's checksum sum.Sum32(), which the caller
// keeps over the same bytes as they are written, instead of computing it
// a second time.
func (o *S3PutObject) UseCRC32C(sum interface{ Sum32() uint32 }) { o.crc32c = sum }

// BodyPool recycles the bodies of objects sent in one request
// (S3PutObject), handed out empty, so that writers of many small objects
// do not allocate (and have the kernel zero) fresh buffers for each. The
// zero value is ready for use; safe for concurrent use.
type BodyPool struct{ p sync.Pool } // of *[]byte

func (p *BodyPool) get() []byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (p *BodyPool) put(b []byte) {
	if cap(b) > 0 {
		p.p.Put(&b)
	}
}

// castagnoli is the CRC32C table; hash/crc32 uses the CPU's CRC32
// instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32CString is a CRC32C as S3 (and the sink's manifest) write it:
// base64 of its four big-endian bytes.
func CRC32CString(sum uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
}
