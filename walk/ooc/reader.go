package ooc

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/walkstage/walkstage/internal/directio"
)

// reader reads ranges of the graph file (and the tables' file) with large
// parallel preads through O_DIRECT where the filesystem allows it
// (directio.File), into a partition slot's buffers.
type reader struct {
	*directio.File
}

func openReader(path string, direct bool) (*reader, error) {
	f, err := directio.Open(path, direct)
	if err != nil {
		return nil, fmt.Errorf("out-of-core reader: %w", err)
	}
	return &reader{f}, nil
}

// isDirect says whether reads bypass the page cache.
func (r *reader) isDirect() bool { return r.Direct() }

func (r *reader) close() error { return r.Close() }

// alignedBuf is a buffer whose start is aligned for O_DIRECT, reused from
// read to read (a partition slot's memory).
type alignedBuf struct {
	raw []byte
	b   []byte
}

// ensure returns n aligned bytes, reusing the buffer when it is large
// enough.
func (a *alignedBuf) ensure(n int) []byte {
	if cap(a.b) < n {
		a.raw = make([]byte, n+directio.Align)
		d := (directio.Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(a.raw)))%directio.Align)) % directio.Align
		a.b = a.raw[d : d+n : d+n]
	}
	return a.b[:n]
}

// read reads the file's bytes [off, off+n) into buf and returns them. The
// returned slice starts at off's distance from its page boundary into the
// buffer, so arrays the file aligns to their element size stay aligned.
func (r *reader) read(buf *alignedBuf, off, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	as := off &^ (directio.Align - 1)
	ae := (off + n + directio.Align - 1) &^ (directio.Align - 1)
	b := buf.ensure(int(ae - as))
	at, err := r.ReadRange(context.Background(), b, off, n)
	if err != nil {
		return nil, err
	}
	return b[at : at+n], nil
}
