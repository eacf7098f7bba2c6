package graph

// The importers share one streaming pipeline, an external sort:
//
//  1. A reader (text or Parquet) hands edges in external ids to a runBuilder,
//     which fills a fixed-size in-memory run (adding the reverse edge for
//     undirected graphs and dropping self-loops).
//  2. A full run is sorted by (src, dst, input position) on a second
//     goroutine and spilled to a temporary file, delta- and varint-coded,
//     together with the sorted set of external ids it mentions; the reader
//     meanwhile fills the other buffer. Memory is two runs, whatever the
//     input size.
//  3. The id sets are merged into the sorted external-id array: dense id =
//     rank of the external id, the same numbering FromEdges uses.
//  4. The edge runs are k-way merged (ties broken by run, so "first" means
//     first in the input), duplicates are resolved by the policy, and the
//     CSR sections are written straight into the output file, which is
//     renamed into place only when complete.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// ImportOptions configure the text and Parquet importers.
type ImportOptions struct {
	// Name is stored in the graph file (default: the input file's base name).
	Name string
	// Undirected adds the reverse of every edge.
	Undirected bool
	// Weighted reads a weight column (third); weights must be finite and > 0.
	Weighted bool
	// Labelled reads a label column (after the weight, if any), 0..255.
	Labelled bool
	// SelfLoops keeps u -> u edges; they are dropped (and counted) otherwise.
	SelfLoops bool
	// Duplicates says what to do with repeated (src, dst) pairs.
	Duplicates DuplicatePolicy
	// DenseIDs says the input ids are already 0..V-1: no id map is stored,
	// V is the largest id + 1 and ids that never appear are isolated
	// vertices. Without it ids may be any int64 and dense ids are their
	// ranks.
	DenseIDs bool
	// TempDir holds the spilled runs (default: the output file's directory,
	// which has room for the output anyway).
	TempDir string
	// RunEdges is the number of directed edges sorted in memory at a time
	// (default 4Mi). Peak memory is about 150 bytes per run edge (two run
	// buffers, sort scratch) plus 16-24 bytes per vertex, whatever the
	// input size.
	RunEdges int
	// Progress, if set, is called (from one goroutine at a time) at most
	// every ProgressInterval (default 2s), and once at the end of each phase.
	Progress         func(Progress)
	ProgressInterval time.Duration

	mergeFan int // tests lower it to exercise merging in rounds
}

// Progress reports how far a long import has got.
type Progress struct {
	Phase      string // "read" or "write"
	EdgesRead  int64  // input edges (lines or rows) accepted so far
	BytesRead  int64  // input bytes consumed so far (read phase)
	TotalBytes int64  // input size, 0 if unknown
	EdgesOut   int64  // CSR edges written so far (write phase)
	EdgesTotal int64  // directed edges to merge (write phase)
}

// ImportStats summarise a finished import.
type ImportStats struct {
	InputEdges       int64 // edges read from the input
	SelfLoopsDropped int64
	Duplicates       int64 // repeated (src, dst) pairs merged or dropped
	Vertices         int
	Edges            int64 // directed edges in the output
	Runs             int   // sorted runs the external sort used
	Bytes            int64 // input bytes read
	OutputBytes      int64
	Version          string
}

// DuplicatePolicy names, as the CLI and documentation spell them.
var duplicateNames = map[DuplicatePolicy]string{
	DupKeepFirst: "keep-first", DupSumWeights: "sum", DupKeepAll: "keep-all", DupError: "error",
}

// String returns the policy's CLI name.
func (p DuplicatePolicy) String() string {
	if s, ok := duplicateNames[p]; ok {
		return s
	}
	return fmt.Sprintf("DuplicatePolicy(%d)", uint8(p))
}

