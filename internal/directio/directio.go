// Package directio reads byte ranges of a file with large parallel preads,
// through O_DIRECT where the filesystem allows it: the out-of-core CPU engine
// (walk/ooc) and the GPU engine's streaming from disk (gpu) read a graph's
// partitions this way. The page cache would otherwise hold a second copy of
// every partition, charged to the same cgroup as the budget the reads keep to.
package directio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Reads are aligned to Align (the page size, which every filesystem that
// takes O_DIRECT accepts) and cut into Piece pieces, Depth of them in
// flight: one 8 MiB request at a time left an NVMe disk idle between
// requests, as dd with one block does.
const (
	Align = 4096
	Piece = 8 << 20
	Depth = 4
)

// File reads byte ranges of one file with pread, through O_DIRECT where the
// filesystem allows it, else buffered (tmpfs, some FUSE and network mounts).
// Its methods are safe for concurrent use.
type File struct {
	path   string
	plain  *os.File
	direct atomic.Pointer[os.File] // nil: buffered reads

	bytes atomic.Int64 // read from the file, alignment included
	nanos atomic.Int64 // wall time in ReadRange
	reads atomic.Int64
}

// Open opens path for reading, with O_DIRECT when direct is set and the
// filesystem takes it.
func Open(path string, direct bool) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := &File{path: path, plain: f}
	if direct {
		if d, err := openDirect(path); err == nil {
			r.direct.Store(d)
		}
	}
	return r, nil
}

// Path is the file's path.
func (r *File) Path() string { return r.path }

// Direct says whether reads bypass the page cache.
func (r *File) Direct() bool { return r.direct.Load() != nil }

// Bytes, Nanos and Reads count what ReadRange read (alignment included),
// the wall time it took and its calls.
func (r *File) Bytes() int64 { return r.bytes.Load() }
func (r *File) Nanos() int64 { return r.nanos.Load() }
func (r *File) Reads() int64 { return r.reads.Load() }

// Close closes the file.
func (r *File) Close() error {
	if d := r.direct.Swap(nil); d != nil {
		d.Close()
	}
	return r.plain.Close()
}

// Span is the room a read of n bytes needs in a buffer: the range widened to
// page boundaries on both sides.
func Span(n int64) int64 { return n + 2*Align }

// ReadRange reads the file's bytes [off, off+n) into buf, which must start
// on a page boundary (pinned host memory and AlignedBuf do) and hold the
// range widened to whole pages (Span(n) always does), and returns where in
// buf they start: the read is widened so that O_DIRECT takes it. The file
// may end inside the last page, not before off+n.
func (r *File) ReadRange(ctx context.Context, buf []byte, off, n int64) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	as := off &^ (Align - 1)
	ae := (off + n + Align - 1) &^ (Align - 1)
	if ae-as > int64(len(buf)) {
		return 0, fmt.Errorf("read %s [%d, +%d): buffer of %d bytes, want %d", r.path, off, n, len(buf), ae-as)
	}
	b := buf[:ae-as]
	t0 := time.Now()
	err := r.pieces(ctx, b, as, off+n)
	if errors.Is(err, syscall.EINVAL) && r.Direct() {
		// Opened with O_DIRECT but its reads refused (some FUSE and
		// network mounts): read through the page cache from now on.
		if d := r.direct.Swap(nil); d != nil {
			d.Close()
		}
		err = r.pieces(ctx, b, as, off+n)
	}
	r.nanos.Add(int64(time.Since(t0)))
	r.reads.Add(1)
	if err != nil {
		return 0, fmt.Errorf("read %s [%d, +%d): %w", r.path, off, n, err)
	}
	return off - as, nil
}

// pieces fills b from file offset at, Depth pieces at once; the file may
// end before b does (the last page), not before need.
func (r *File) pieces(ctx context.Context, b []byte, at, need int64) error {
	f := r.direct.Load()
	if f == nil {
		f = r.plain
	}
	n := (len(b) + Piece - 1) / Piece
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, min(Depth, n))
	for w := range errs {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || errs[w] != nil {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				lo, hi := i*Piece, min((i+1)*Piece, len(b))
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
