package graph

import (
	"context"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// csrWriter turns the merged, sorted edge stream into a graph file. The
// section table is laid out for the edge count before deduplication (an
// upper bound); when duplicates were dropped, the sections after the
// targets are moved down and the file truncated.
//
// The edges are merged and written in parts of the source range, in
// parallel (mergepar.go).
type csrWriter struct {
	input string
	o     ImportOptions
	ids   []int64 // sorted external ids; nil with DenseIDs
	n     int
	total int64 // directed edges in the runs
	stats *ImportStats

	rank     *ranker // nil with DenseIDs
	e        uint64  // edges written
	maxLabel int
	out      atomic.Int64 // edges written so far, for progress

	mergeTime time.Duration // the parallel merge's wall time, for ImportStats.Phases
}

// batchLen is the edges of a batch: the target lookups of a batch, each a
// likely cache miss, run in a tight loop the CPU can overlap.
const batchLen = 8192

// secWriter buffers one section's values and writes them at its offset.
type secWriter[T any] struct {
	f   *os.File
	off int64
	buf []T
}

// newSecWriter returns a writer at off that buffers in buf (nil: a new
// buffer of 64Ki values).
func newSecWriter[T any](f *os.File, off uint64, buf []T) *secWriter[T] {
	if buf == nil {
		buf = make([]T, 0, 64<<10)
	}
	return &secWriter[T]{f: f, off: int64(off), buf: buf[:0]}
}

func (s *secWriter[T]) put(x T) error {
	s.buf = append(s.buf, x)
	if len(s.buf) == cap(s.buf) {
		return s.flush()
	}
	return nil
}

func (s *secWriter[T]) flush() error {
	b := bytesOf(s.buf)
	if _, err := s.f.WriteAt(b, s.off); err != nil {
		return err
	}
	s.off += int64(len(b))
	s.buf = s.buf[:0]
	return nil
}

// write writes the graph file into f.
func (w *csrWriter) write(ctx context.Context, f *os.File, runs []runFile) error {
	if !littleEndian() {
		return errBigEndian
	}
	h := w.layout()
	if _, err := f.WriteAt([]byte(w.o.Name), int64(h.sections[secName].off)); err != nil {
		return err
	}
	t0 := time.Now()
	if err := w.writeEdges(ctx, f, h, runs); err != nil {
		return err
	}
	w.mergeTime = time.Since(t0)
	if w.o.Labelled {
		h.numLabels = uint32(w.maxLabel + 1)
	}
	if err := w.writeIDs(f, h); err != nil {
		return err
	}
	h, err := w.shrink(f, h)
	if err != nil {
		return err
	}
	return w.seal(f, h)
}

// layout lays out the file for w.total edges.
func (w *csrWriter) layout() *header {
	h := &header{version: FormatVersion, vertices: uint64(w.n), edges: uint64(w.total)}
	if w.o.Weighted {
		h.flags |= flagWeighted
	}
	if w.o.Labelled {
		h.flags |= flagLabelled
	}
	if w.ids != nil {
		h.flags |= flagIDs
	}
	h.layout(len(w.o.Name))
	return h
}

// progress reports the write phase.
func (w *csrWriter) progress() {
	w.o.Progress(Progress{Phase: "write", EdgesOut: w.out.Load(), EdgesTotal: w.total, EdgesRead: w.stats.InputEdges})
}

// writeIDs writes the external ids and their index, when there are any.
func (w *csrWriter) writeIDs(f *os.File, h *header) error {
	if w.ids == nil {
		return nil
	}
	if _, err := f.WriteAt(bytesOf(w.ids), int64(h.sections[secIDs].off)); err != nil {
		return err
	}
	byExt := newSecWriter[uint32](f, h.sections[secByExt].off, nil)
	for v := 0; v < w.n; v++ {
		if err := byExt.put(uint32(v)); err != nil {
			return err
		}
	}
	return byExt.flush()
}

// shrink returns h when every edge was written, else, duplicates having
// been dropped, slides the later sections down to where a layout for the
// final count puts them, truncates f and returns that layout.
func (w *csrWriter) shrink(f *os.File, h *header) (*header, error) {
	if w.e == uint64(w.total) {
		return h, nil
	}
	final := *h
	final.edges = w.e
	final.layout(len(w.o.Name))
	for i := secWeights; i < numSections; i++ {
		if err := moveWithin(f, int64(h.sections[i].off), int64(final.sections[i].off), int64(final.sections[i].len)); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(int64(final.fileSize)); err != nil {
		return nil, err
	}
	return &final, nil
}

// seal checksums the sections, writes the header and fills in the stats.
func (w *csrWriter) seal(f *os.File, h *header) error {
	sum, err := sectionChecksum(f, h)
	if err != nil {
		return err
	}
	h.checksum = sum
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return err
	}
	w.stats.Vertices = w.n
	w.stats.Edges = int64(w.e)
	w.stats.OutputBytes = int64(h.fileSize)
	w.stats.Version = fmt.Sprintf("%016x", sum)
	if w.o.Progress != nil {
		w.progress()
	}
	return nil
}

// moveWithin copies n bytes from src to dst <= src inside f, front to back,
// which is safe when the ranges overlap.
func moveWithin(f *os.File, src, dst, n int64) error {
	if src == dst || n == 0 {
		return nil
	}
	buf := make([]byte, 1<<20)
	for done := int64(0); done < n; {
		k := min(int64(len(buf)), n-done)
		if _, err := f.ReadAt(buf[:k], src+done); err != nil {
			return err
		}
		if _, err := f.WriteAt(buf[:k], dst+done); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// sectionChecksum computes Graph.Checksum from the written sections: CRC-64
// over offsets, targets, weights, labels and ids in that order.
func sectionChecksum(f *os.File, h *header) (uint64, error) {
	if data, unmap, err := mapFile(f, int(h.fileSize), false); err == nil {
		defer unmap()
		var parts [][]byte
		for _, i := range []int{secOffsets, secTargets, secWeights, secLabels, secIDs} {
			s := h.sections[i]
			parts = append(parts, data[s.off:s.off+s.len])
		}
		return checksumParallel(parts...), nil
	}
	var c uint64
	buf := make([]byte, 4<<20)
	for _, i := range []int{secOffsets, secTargets, secWeights, secLabels, secIDs} {
		s := h.sections[i]
		r := io.NewSectionReader(f, int64(s.off), int64(s.len))
		for {
			n, err := r.Read(buf)
			c = crc64.Update(c, crcTable, buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return c, nil
}
