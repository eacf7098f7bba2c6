package ooc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Reads are aligned to directIOAlign (the page size, which every
// filesystem that takes O_DIRECT accepts) and cut into readPiece pieces,
// readDepth of them in flight: one 8 MiB request at a time left an NVMe
// disk idle between requests, as dd with one block does.
const (
	directIOAlign = 4096
	readPiece     = 8 << 20
	readDepth     = 4
)

// reader reads ranges of the graph file with pread, through O_DIRECT where
// the filesystem allows it (the page cache would otherwise hold a second
// copy of every partition, charged to the same cgroup), else buffered.
type reader struct {
	path   string
	plain  *os.File
	direct atomic.Pointer[os.File] // nil: buffered reads

	bytes atomic.Int64 // read from the file, aligned ranges included
	nanos atomic.Int64 // wall time in read
}

func openReader(path string, direct bool) (*reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("out-of-core reader: %w", err)
	}
	r := &reader{path: path, plain: f}
	if direct {
		if d, err := openDirect(path); err == nil {
			r.direct.Store(d)
		}
	}
	return r, nil
}

// isDirect says whether reads bypass the page cache.
func (r *reader) isDirect() bool { return r.direct.Load() != nil }

func (r *reader) close() error {
	if d := r.direct.Swap(nil); d != nil {
		d.Close()
	}
	return r.plain.Close()
}

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
		a.raw = make([]byte, n+directIOAlign)
		d := (directIOAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(a.raw)))%directIOAlign)) % directIOAlign
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
	as := off &^ (directIOAlign - 1)
	ae := (off + n + directIOAlign - 1) &^ (directIOAlign - 1)
	b := buf.ensure(int(ae - as))
	t0 := time.Now()
	err := r.readRange(b, as, off+n)
	if errors.Is(err, syscall.EINVAL) && r.isDirect() {
		// A filesystem that opened with O_DIRECT but refuses its reads
		// (some FUSE and network mounts): read through the page cache.
		if d := r.direct.Swap(nil); d != nil {
			d.Close()
		}
		err = r.readRange(b, as, off+n)
	}
	r.nanos.Add(int64(time.Since(t0)))
	if err != nil {
		return nil, fmt.Errorf("read %s [%d, +%d): %w", r.path, off, n, err)
	}
	return b[off-as : off-as+n], nil
}

// readRange fills b from file offset at, in pieces, readDepth at once; the
// file may end before b does, but not before need.
func (r *reader) readRange(b []byte, at, need int64) error {
	f := r.direct.Load()
	if f == nil {
		f = r.plain
	}
	pieces := (len(b) + readPiece - 1) / readPiece
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, min(readDepth, pieces))
	for w := range errs {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= pieces || errs[w] != nil {
					return
				}
				lo, hi := i*readPiece, min((i+1)*readPiece, len(b))
				got, err := f.ReadAt(b[lo:hi], at+int64(lo))
				r.bytes.Add(int64(got))
				if err == io.EOF && at+int64(lo+got) >= need {
					err = nil
				}
				if err != nil {
					errs[w] = err
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
