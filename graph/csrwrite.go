package graph

import (
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// csrWriter turns the merged, sorted edge stream into a graph file. The
// section table is laid out for the edge count before deduplication (an
// upper bound); when duplicates were dropped, the sections after the
// targets are moved down and the file truncated.
type csrWriter struct {
	input string
	o     ImportOptions
	ids   []int64 // sorted external ids; nil with DenseIDs
	n     int
	total int64 // directed edges in the runs
	stats *ImportStats
}

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

func (w *csrWriter) write(ctx context.Context, f *os.File, runs []runFile) error {
	if !littleEndian() {
		return errBigEndian
	}
	o := w.o
	h := &header{version: FormatVersion, vertices: uint64(w.n), edges: uint64(w.total)}
	if o.Weighted {
		h.flags |= flagWeighted
	}
	if o.Labelled {
		h.flags |= flagLabelled
	}
	if w.ids != nil {
		h.flags |= flagIDs
	}
	h.layout(len(o.Name))
	if _, err := f.WriteAt([]byte(o.Name), int64(h.sections[secName].off)); err != nil {
		return err
	}
	offs := newSecWriter[uint64](f, h.sections[secOffsets].off)
	tgts := newSecWriter[uint32](f, h.sections[secTargets].off)
	var wts *secWriter[float32]
	var lbls *secWriter[uint8]
	if o.Weighted {
		wts = newSecWriter[float32](f, h.sections[secWeights].off)
	}
	if o.Labelled {
		lbls = newSecWriter[uint8](f, h.sections[secLabels].off)
	}
	var rank *ranker
	if w.ids != nil {
		rank = newRanker(w.ids)
	}

	var (
		e        uint64 // edges written
		nextV    int    // next vertex whose offset is unwritten
		srcRank  int    // rank cursor for the (sorted) sources
		maxLabel = -1
		pending  rec
		have     bool
		lastRep  = time.Now()
	)
	// Edges are handled in batches so the target lookups, each a likely
	// cache miss, run in a tight loop the CPU can overlap.
	const batchLen = 8192
	dst := make([]uint32, batchLen)
	process := func(batch []rec) error {
		if rank != nil {
			if err := rank.all(batch, dst); err != nil {
				return err
			}
		} else {
			for i := range batch {
				dst[i] = uint32(batch[i].d)
			}
		}
		for i := range batch {
			r := &batch[i]
			var s uint32
			if rank == nil {
				s = uint32(r.s)
			} else {
				for w.ids[srcRank] < r.s {
					srcRank++
				}
				s = uint32(srcRank)
			}
			for ; nextV <= int(s); nextV++ {
				if err := offs.put(e); err != nil {
					return err
				}
			}
			if err := tgts.put(dst[i]); err != nil {
				return err
			}
			if wts != nil {
				if math.IsInf(float64(r.w), 0) {
					return fmt.Errorf("summed weight of duplicate edges %d -> %d overflows float32", r.s, r.d)
				}
				if err := wts.put(r.w); err != nil {
					return err
				}
			}
			if lbls != nil {
				maxLabel = max(maxLabel, int(r.l))
				if err := lbls.put(r.l); err != nil {
					return err
				}
			}
			e++
		}
		if o.Progress != nil && time.Since(lastRep) >= o.ProgressInterval {
			lastRep = time.Now()
			o.Progress(Progress{Phase: "write", EdgesOut: int64(e), EdgesTotal: w.total, EdgesRead: w.stats.InputEdges})
		}
		return nil
	}
	// The merge (this goroutine) and the lookups and writes (the writer
	// goroutine) run in a pipeline of batches.
	work := make(chan []rec, 4)
	free := make(chan []rec, 6)
	for range cap(free) {
		free <- make([]rec, 0, batchLen)
	}
	writerDone := make(chan error, 1)
	var writerFailed atomic.Bool
	go func() {
		var err error
		for b := range work {
			if err == nil {
				if err = process(b); err != nil {
					writerFailed.Store(true)
				}
			}
			free <- b[:0]
		}
		writerDone <- err
	}()
	batch := <-free
	emit := func(r *rec) error {
		batch = append(batch, *r)
		if len(batch) == batchLen {
			if writerFailed.Load() {
				return errWriterFailed
			}
			work <- batch
			batch = <-free
		}
		return nil
	}
	finishWriter := func(mergeErr error) error {
		if mergeErr == nil && len(batch) > 0 {
			work <- batch
		}
		close(work)
		werr := <-writerDone
		if werr != nil {
			return werr
		}
		return mergeErr
	}
	err := mergeRuns(ctx, runs, o.Weighted, o.Labelled, func(r *rec) error {
		if have && r.s == pending.s && r.d == pending.d {
			w.stats.Duplicates++
			switch o.Duplicates {
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
	if err := finishWriter(err); err != nil {
		return err
	}
	for ; nextV <= w.n; nextV++ {
		if err := offs.put(e); err != nil {
			return err
		}
	}
	for _, s := range []interface{ flush() error }{offs, tgts} {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if wts != nil {
		if err := wts.flush(); err != nil {
			return err
		}
	}
	if lbls != nil {
		if err := lbls.flush(); err != nil {
			return err
		}
		h.numLabels = uint32(maxLabel + 1)
	}
	if w.ids != nil {
		if _, err := f.WriteAt(bytesOf(w.ids), int64(h.sections[secIDs].off)); err != nil {
			return err
		}
		byExt := newSecWriter[uint32](f, h.sections[secByExt].off)
		for v := 0; v < w.n; v++ {
			if err := byExt.put(uint32(v)); err != nil {
				return err
			}
		}
		if err := byExt.flush(); err != nil {
			return err
		}
	}
	if e < uint64(w.total) {
		// Duplicates were dropped: slide the later sections down to where a
		// layout for the final count puts them.
		final := *h
		final.edges = e
		final.layout(len(o.Name))
		for i := secWeights; i < numSections; i++ {
			if err := moveWithin(f, int64(h.sections[i].off), int64(final.sections[i].off), int64(final.sections[i].len)); err != nil {
				return err
			}
		}
		h = &final
		if err := f.Truncate(int64(h.fileSize)); err != nil {
			return err
		}
	}
	sum, err := sectionChecksum(f, h)
	if err != nil {
		return err
	}
	h.checksum = sum
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return err
	}
	w.stats.Vertices = w.n
	w.stats.Edges = int64(e)
	w.stats.OutputBytes = int64(h.fileSize)
	w.stats.Version = fmt.Sprintf("%016x", sum)
	if o.Progress != nil {
		o.Progress(Progress{Phase: "write", EdgesOut: int64(e), EdgesTotal: w.total, EdgesRead: w.stats.InputEdges})
	}
	return nil
}

var errWriterFailed = errors.New("graph writer failed")

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

// ranker maps external ids to dense ids (ranks in the sorted id array):
// through a direct table when the ids span at most 4 V (16 bytes a
// vertex) or the table fits in 512 MiB (SNAP files, mostly), else through the bucketed binary search of idIndex.
type ranker struct {
	lo, span uint64
	table    []uint32
	idx      *idIndex
}

func newRanker(ids []int64) *ranker {
	if len(ids) == 0 {
		return &ranker{idx: newIDIndex(ids)}
	}
	lo := uint64(ids[0])
	span := uint64(ids[len(ids)-1]) - lo
	v := uint64(len(ids))
	if span < math.MaxUint32 && (span < 4*v+1<<22 || span < 1<<27) {
		table := make([]uint32, span+1)
		for i := range table {
			table[i] = NoVertex
		}
		for i, id := range ids {
			table[uint64(id)-lo] = uint32(i)
		}
		return &ranker{lo: lo, span: span, table: table}
	}
	return &ranker{idx: newIDIndex(ids)}
}

// all ranks the targets of batch into out.
func (r *ranker) all(batch []rec, out []uint32) error {
	bad := -1
	if r.table != nil {
		for i := range batch {
			k := uint64(batch[i].d) - r.lo
			if k > r.span {
				bad = i
				continue
			}
			out[i] = r.table[k]
		}
		for i := range batch {
			if out[i] == NoVertex {
				bad = i
			}
		}
	} else if len(r.idx.ids) > 0 {
		// Two passes so the bucket loads, then the id loads, of the whole
		// batch are independent and overlap in the memory system.
		x := r.idx
		last := uint64(len(x.starts) - 1)
		for i := range batch {
			k := (uint64(batch[i].d) - x.min) >> x.shift
			if k >= last {
				bad, out[i] = i, 0
				continue
			}
			out[i] = uint32(k)
		}
		if bad >= 0 {
			return fmt.Errorf("target %d missing from the id set (internal error)", batch[bad].d)
		}
		for i := range batch {
			k := out[i]
			lo, hi := x.starts[k], x.starts[k+1]
			j, ok := slices.BinarySearch(x.ids[lo:hi], batch[i].d)
			if !ok {
				bad = i
			}
			out[i] = lo + uint32(j)
		}
	} else if len(batch) > 0 {
		bad = 0
	}
	if bad >= 0 {
		return fmt.Errorf("target %d missing from the id set (internal error)", batch[bad].d)
	}
	return nil
}