// ParseDuplicatePolicy parses keep-first, sum, keep-all or error.
func ParseDuplicatePolicy(s string) (DuplicatePolicy, error) {
	for p, n := range duplicateNames {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown duplicate policy %q (want keep-first, sum, keep-all or error)", s)
}

// ErrDuplicate is wrapped by the error for a duplicate edge under DupError.
var ErrDuplicate = errors.New("duplicate edge")

const defaultRunEdges = 4 << 20

// errSorterFailed stops the reader; the sorter's own error is reported.
var errSorterFailed = errors.New("sorting runs failed")

// maxMergeFan bounds how many run files are open at once; more runs are
// merged in rounds.
const maxMergeFan = 256

// rec is one directed edge in a run. seq is the position in the run, so
// sorting by (s, d, seq) is a stable sort by (s, d).
type rec struct {
	s, d int64
	w    float32
	seq  uint32
	l    uint8
}

func cmpRec(a, b rec) int {
	if c := cmp.Compare(a.s, b.s); c != 0 {
		return c
	}
	if c := cmp.Compare(a.d, b.d); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// runFile is one sorted run spilled to disk, or (the last one) kept in
// memory.
type runFile struct {
	path   string
	n      int64 // records
	mem    []rec // set when the run was never spilled
	idPath string
	ids    []int64 // set when the id set was never spilled
}

// runBuilder accumulates edges into runs; it is fed by a reader and owns
// the sorting goroutine.
type runBuilder struct {
	ctx   context.Context
	o     ImportOptions
	input string // for messages

	cur     []rec
	dropped []int64 // ids seen only on dropped self-loops in cur
	free    chan []rec
	full    chan sortJob
	done    chan error
	runs    []runFile
	tmpDir  string
	maxID   int64 // DenseIDs: largest id seen
	stats   ImportStats
	lastRep time.Time
	bytes   int64 // set by the reader for progress
	total   int64
	ctxPoll int
	sorter_ runSorter   // used only by the sorter goroutine
	failed  atomic.Bool // the sorter hit an error; stop reading
}

type sortJob struct {
	recs    []rec
	dropped []int64
	spill   bool
}

func newRunBuilder(ctx context.Context, input, tmpDir string, o ImportOptions) *runBuilder {
	b := &runBuilder{ctx: ctx, o: o, input: input, tmpDir: tmpDir, maxID: -1,
		free: make(chan []rec, 2), full: make(chan sortJob, 1), done: make(chan error, 1), lastRep: time.Now()}
	b.free <- make([]rec, 0, o.RunEdges)
	b.free <- nil // allocated on first use, so small inputs hold one buffer
	b.cur = <-b.free
	go b.sorter()
	return b
}

// add takes one input edge. It returns an error only for a cancelled
// context or a failed spill.
func (b *runBuilder) add(s, d int64, w float32, l uint8) error {
	b.stats.InputEdges++
	if b.o.DenseIDs {
		if s < 0 || d < 0 || s >= MaxVertices || d >= MaxVertices {
			return fmt.Errorf("vertex id %d or %d outside [0, %d) with dense ids", s, d, int64(MaxVertices))
		}
		b.maxID = max(b.maxID, s, d)
	}
	if !b.o.Weighted {
		w = 1
	}
	if !b.o.Labelled {
		l = 0
	}
	if s == d && !b.o.SelfLoops {
		b.stats.SelfLoopsDropped++
		if !b.o.DenseIDs {
			// Their ids still name vertices (as in FromEdges); they count
			// against the run so a file of self-loops stays bounded too.
			if len(b.cur)+len(b.dropped) >= b.o.RunEdges {
				if err := b.flush(true); err != nil {
					return err
				}
			}
			b.dropped = append(b.dropped, s)
		}
		return b.tick()
	}
	need := 1
	if b.o.Undirected && s != d {
		need = 2
	}
	if len(b.cur)+len(b.dropped)+need > b.o.RunEdges {
		if err := b.flush(true); err != nil {
			return err
		}
	}
	b.cur = append(b.cur, rec{s: s, d: d, w: w, l: l, seq: uint32(len(b.cur))})
	if need == 2 {
		b.cur = append(b.cur, rec{s: d, d: s, w: w, l: l, seq: uint32(len(b.cur))})
	}
	return b.tick()
}

func (b *runBuilder) tick() error {
	b.ctxPoll++
	if b.ctxPoll&0xffff != 0 {
		return nil
	}
	if err := b.ctx.Err(); err != nil {
		return err
	}
	b.report(false)
	return nil
}

func (b *runBuilder) report(force bool) {
	if b.o.Progress == nil {
		return
	}
	if !force && time.Since(b.lastRep) < b.o.ProgressInterval {
		return
	}
	b.lastRep = time.Now()
	b.o.Progress(Progress{Phase: "read", EdgesRead: b.stats.InputEdges, BytesRead: b.bytes, TotalBytes: b.total})
}

// flush hands the current run to the sorter; a spilled run's buffer comes
// back through free once written, and the reader takes the other one.
func (b *runBuilder) flush(spill bool) error {
	if b.failed.Load() {
		return errSorterFailed
	}
	if len(b.cur) == 0 && len(b.dropped) == 0 {
		return nil
	}
	b.full <- sortJob{recs: b.cur, dropped: b.dropped, spill: spill}
	b.cur, b.dropped = nil, nil
	if !spill {
		return nil
	}
	b.cur = <-b.free
	if b.cur == nil {
		b.cur = make([]rec, 0, b.o.RunEdges)
	}
	b.cur = b.cur[:0]
	return nil
}

// finish sorts the last run (kept in memory), waits for the sorter and
// lets go of the run buffers before the merge.
func (b *runBuilder) finish() ([]runFile, error) {
	err := b.flush(false)
	if cerr := b.closeSorter(); cerr != nil {
		err = cerr
	}
	b.cur = nil
	for len(b.free) > 0 {
		<-b.free
	}
	return b.runs, err
}

func (b *runBuilder) closeSorter() error {
	close(b.full)
	return <-b.done
}

// sorter runs on its own goroutine: it sorts each run and spills it, while
// the reader fills the other buffer.
func (b *runBuilder) sorter() {
	var err error
	for job := range b.full {
		if err == nil { // after an error, drain; the first error is reported
			if err = b.sortRun(job); err != nil {
				b.failed.Store(true)
			}
		}
		if job.spill {
			b.free <- job.recs[:0]
		}
	}
	b.done <- err
}

func (b *runBuilder) sortRun(job sortJob) error {
	recs := job.recs
	order := b.sorter_.sort(recs)
	r := runFile{n: int64(len(recs))}
	if !job.spill {
		// The last run stays in memory; materialise its order.
		if order != nil {
			sorted := make([]rec, len(recs))
			for i := range sorted {
				sorted[i] = recs[order[i].idx]
			}
			recs = sorted
		}
		b.sorter_ = runSorter{} // release the radix buffers before the merge
		r.mem = recs
		if !b.o.DenseIDs {
			var srcs []int64
			for i := range recs {
				if i == 0 || recs[i-1].s != recs[i].s {
					srcs = append(srcs, recs[i].s)
				}
			}
			r.ids = runIDs(srcs, recs, job.dropped, b.o.Undirected)
		}
		b.runs = append(b.runs, r)
		return nil
	}
	var srcs []int64
	var err error
	r.path, err = b.spill(func(w *bufio.Writer) error {
		enc := runEncoder{w: w, weighted: b.o.Weighted, labelled: b.o.Labelled}
		// Records are gathered into sorted order a chunk at a time: the
		// loads of a chunk are independent, so their cache misses overlap.
		chunk := make([]rec, 4096)
		for lo := 0; lo < len(recs); lo += len(chunk) {
			c := chunk[:min(len(chunk), len(recs)-lo)]
			if order == nil {
				c = recs[lo : lo+len(c)]
			} else {
				for j := range c {
					c[j] = recs[order[lo+j].idx]
				}
			}
			for j := range c {
				if !b.o.DenseIDs && (len(srcs) == 0 || srcs[len(srcs)-1] != c[j].s) {
					srcs = append(srcs, c[j].s)
				}
				if err := enc.put(&c[j]); err != nil {
					return err
				}
			}
		}
		return enc.flush()
	})
	if err != nil {
		return err
	}
	if !b.o.DenseIDs {
		ids := runIDs(srcs, recs, job.dropped, b.o.Undirected)
		if r.idPath, err = b.spill(func(w *bufio.Writer) error { return encodeIDs(w, ids) }); err != nil {
			os.Remove(r.path)
			return err
		}
	}
	b.runs = append(b.runs, r)
	return nil
}

func (b *runBuilder) spill(write func(*bufio.Writer) error) (string, error) {
	f, err := os.CreateTemp(b.tmpDir, "walkstage-run-*")
	if err != nil {
		return "", fmt.Errorf("spill run: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("spill run to %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// runIDs returns the sorted set of external ids a sorted run mentions.
// runIDs returns the sorted set of external ids a run mentions, given its
// sorted distinct sources.
func runIDs(srcs []int64, recs []rec, dropped []int64, undirected bool) []int64 {
	if undirected && len(dropped) == 0 {
		// Every target is also a source in an undirected run.
		return srcs
	}
	ids := srcs
	if !undirected {
		ids = slices.Grow(ids, len(recs)+len(dropped))
		for i := range recs {
			ids = append(ids, recs[i].d)
		}
	}
	ids = append(ids, dropped...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Run encoding: per record, uvarint(s - prev s); then uvarint(d - prev d)
// when s repeats, else uvarint(d) (as uint64); then 4 bytes of weight and 1
// of label when present. Sorted runs make both deltas small.
type runEncoder struct {
	w                  *bufio.Writer
	weighted, labelled bool
	ps, pd             uint64
	started            bool
	buf                []byte
}

func (e *runEncoder) put(r *rec) error {
	s, d := uint64(r.s), uint64(r.d)
	b := binary.AppendUvarint(e.buf, s-e.ps)
	if e.started && s == e.ps {
		b = binary.AppendUvarint(b, d-e.pd)
	} else {
		b = binary.AppendUvarint(b, d)
	}
	if e.weighted {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(r.w))
	}
	if e.labelled {
		b = append(b, r.l)
	}
	e.started = true
	e.ps, e.pd = s, d
	e.buf = b
	if len(b) >= 256<<10 {
		return e.flush()
	}
	return nil
}

func (e *runEncoder) flush() error {
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}

func encodeIDs(w *bufio.Writer, ids []int64) error {
	var buf [binary.MaxVarintLen64]byte
	var prev uint64
	for _, id := range ids {
		n := binary.PutUvarint(buf[:], uint64(id)-prev)
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		prev = uint64(id)
	}
	return nil
}

// runReader streams one run back in sorted order, decoding straight from
// its own read buffer.
type runReader struct {
	idx      int // run index: ties go to the earlier run
	mem      []rec
	f        *os.File
	buf      []byte
	pos, end int
	eof      bool
	left     int64
	cur      rec
	ps, pd   uint64
	first    bool
	weighted bool
	labelled bool
}

// maxRecBytes is the longest encoded record: two varints, weight, label.
const maxRecBytes = 2*binary.MaxVarintLen64 + 5

func openRun(idx int, rf runFile, weighted, labelled bool) (*runReader, error) {
	rr := &runReader{idx: idx, mem: rf.mem, left: rf.n, first: true, weighted: weighted, labelled: labelled}
	if rf.mem == nil && rf.n > 0 {
		f, err := os.Open(rf.path)
		if err != nil {
			return nil, fmt.Errorf("read back run: %w", err)
		}
		rr.f, rr.buf = f, make([]byte, 256<<10)
	}
	return rr, nil
}

func (rr *runReader) close() {
	if rr.f != nil {
		rr.f.Close()
	}
}

// fill makes at least maxRecBytes available unless the file ends first.
func (rr *runReader) fill() error {
	if rr.end-rr.pos >= maxRecBytes || rr.eof {
		return nil
	}
	rr.end = copy(rr.buf, rr.buf[rr.pos:rr.end])
	rr.pos = 0
	for rr.end < maxRecBytes && !rr.eof {
		k, err := rr.f.Read(rr.buf[rr.end:])
		rr.end += k
		if err == io.EOF {
			rr.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (rr *runReader) corrupt() error {
	return fmt.Errorf("read back run %s: truncated or corrupt with %d records left", rr.f.Name(), rr.left+1)
}

// next advances to the next record; false at the end of the run.
func (rr *runReader) next() (bool, error) {
	if rr.left == 0 {
		return false, nil
	}
	rr.left--
	if rr.mem != nil {
		rr.cur = rr.mem[0]
		rr.mem = rr.mem[1:]
		return true, nil
	}
	if err := rr.fill(); err != nil {
		return false, fmt.Errorf("read back run %s: %w", rr.f.Name(), err)
	}
	b := rr.buf[rr.pos:rr.end]
	ds, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return false, rr.corrupt()
	}
	dd, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 {
		return false, rr.corrupt()
	}
	n := n1 + n2
	s := rr.ps + ds
	d := dd
	if !rr.first && ds == 0 {
		d = rr.pd + dd
	}
	rr.first = false
	rr.ps, rr.pd = s, d
	rr.cur = rec{s: int64(s), d: int64(d), w: 1}
	if rr.weighted {
		if len(b) < n+4 {
			return false, rr.corrupt()
		}
		rr.cur.w = math.Float32frombits(binary.LittleEndian.Uint32(b[n:]))
		n += 4
	}
	if rr.labelled {
		if len(b) < n+1 {
			return false, rr.corrupt()
		}
		rr.cur.l = b[n]
		n++
	}
	rr.pos += n
	return true, nil
}

// runLess orders run readers by their current record, then run index.
func runLess(a, b *runReader) bool {
	if a.cur.s != b.cur.s {
		return a.cur.s < b.cur.s
	}
	if a.cur.d != b.cur.d {
		return a.cur.d < b.cur.d
	}
	return a.idx < b.idx
}

// siftDown restores the heap order below i.
func siftDown(h []*runReader, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && runLess(h[c+1], h[c]) {
			c++
		}
		if !runLess(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// mergeRuns calls emit for every record of runs in (s, d, run, position)
// order.
func mergeRuns(ctx context.Context, runs []runFile, weighted, labelled bool, emit func(r *rec) error) error {
	h := make([]*runReader, 0, len(runs))
	defer func() {
		for _, rr := range h {
			rr.close()
		}
	}()
	for i, rf := range runs {
		rr, err := openRun(i, rf, weighted, labelled)
		if err != nil {
			return err
		}
		ok, err := rr.next()
		if err != nil {
			rr.close()
			return err
		}
		if !ok {
			rr.close()
			continue
		}
		h = append(h, rr)
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	var n int
	for len(h) > 0 {
		top := h[0]
		if err := emit(&top.cur); err != nil {
			return err
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		if !ok {
			top.close()
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		siftDown(h, 0)
		if n++; n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceRuns merges groups of runs into bigger runs until at most
// maxMergeFan remain, so the final merge never holds too many files open.
// Groups are consecutive runs, so input order (and with it "first") is kept.
func (b *runBuilder) reduceRuns(runs []runFile) ([]runFile, error) {
	fan := b.o.mergeFan
	if fan < 2 {
		fan = maxMergeFan
	}
	for len(runs) > fan {
		var next []runFile
		for lo := 0; lo < len(runs); lo += fan {
			group := runs[lo:min(lo+fan, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			merged := runFile{}
			var err error
			merged.path, err = b.spill(func(w *bufio.Writer) error {
				enc := runEncoder{w: w, weighted: b.o.Weighted, labelled: b.o.Labelled}
				err := mergeRuns(b.ctx, group, b.o.Weighted, b.o.Labelled, func(r *rec) error {
					merged.n++
					return enc.put(r)
				})
				if err != nil {
					return err
				}
				return enc.flush()
			})
			if err == nil && !b.o.DenseIDs {
				var ids []int64
				if ids, err = mergeIDs(b.ctx, group); err == nil {
					merged.idPath, err = b.spill(func(w *bufio.Writer) error { return encodeIDs(w, ids) })
				}
			}
			if err != nil {
				removeRuns(next)
				removeRuns([]runFile{merged})
				return nil, err
			}
			removeRuns(group)
			next = append(next, merged)
		}
		runs = next
	}
	return runs, nil
}

func removeRuns(runs []runFile) {
	for _, r := range runs {
		if r.path != "" {
			os.Remove(r.path)
		}
		if r.idPath != "" {
			os.Remove(r.idPath)
		}
	}
}

// mergeIDs merges the runs' id sets into the sorted external-id array.
func mergeIDs(ctx context.Context, runs []runFile) ([]int64, error) {
	type src struct {
		ids []int64
		r   *bufio.Reader
		f   *os.File
		cur int64
	}
	var srcs []*src
	defer func() {
		for _, s := range srcs {
			if s.f != nil {
				s.f.Close()
			}
		}
	}()
	advance := func(s *src) (bool, error) {
		if s.r == nil {
			if len(s.ids) == 0 {
				return false, nil
			}
			s.cur, s.ids = s.ids[0], s.ids[1:]
			return true, nil
		}
		d, err := binary.ReadUvarint(s.r)
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read back id run %s: %w", s.f.Name(), err)
		}
		s.cur = int64(uint64(s.cur) + d)
		return true, nil
	}
	var live []*src
	for _, rf := range runs {
		s := &src{ids: rf.ids}
		if rf.idPath != "" {
			f, err := os.Open(rf.idPath)
			if err != nil {
				return nil, fmt.Errorf("read back id run: %w", err)
			}
			s.f, s.r = f, bufio.NewReaderSize(f, 64<<10)
		}
		srcs = append(srcs, s)
		ok, err := advance(s)
		if err != nil {
			return nil, err
		}
		if ok {
			live = append(live, s)
		}
	}
	var out []int64
	if len(live) == 1 && live[0].r == nil {
		return append([]int64{live[0].cur}, live[0].ids...), nil
	}
	// Id sets are much smaller than edge runs, so a linear scan for the
	// minimum over the live sources is fine.
	for len(live) > 0 {
		m := live[0].cur
		for _, s := range live[1:] {
			m = min(m, s.cur)
		}
		out = append(out, m)
		for i := 0; i < len(live); {
			s := live[i]
			if s.cur != m {
				i++
				continue
			}
			ok, err := advance(s)
			if err != nil {
				return nil, err
			}
			if !ok {
				live = slices.Delete(live, i, i+1)
				continue
			}
			i++
		}
		if len(out)&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// idIndex finds an external id's rank in the sorted id array (see
// ranker.all): a bucket table on the id's offset from the minimum narrows
// the binary search to a few entries for evenly spread ids, and degrades to
// log V for skewed ones.
type idIndex struct {
	ids    []int64
	min    uint64
	shift  uint
	starts []uint32
}

func newIDIndex(ids []int64) *idIndex {
	x := &idIndex{ids: ids}
	if len(ids) == 0 {
		return x
	}
	x.min = uint64(ids[0])
	span := uint64(ids[len(ids)-1]) - x.min
	nb := uint64(1) << max(1, bits.Len(uint(len(ids)))) // about 1-2 ids a bucket
	for span>>x.shift >= nb {
		x.shift++
	}
	buckets := span>>x.shift + 1
	x.starts = make([]uint32, buckets+1)
	i := 0
	for b := uint64(0); b <= buckets; b++ {
		for i < len(ids) && (uint64(ids[i])-x.min)>>x.shift < b {
			i++
		}
		x.starts[b] = uint32(i)
	}
	return x
}

// importInto runs the whole pipeline: read feeds the run builder, then the
// output file is written atomically at out.
func importInto(ctx context.Context, input, out string, o ImportOptions, totalBytes int64, read func(b *runBuilder) error) (*ImportStats, error) {
	if o.RunEdges <= 0 {
		o.RunEdges = defaultRunEdges
	}
	o.RunEdges = min(max(o.RunEdges, 2), 1<<30) // positions in a run are uint32
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 2 * time.Second
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))
	}
	if len(o.Name) > maxNameBytes {
		return nil, fmt.Errorf("import %s: graph name is %d bytes, limit %d", input, len(o.Name), maxNameBytes)
	}
	if _, ok := duplicateNames[o.Duplicates]; !ok {
		return nil, fmt.Errorf("import %s: %v", input, o.Duplicates)
	}
	tmpDir := o.TempDir
	if tmpDir == "" {
		tmpDir = filepath.Dir(out)
	}
	b := newRunBuilder(ctx, input, tmpDir, o)
	b.total = totalBytes
	readErr := read(b)
	runs, finErr := b.finish()
	defer func() { removeRuns(runs) }()
	if readErr != nil && !errors.Is(readErr, errSorterFailed) {
		return nil, readErr
	}
	if finErr != nil {
		return nil, fmt.Errorf("import %s: %w", input, finErr)
	}
	st0 := len(runs)
	var err error
	if runs, err = b.reduceRuns(runs); err != nil {
		return nil, fmt.Errorf("import %s: %w", input, err)
	}
	b.report(true)
	st := b.stats
	st.Runs = st0
	st.Bytes = b.bytes
	var ids []int64
	var n int
	if o.DenseIDs {
		n = int(b.maxID + 1)
	} else {
		if ids, err = mergeIDs(ctx, runs); err != nil {
			return nil, fmt.Errorf("import %s: %w", input, err)
		}
		if ids == nil {
			ids = []int64{} // an id map with no entries, as FromEdges builds
		}
		n = len(ids)
	}
	if n > MaxVertices {
		return nil, fmt.Errorf("import %s: %d vertices exceeds the limit %d", input, n, MaxVertices)
	}
	var total int64
	for _, r := range runs {
		total += r.n
	}
	w := &csrWriter{input: input, o: o, ids: ids, n: n, total: total, stats: &st}
	if err := writeAtomic(out, func(f *os.File) error { return w.write(ctx, f, runs) }); err != nil {
		return nil, fmt.Errorf("import %s: %w", input, err)
	}
	return &st, nil
}
