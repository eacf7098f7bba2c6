package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
)

// bodyConn is a connection to the S3 endpoint that sends a request body
// held in memory (an S3PutObject's pieces) with one vectored write instead
// of net/http's copy through a 32 KiB buffer, a write system call a
// buffer: a 2.4 MB part was 75 copies and 75 writes on the stage's cores
// (the copy alone 2.8% of the GPU stage's CPU writing to versitygw). The
// store reads the same bytes either way: versitygw's reads, file writes
// and CPU for a backlog did not change with it (perf stat on versitygw,
// 2-core VM; docs/benchmarks/stage.md, issue 36).
type bodyConn struct {
	net.Conn
}

// dialBodyConns wraps dial (an http.Transport's DialContext, nil for
// net.Dialer's) so that its connections are bodyConns.
func dialBodyConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bodyConn{Conn: c}, nil
	}
}

// ReadFrom is how net/http sends a request body once the headers are out:
// io.Copy(conn, io.LimitReader(body, ContentLength)). Where the body can
// write itself (the SDK passes an io.WriterTo through when its stream is
// one, as piecesReader is), it writes its bytes up to the limit to the
// connection itself (piecesReader: one writev of its pieces); otherwise the
// copy is the connection's own.
func (c *bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if wt, ok := lr.R.(io.WriterTo); ok && lr.N > 0 {
			w := &limitedConn{conn: c.Conn, n: lr.N}
			n, err := wt.WriteTo(w)
			lr.N -= n
			if errors.Is(err, errBodyTooLong) {
				// As net/http would find it: the body is longer than
				// its Content-Length; the limit's bytes are sent.
				err = nil
			}
			return n, err
		}
	}
	return io.Copy(onlyWriter{c.Conn}, r)
}

// onlyWriter hides a connection's ReadFrom, so that io.Copy does not call
// bodyConn.ReadFrom again; net.TCPConn's own would copy generically for a
// reader that is neither a file nor a socket anyway.
type onlyWriter struct{ io.Writer }

// errBodyTooLong stops a body's WriteTo at the request's Content-Length.
var errBodyTooLong = errors.New("store: request body longer than its Content-Length")

// limitedConn writes at most n bytes to conn.
type limitedConn struct {
	conn net.Conn
	n    int64
}

func (w *limitedConn) Write(p []byte) (int, error) {
	short := false
	if int64(len(p)) > w.n {
		p, short = p[:w.n], true
	}
	n, err := w.conn.Write(p)
	w.n -= int64(n)
	if err == nil && short {
		err = errBodyTooLong
	}
	return n, err
}

// writeBuffers writes bufs, up to the limit, with one vectored write where
// conn is a socket (net.Buffers.WriteTo; writev on Linux). bufs is
// consumed as written.
func (w *limitedConn) writeBuffers(bufs *net.Buffers) (int64, error) {
	var send net.Buffers
	short := false
	left := w.n
	for _, b := range *bufs {
		if left == 0 {
			short = len(b) > 0 || short
			continue
		}
		if int64(len(b)) > left {
			b, short = b[:left], true
		}
		send = append(send, b)
		left -= int64(len(b))
	}
	n, err := send.WriteTo(w.conn)
	w.n -= n
	consume(bufs, n)
	if err == nil && short {
		err = errBodyTooLong
	}
	if err != nil {
		err = fmt.Errorf("send the request body: %w", err)
	}
	return n, err
}

// consume drops the first n bytes of bufs.
func consume(bufs *net.Buffers, n int64) {
	for len(*bufs) > 0 && n > 0 {
		if int64(len((*bufs)[0])) > n {
			(*bufs)[0] = (*bufs)[0][n:]
			return
		}
		n -= int64(len((*bufs)[0]))
		*bufs = (*bufs)[1:]
	}
}

// buffersWriter is a writer that takes a whole body of pieces in one call
// (limitedConn).
type buffersWriter interface {
	writeBuffers(*net.Buffers) (int64, error)
}
