package graph

import (
	"context"
	"fmt"
	"hash/crc64"
	"io"
	"math"
	"os"
	"time"
)

// csrWriter turns the merged, sorted edge stream into a graph file. The
// section table is laid out for the edge count before deduplication (an
// upper bound); when duplicates were dropped, the sections after the
// targets are moved down and the file truncated.
//
// The merge (the calling goroutine) and the target lookups and section
// writes (a worker) run as a pipeline of edge batches.
type csrWriter struct {
	input string
	o     ImportOptions
	ids   []int64 // sorted external ids; nil with DenseIDs
	n     int
	total int64 // directed edges in the runs
	stats *ImportStats

	// The sections written edge by edge; wts and lbls are nil unless the
	// graph is weighted or labelled.
	offs *secWriter[uint64]
	tgts *secWriter[uint32]
	wts  *secWriter[float32]
	lbls *secWriter[uint8]
	rank *ranker // nil with DenseIDs

	// The worker's cursors.
	dense    []uint32 // the batch's targets as dense ids
	e        uint64   // edges written
	nextV    int      // next vertex whose offset is unwritten
	srcRank  int      // rank cursor for the (sorted) sources
	maxLabel int
	lastRep  time.Time
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

func newSecWriter[T any](f *os.File, off uint64) *secWriter[T] {
	return &secWriter[T]{f: f, off: int64(off), buf: make([]T, 0, 64<<10)}
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
	w.openSections(f, h)
	if err := w.writeEdges(ctx, runs); err != nil {
		return err
	}
	if err := w.closeSections(h); err != nil {
		return err
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

// openSections sets up the writers of the edge-sized sections and the
// worker's cursors.
func (w *csrWriter) openSections(f *os.File, h *header) {
	w.offs = newSecWriter[uint64](f, h.sections[secOffsets].off)
	w.tgts = newSecWriter[uint32](f, h.sections[secTargets].off)
	if w.o.Weighted {
		w.wts = newSecWriter[float32](f, h.sections[secWeights].off)
	}
	if w.o.Labelled {
		w.lbls = newSecWriter[uint8](f, h.sections[secLabels].off)
	}
	if w.ids != nil {
		w.rank = newRanker(w.ids)
	}
	w.dense = make([]uint32, batchLen)
	w.e, w.nextV, w.srcRank, w.maxLabel = 0, 0, 0, -1
	w.lastRep = time.Now()
}

// writeEdges merges the runs and hands the edges the duplicate policy keeps
// to the worker in batches; it returns once the worker has written them all.
func (w *csrWriter) writeEdges(ctx context.Context, runs []runFile) error {
	free := make(chan []rec, 6)
	for range cap(free) {
		free <- make([]rec, 0, batchLen)
	}
	writer := startWorker(4, w.writeBatch, func(b []rec) { free <- b[:0] })
	batch := <-free
	err := w.mergeUnique(ctx, runs, func(r *rec) error {
		batch = append(batch, *r)
		if len(batch) == batchLen {
			if writer.hasFailed() {
				return errWriterFailed
			}
			writer.send(batch)
			batch = <-free
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		writer.send(batch)
	}
	if werr := writer.wait(); werr != nil {
		return werr
	}
	return err
}

// mergeUnique calls emit for the edges of the runs, in order, that the
// duplicate policy keeps (with summed weights under DupSumWeights), and
// counts the duplicates.
func (w *csrWriter) mergeUnique(ctx context.Context, runs []runFile, emit func(r *rec) error) error {
	var pending rec
	have := false
	err := mergeRuns(ctx, runs, w.o.Weighted, w.o.Labelled, func(r *rec) error {
		if have && r.s == pending.s && r.d == pending.d {
			w.stats.Duplicates++
			switch w.o.Duplicates {
			case DupKeepFirst:
				return nil
			case DupSumWeights:
				pending.w += r.w
				return nil
			case DupError:
				return fmt.Errorf("%w %d -> %d (use --duplicates keep-first, sum or keep-all to accept it)", ErrDuplicate, r.s, r.d)
			}
		}
		if have {
			if err := emit(&pending); err != nil {
				return err
			}
		}
		pending, have = *r, true
		return nil
	})
	if err == nil && have {
		err = emit(&pending)
	}
	return err
}

// writeBatch, the worker, ranks the batch's targets and appends the batch
// to the sections, writing the offsets of the sources it reaches.
func (w *csrWriter) writeBatch(batch []rec) error {
	dense := w.dense[:len(batch)]
	if w.rank != nil {
		if err := w.rank.all(batch, dense); err != nil {
			return err
		}
	} else {
		for i := range batch {
			dense[i] = uint32(batch[i].d)
		}
	}
	for i := range batch {
		r := &batch[i]
		var s uint32
		if w.rank == nil {
			s = uint32(r.s)
		} else {
			for w.ids[w.srcRank] < r.s {
				w.srcRank++
			}
			s = uint32(w.srcRank)
		}
		for ; w.nextV <= int(s); w.nextV++ {
			if err := w.offs.put(w.e); err != nil {
				return err
			}
		}
		if err := w.tgts.put(dense[i]); err != nil {
			return err
		}
		if w.wts != nil {
			if math.IsInf(float64(r.w), 0) {
				return fmt.Errorf("summed weight of duplicate edges %d -> %d overflows float32", r.s, r.d)
			}
			if err := w.wts.put(r.w); err != nil {
				return err
			}
		}
		if w.lbls != nil {
			w.maxLabel = max(w.maxLabel, int(r.l))
			if err := w.lbls.put(r.l); err != nil {
				return err
			}
		}
		w.e++
	}
	if w.o.Progress != nil && time.Since(w.lastRep) >= w.o.ProgressInterval {
		w.lastRep = time.Now()
		w.progress()
	}
	return nil
}

// progress reports the write phase.
func (w *csrWriter) progress() {
	w.o.Progress(Progress{Phase: "write", EdgesOut: int64(w.e), EdgesTotal: w.total, EdgesRead: w.stats.InputEdges})
}

// closeSections writes the offsets of the vertices after the last source,
// flushes the edge-sized sections and records the label count.
func (w *csrWriter) closeSections(h *header) error {
	for ; w.nextV <= w.n; w.nextV++ {
		if err := w.offs.put(w.e); err != nil {
			return err
		}
	}
	for _, s := range []interface{ flush() error }{w.offs, w.tgts} {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if w.wts != nil {
		if err := w.wts.flush(); err != nil {
			return err
		}
	}
	if w.lbls != nil {
		if err := w.lbls.flush(); err != nil {
			return err
		}
		h.numLabels = uint32(w.maxLabel + 1)
	}
	return nil
}

// writeIDs writes the external ids and their index, when there are any.
func (w *csrWriter) writeIDs(f *os.File, h *header) error {
	if w.ids == nil {
		return nil
	}
	if _, err := f.WriteAt(bytesOf(w.ids), int64(h.sections[secIDs].off)); err != nil {
		return err
	}
	byExt := newSecWriter[uint32](f, h.sections[secByExt].off)
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
