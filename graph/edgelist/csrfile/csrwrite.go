package csrfile

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// Options say what the graph file holds and how the runs are merged into
// it.
type Options struct {
	// Name is stored in the file.
	Name string
	// Weighted, Labelled and Timed say which optional fields the runs'
	// records carry and the file stores.
	Weighted, Labelled, Timed bool
	// Duplicates says what to do with repeated (source, target, time)
	// records.
	Duplicates graph.DuplicatePolicy
	// Workers is how many goroutines merge parts of the source range.
	Workers int
	// MergeParts is the number of parts of the merge; 0 picks four a
	// worker (one with one worker or few records). The file has the same
	// bytes whatever the number.
	MergeParts int
	// MarkEvery is the records between the spilled runs' marks (as the
	// runs were encoded): where a part starts decoding a run.
	MarkEvery int
	// Progress, if set, is called every ProgressInterval during the merge
	// and once at the end with the edges written and the edges to merge.
	Progress         func(edgesOut, edgesTotal int64)
	ProgressInterval time.Duration
}

// cols are the optional fields the runs' records carry.
func (o Options) cols() extsort.Cols {
	return extsort.Cols{Weighted: o.Weighted, Labelled: o.Labelled, Timed: o.Timed}
}

// Stats say what Write wrote.
type Stats struct {
	Vertices    int
	Edges       int64 // directed edges in the file
	Duplicates  int64 // repeated records merged or dropped
	OutputBytes int64
	Version     string // the file's checksum, graph.Graph's Version
	MergeParts  int    // parts of the merge
	// MergeTime is the parallel merge's wall time, the rest of Write being
	// the ids, the compaction and the checksum.
	MergeTime time.Duration
}

// Write writes the graph file of the merged runs into f: n vertices and
// total directed records before duplicates are resolved, the sorted
// external ids (nil with dense or string ids), and the string table with
// string ids (the runs then map their local ids to dense ids).
func Write(ctx context.Context, f *os.File, runs []extsort.Run, ids []int64, strs *extsort.StringTable, n int, total int64, o Options) (Stats, error) {
	var st Stats
	w := &csrWriter{o: o, ids: ids, strs: strs, n: n, total: total, stats: &st}
	err := w.write(ctx, f, runs)
	st.MergeTime = w.mergeTime
	return st, err
}

// csrWriter turns the merged, sorted edge stream into a graph file. The
// section table is laid out for the edge count before deduplication (an
// upper bound); when duplicates were dropped, the sections after the
// targets are moved down and the file truncated.
//
// The edges are merged and written in parts of the source range, in
// parallel (mergepar.go).
type csrWriter struct {
	o     Options
	ids   []int64              // sorted external ids; nil with dense or string ids
	strs  *extsort.StringTable // with string ids
	n     int
	total int64 // directed edges in the runs
	stats *Stats

	rank     *ranker // nil with dense ids
	e        uint64  // edges written
	maxLabel int
	out      atomic.Int64 // edges written so far, for progress

	mergeTime time.Duration // the parallel merge's wall time, for Stats.MergeTime
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
func (w *csrWriter) write(ctx context.Context, f *os.File, runs []extsort.Run) error {
	h, err := w.layout()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(w.o.Name), int64(offsetOf(h, graph.SectionName))); err != nil {
		return err
	}
	t0 := time.Now()
	if err := w.writeEdges(ctx, f, h, runs); err != nil {
		return err
	}
	w.mergeTime = time.Since(t0)
	if err := w.writeIDs(f, h); err != nil {
		return err
	}
	h, err = w.shrink(f, h)
	if err != nil {
		return err
	}
	return w.seal(f, h)
}

// layout lays out the file for w.total edges.
func (w *csrWriter) layout() (*graph.FileLayout, error) {
	var strBytes uint64
	if w.strs != nil {
		strBytes = w.strs.Bytes
	}
	return graph.NewFileLayout(graph.FileShape{
		Vertices: uint64(w.n), Edges: uint64(w.total), NameBytes: len(w.o.Name),
		Weighted: w.o.Weighted, Labelled: w.o.Labelled, External: w.ids != nil,
		Timed: w.o.Timed, StringIDs: w.strs != nil, StringBytes: strBytes,
	})
}

// offsetOf is section id's offset in the file laid out by h.
func offsetOf(h *graph.FileLayout, id graph.SectionID) uint64 {
	off, _ := h.Section(id)
	return off
}

// progress reports the write phase.
func (w *csrWriter) progress() {
	w.o.Progress(w.out.Load(), w.total)
}

