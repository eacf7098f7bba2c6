package store

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// sendCounter is a PUT body (a piecesReader) that counts how net/http
// takes its bytes: Reads (net/http's copy through a 32 KiB buffer) or
// WriteTos that wrote some, and whether that writer takes a body of pieces
// at once.
type sendCounter struct {
	*piecesReader
	reads, readBytes, writeTos int
	vectored                   bool
}

func (s *sendCounter) Read(p []byte) (int, error) {
	n, err := s.piecesReader.Read(p)
	s.reads++
	s.readBytes += n
	return n, err
}

func (s *sendCounter) WriteTo(w io.Writer) (int64, error) {
	n, err := s.piecesReader.WriteTo(w)
	if n > 0 {
		// net/http copies what a body has left past its Content-Length
		// to io.Discard, to report a mismatch: nothing, here.
		s.writeTos++
		_, s.vectored = w.(buffersWriter)
	}
	return n, err
}

// The S3 client sends a held body (an S3PutObject's pieces) to the
// connection with one vectored write (piecesReader.WriteTo into bodyConn),
// not through net/http's copy, a copy and a write system call every 32 KiB
// on the stage's cores. At most the first bytes, which net/http may buffer
// with the request's headers, are Read. The objects read back byte for
// byte.
func TestS3PutSendsHeldBodyAtOnce(t *testing.T) {
	b := openS3(t, fakeS3(t))
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not an S3 bucket")
	}
	ctx := context.Background()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	for _, tc := range []struct {
		name   string
		pieces [][]byte
	}{
		{"one piece", [][]byte{data}},
		{"many pieces", [][]byte{data[:100], data[100 : 1<<20], data[1<<20 : 1<<20], data[1<<20 : 2<<20+5], data[2<<20+5:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &sendCounter{piecesReader: newPiecesReader(tc.pieces)}
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("walks"), Key: aws.String(tc.name),
				Body: body, ContentLength: aws.Int64(int64(len(data))),
				// As S3PutObject sends it (putInput).
				ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: aws.String(CRC32CString(crc32.Checksum(data, castagnoli)))})
			if err != nil {
				t.Fatal(err)
			}
			if body.writeTos != 1 || !body.vectored || body.readBytes > 4<<10 {
				t.Errorf("body sent by %d WriteTo (vectored %v) and %d Reads of %d bytes; want one vectored WriteTo after at most 4 KiB read with the headers",
					body.writeTos, body.vectored, body.reads, body.readBytes)
			}
			got, err := b.ReadAll(ctx, tc.name)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (%v), equal %v", len(got), err, bytes.Equal(got, data))
			}
		})
	}
}

// bodyConn.ReadFrom sends what net/http hands it, a body under the
// request's Content-Length, up to that length from wherever the body's
// read position is; a longer body stops there (net/http then reports the
// length mismatch), and the body's position follows what was sent.
func TestBodyConnSendsUpToTheLimit(t *testing.T) {
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	pieces := [][]byte{data[:5], data[5:5], data[5:20], data[20:]}
	for _, tc := range []struct {
		name      string
		readFirst int   // bytes Read before ReadFrom (net/http's header buffer)
		limit     int64 // the Content-Length left
		want      string
		plain     bool // the body as a plain io.Reader, copied
	}{
		{"whole", 0, 36, string(data), false},
		{"after a read inside a piece", 3, 33, string(data[3:]), false},
		{"after a read to a piece's end", 5, 31, string(data[5:]), false},
		{"limit inside a piece", 2, 10, string(data[2:12]), false},
		{"limit at a piece's end", 0, 20, string(data[:20]), false},
		{"a reader that cannot write itself", 2, 10, string(data[2:12]), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan []byte, 1)
			go func() {
				s, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer s.Close()
				b, _ := io.ReadAll(s)
				got <- b
			}()
			conn, err := dialBodyConns(nil)(context.Background(), "tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			body := newPiecesReader(pieces)
			if _, err := io.ReadFull(body, make([]byte, tc.readFirst)); err != nil {
				t.Fatal(err)
			}
			lr := &io.LimitedReader{R: body, N: tc.limit}
			if tc.plain {
				lr.R = struct{ io.Reader }{body}
			}
			n, err := conn.(io.ReaderFrom).ReadFrom(lr)
			conn.Close()
			if err != nil || n != int64(len(tc.want)) || lr.N != tc.limit-n {
				t.Errorf("ReadFrom: %d bytes, %v, limit left %d; want %d bytes, limit left %d", n, err, lr.N, len(tc.want), tc.limit-int64(len(tc.want)))
			}
			if s := <-got; string(s) != tc.want {
				t.Errorf("sent %q, want %q", s, tc.want)
			}
			rest, _ := io.ReadAll(body)
			if want := string(data[tc.readFirst+len(tc.want):]); string(rest) != want {
				t.Errorf("the body reads on with %q, want %q", rest, want)
			}
		})
	}
}