// writeIDs writes the external ids and their index, when there are any.
func (w *csrWriter) writeIDs(f *os.File, h *graph.FileLayout) error {
	switch {
	case w.strs != nil:
		if err := w.writeStrings(f, h); err != nil {
			return err
		}
	case w.ids != nil:
		if _, err := f.WriteAt(bytesOf(w.ids), int64(offsetOf(h, graph.SectionIDs))); err != nil {
			return err
		}
	default:
		return nil
	}
	// Dense ids are ranks of the external ids, so the index that orders
	// them by external id is the identity.
	byExt := newSecWriter[uint32](f, offsetOf(h, graph.SectionByExt), nil)
	for v := 0; v < w.n; v++ {
		if err := byExt.put(uint32(v)); err != nil {
			return err
		}
	}
	return byExt.flush()
}

// writeStrings writes the string table: the offsets from memory, the
// bytes copied from the file extsort.MergeStrings wrote.
func (w *csrWriter) writeStrings(f *os.File, h *graph.FileLayout) error {
	if _, err := f.WriteAt(bytesOf(w.strs.Offs), int64(offsetOf(h, graph.SectionStrOffsets))); err != nil {
		return err
	}
	src, err := os.Open(w.strs.Path)
	if err != nil {
		return fmt.Errorf("read back strings: %w", err)
	}
	defer src.Close()
	buf := make([]byte, 1<<20)
	at := int64(offsetOf(h, graph.SectionStrBytes))
	for done := int64(0); done < int64(w.strs.Bytes); {
		k, err := src.ReadAt(buf[:min(int64(len(buf)), int64(w.strs.Bytes)-done)], done)
		if k == 0 && err != nil {
			return fmt.Errorf("read back strings: %w", err)
		}
		if _, err := f.WriteAt(buf[:k], at+done); err != nil {
			return err
		}
		done += int64(k)
	}
	return nil
}

// idString names dense vertex v by its external id, for messages.
func (w *csrWriter) idString(v int64) string {
	switch {
	case w.strs != nil:
		if v < 0 || v+1 >= int64(len(w.strs.Offs)) {
			return fmt.Sprint(v)
		}
		b := make([]byte, w.strs.Offs[v+1]-w.strs.Offs[v])
		f, err := os.Open(w.strs.Path)
		if err != nil {
			return fmt.Sprintf("(dense id %d)", v)
		}
		defer f.Close()
		if _, err := f.ReadAt(b, int64(w.strs.Offs[v])); err != nil {
			return fmt.Sprintf("(dense id %d)", v)
		}
		return strconv.Quote(string(b))
	case w.ids != nil:
		return fmt.Sprint(v) // merged records carry external ids
	}
	return fmt.Sprint(v)
}

// shrink returns h when every edge was written, else, duplicates having
// been dropped, slides the later sections down to where a layout for the
// final count puts them, truncates f and returns that layout.
func (w *csrWriter) shrink(f *os.File, h *graph.FileLayout) (*graph.FileLayout, error) {
	if w.e == uint64(w.total) {
		return h, nil
	}
	final := h.WithEdges(w.e)
	// The sections after the targets, in file order, so that a move never
	// overwrites a section still to move.
	for _, id := range []graph.SectionID{graph.SectionWeights, graph.SectionLabels, graph.SectionIDs, graph.SectionByExt,
		graph.SectionTimes, graph.SectionByTime, graph.SectionStrOffsets, graph.SectionStrBytes} {
		src, _ := h.Section(id)
		dst, n := final.Section(id)
		if err := moveWithin(f, int64(src), int64(dst), int64(n)); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(int64(final.Size())); err != nil {
		return nil, err
	}
	return final, nil
}

// seal checksums the sections, writes the header and fills in the stats.
func (w *csrWriter) seal(f *os.File, h *graph.FileLayout) error {
	sum, err := h.Checksum(f)
	if err != nil {
		return err
	}
	var numLabels uint32
	if w.o.Labelled {
		numLabels = uint32(w.maxLabel + 1)
	}
	if _, err := f.WriteAt(h.Header(numLabels, sum), 0); err != nil {
		return err
	}
	w.stats.Vertices = w.n
	w.stats.Edges = int64(w.e)
	w.stats.OutputBytes = int64(h.Size())
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

// bytesOf views a slice of fixed-size numbers as bytes, in host order as
// the graph package writes its sections (graph files are little-endian, and
// graph.NewFileLayout refuses a big-endian host).
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
