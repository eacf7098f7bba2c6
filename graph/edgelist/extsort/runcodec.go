package extsort

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Run encoding: per record, uvarint(s - prev s); then uvarint(d - prev d)
// when s repeats, else uvarint(d) (as uint64); then 4 bytes of weight and 1
// of label when present. Sorted runs make both deltas small.
//
// Timed runs are sorted by (s, d, t): after d comes uvarint(t - prev t)
// when s and d repeat (times rise within a pair), else varint(t).
//
// With markEvery > 0 the encoder also records a Mark at every
// markEvery-th record, so the final merge can start decoding a run in the
// middle (the parallel merge of graph/edgelist/csrfile, mergepar.go).
type Encoder struct {
	W *bufio.Writer
	Cols
	ps, pd, pt uint64
	started    bool
	buf        []byte
	MarkEvery  int64
	n          int64 // records encoded, counting from the run's start
	base       int64 // bytes flushed before buf
	Marks      []Mark
}

// Mark is a place where a run's decoder can start: record n begins at
// byte off, and the record before it was (ps, pd). About 40 bytes per
// markEvery records, kept in memory for every spilled run.
type Mark struct {
	Off        int64
	N          int64
	S          int64 // record n's source
	PS, PD, PT uint64
}

// Cols says which optional fields a run's records carry on disk.
type Cols struct{ Weighted, Labelled, Timed bool }

// Pos is a decoder's starting state inside a run: the byte offset of
// record n and the record before it (none when n is 0).
type Pos struct {
	Off        int64
	N          int64
	PS, PD, PT uint64
}

func (e *Encoder) Put(r *Rec, t int64) error {
	e.add(r, t)
	if len(e.buf) >= 256<<10 {
		return e.Flush()
	}
	return nil
}

// add encodes r, at time t, onto the buffer.
func (e *Encoder) add(r *Rec, tm int64) {
	s, d, t := uint64(r.S), uint64(r.D), uint64(tm)
	if e.MarkEvery > 0 && e.n%e.MarkEvery == 0 {
		e.Marks = append(e.Marks, Mark{Off: e.base + int64(len(e.buf)), N: e.n, S: r.S, PS: e.ps, PD: e.pd, PT: e.pt})
	}
	e.n++
	b := binary.AppendUvarint(e.buf, s-e.ps)
	same := e.started && s == e.ps
	if same {
		b = binary.AppendUvarint(b, d-e.pd)
	} else {
		b = binary.AppendUvarint(b, d)
	}
	if e.Timed {
		if same && d == e.pd {
			b = binary.AppendUvarint(b, t-e.pt)
		} else {
			b = binary.AppendVarint(b, tm)
		}
		e.pt = t
	}
	if e.Weighted {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(r.W))
	}
	if e.Labelled {
		b = append(b, r.L)
	}
	e.started = true
	e.ps, e.pd = s, d
	e.buf = b
}

func (e *Encoder) Flush() error {
	_, err := e.W.Write(e.buf)
	e.base += int64(len(e.buf))
	e.buf = e.buf[:0]
	return err
}

// spillSlab is how many records one goroutine encodes at a time when a
// run is spilled.
const spillSlab = 128 << 10

// SlabCoder encodes one slab of a run: its bytes, its distinct sources,
// its marks (offsets relative to the slab) and the chunk its records are
// gathered into.
type SlabCoder struct {
	buf   []byte
	srcs  []int64
	marks []Mark
	chunk []Rec
}

// EncodeRun writes recs in sorted order (order nil: as they are) to w,
// encoding slabs of them on up to len(coders) goroutines, and returns the run's
// distinct sources in order when wantSrcs, and its marks every markEvery
// records (none when markEvery is 0). The bytes are those one encoder
// would write: a slab's encoder starts from the record before it.
//
// coders are reused from run to run; len(*coders) bounds the goroutines.
// When w is an io.WriterAt (a file), the run is written from its start
// with WriteAt, the slabs of a round at once.
func EncodeRun(w io.Writer, recs []Rec, order []KV, times []int64, cols Cols, wantSrcs bool, markEvery int64, coders []SlabCoder) ([]int64, []Mark, error) {
	n := len(recs)
	coders = coders[:max(1, min(len(coders), (n+spillSlab-1)/spillSlab))]
	var srcs []int64
	var marks []Mark
	var written int64
	for lo := 0; lo < n; lo += len(coders) * spillSlab {
		k := min(len(coders), (n-lo+spillSlab-1)/spillSlab)
		ParallelFor(k, func(t int) {
			from := lo + t*spillSlab
			coders[t].encode(recs, order, times, from, min(n, from+spillSlab), cols, wantSrcs, markEvery)
		})
		if wa, ok := w.(io.WriterAt); ok {
			// A file: the slabs are written at their offsets at once, so
			// the copy into the file does not wait for one goroutine.
			offs := make([]int64, k)
			at := written
			for t, c := range coders[:k] {
				offs[t], at = at, at+int64(len(c.buf))
			}
			errs := make([]error, k)
			ParallelFor(k, func(t int) { _, errs[t] = wa.WriteAt(coders[t].buf, offs[t]) })
			if err := errors.Join(errs...); err != nil {
				return nil, nil, err
			}
		}
		for _, c := range coders[:k] {
			if _, ok := w.(io.WriterAt); !ok {
				if _, err := w.Write(c.buf); err != nil {
					return nil, nil, err
				}
			}
			for _, m := range c.marks {
				m.Off += written
				marks = append(marks, m)
			}
			written += int64(len(c.buf))
			ss := c.srcs
			if len(ss) > 0 && len(srcs) > 0 && srcs[len(srcs)-1] == ss[0] {
				ss = ss[1:] // a source that spans two slabs
			}
			srcs = append(srcs, ss...)
		}
	}
	return srcs, marks, nil
}

// encode encodes the records lo..hi of the sorted run.
func (c *SlabCoder) encode(recs []Rec, order []KV, times []int64, lo, hi int, cols Cols, wantSrcs bool, markEvery int64) {
	enc := Encoder{Cols: cols, buf: c.buf[:0], MarkEvery: markEvery, n: int64(lo), Marks: c.marks[:0]}
	tm := func(r *Rec) int64 {
		if times == nil {
			return 0
		}
		return times[r.Seq]
	}
	if lo > 0 {
		p := at(recs, order, lo-1)
		enc.ps, enc.pd, enc.pt, enc.started = uint64(p.S), uint64(p.D), uint64(tm(p)), true
	}
	c.srcs = c.srcs[:0]
	if c.chunk == nil {
		c.chunk = make([]Rec, 4096)
	}
	// Records are gathered into sorted order a chunk at a time: the loads
	// of a chunk are independent, so their cache misses overlap.
	for from := lo; from < hi; from += len(c.chunk) {
		ch := c.chunk[:min(len(c.chunk), hi-from)]
		if order == nil {
			ch = recs[from : from+len(ch)]
		} else {
			for j := range ch {
				ch[j] = recs[order[from+j].Idx]
			}
		}
		for j := range ch {
			if wantSrcs && (len(c.srcs) == 0 || c.srcs[len(c.srcs)-1] != ch[j].S) {
				c.srcs = append(c.srcs, ch[j].S)
			}
			enc.add(&ch[j], tm(&ch[j]))
		}
	}
	c.buf, c.marks = enc.buf, enc.Marks
}

// idMarkEvery is the ids between an id set's marks.
const idMarkEvery = 4096

// IDMark is a place where an id set's decoder can start: the id there
// begins at byte off, and the id before it is prev (0 for the first).
type IDMark struct {
	off  int64
	id   int64
	prev int64
}

// EncodeIDs writes ids as uvarint deltas and returns a mark every
// idMarkEvery ids.
func EncodeIDs(w *bufio.Writer, ids []int64) ([]IDMark, error) {
	var buf [binary.MaxVarintLen64]byte
	var prev uint64
	var off int64
	marks := make([]IDMark, 0, (len(ids)+idMarkEvery-1)/idMarkEvery)
	for i, id := range ids {
		if i%idMarkEvery == 0 {
			marks = append(marks, IDMark{off: off, id: id, prev: int64(prev)})
		}
		n := binary.PutUvarint(buf[:], uint64(id)-prev)
		if _, err := w.Write(buf[:n]); err != nil {
			return nil, err
		}
		off += int64(n)
		prev = uint64(id)
	}
	return marks, nil
}

// idReader streams one run's id set back in order: from memory, or
// decoding the file EncodeIDs wrote.
type idReader struct {
	ids  []int64 // the id set when it was never spilled
	r    *bufio.Reader
	f    *os.File // nil when the reader does not own the file
	name string
	cur  int64
	// pending says cur is already read and is the next id to yield.
	pending bool
}

// openIDsAt returns a reader of the id set in f (shared: it reads with
// ReadAt) from mark m, through a buffer of size bytes.
func openIDsAt(f *os.File, m IDMark, size int) *idReader {
	return &idReader{r: bufio.NewReaderSize(io.NewSectionReader(f, m.off, math.MaxInt64-m.off), size), cur: m.prev, name: f.Name()}
}

func openIDs(rf Run) (*idReader, error) {
	s := &idReader{ids: rf.IDs}
	if rf.IDPath != "" {
		f, err := os.Open(rf.IDPath)
		if err != nil {
			return nil, fmt.Errorf("read back id run: %w", err)
		}
		s.f, s.r, s.name = f, bufio.NewReaderSize(f, 64<<10), rf.IDPath
	}
	return s, nil
}

func (s *idReader) close() {
	if s.f != nil {
		s.f.Close()
	}
}

// next advances cur to the next id; false at the end of the set.
func (s *idReader) next() (bool, error) {
	if s.pending {
		s.pending = false
		return true, nil
	}
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
		return false, fmt.Errorf("read back id run %s: %w", s.name, err)
	}
	s.cur = int64(uint64(s.cur) + d)
	return true, nil
}

// Reader streams a segment of one run back in sorted order, decoding
// straight from its own read buffer. It reads its run's file with ReadAt,
// so the readers of several segments share one open file.
type Reader struct {
	idx        int // run index: ties go to the earlier run
	mem        []Rec
	memT       []int64
	f          *os.File // not the reader's to close
	off        int64    // file offset of buf[end]
	buf        []byte
	pos, end   int
	eof        bool
	left       int64
	Cur        TRec
	ps, pd, pt uint64 // the last record as encoded (run-local ids in a string run)
	first      bool
	Cols
	// remap turns a string run's local ids into the import's dense ids
	// (nil: the run holds dense or external ids already).
	remap []uint32
}

// maxRecBytes is the longest encoded record: three varints, weight, label.
const maxRecBytes = 3*binary.MaxVarintLen64 + 5

// NewReader returns a reader of count records of run rf (file f unless
// it is in memory) from position from, reading through buf (nil: a new
// 256 KiB buffer).
func NewReader(idx int, rf Run, f *os.File, from Pos, count int64, cols Cols, buf []byte) *Reader {
	rr := &Reader{idx: idx, left: count, first: from.N == 0, ps: from.PS, pd: from.PD, pt: from.PT, Cols: cols, remap: rf.Remap}
	if rf.Mem != nil {
		rr.mem = rf.Mem[from.N : from.N+count]
		if rf.MemT != nil {
			rr.memT = rf.MemT[from.N : from.N+count]
		}
	} else if count > 0 {
		if buf == nil {
			buf = make([]byte, 256<<10)
		}
		rr.f, rr.off, rr.buf = f, from.Off, buf
	}
	return rr
}

// Tell returns the decoder's state before its next record.
func (rr *Reader) Tell(n int64) Pos {
	return Pos{Off: rr.off - int64(rr.end-rr.pos), N: n, PS: rr.ps, PD: rr.pd, PT: rr.pt}
}

// fill makes at least maxRecBytes available unless the file ends first.
func (rr *Reader) fill() error {
	if rr.end-rr.pos >= maxRecBytes || rr.eof {
		return nil
	}
	rr.end = copy(rr.buf, rr.buf[rr.pos:rr.end])
	rr.pos = 0
	for rr.end < maxRecBytes && !rr.eof {
		k, err := rr.f.ReadAt(rr.buf[rr.end:], rr.off)
		rr.end += k
		rr.off += int64(k)
		if err == io.EOF {
			rr.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}
func (rr *Reader) corrupt() error {
	return fmt.Errorf("read back run %s: truncated or corrupt with %d records left", rr.f.Name(), rr.left+1)
}

// Next advances to the next record; false at the end of the run.
func (rr *Reader) Next() (bool, error) {
	if rr.left == 0 {
		return false, nil
	}
	rr.left--
	if rr.mem != nil {
		rr.Cur = TRec{Rec: rr.mem[0]}
		rr.mem = rr.mem[1:]
		if rr.memT != nil {
			rr.Cur.T = rr.memT[0]
			rr.memT = rr.memT[1:]
		}
		return true, nil
	}
	if err := rr.fill(); err != nil {
		return false, fmt.Errorf("read back run %s: %w", rr.f.Name(), err)
	}
	b := rr.buf[rr.pos:rr.end]
	ds, n := binary.Uvarint(b)
	if n <= 0 {
		return false, rr.corrupt()
	}
	same := !rr.first && ds == 0
	dd, k := binary.Uvarint(b[n:])
	if k <= 0 {
		return false, rr.corrupt()
	}
	n += k
	s := rr.ps + ds
	d := dd
	if same {
		d = rr.pd + dd
	}
	t := rr.pt
	if rr.Timed {
		if same && dd == 0 {
			var dt uint64
			dt, k = binary.Uvarint(b[n:])
			t += dt
		} else {
			var x int64
			x, k = binary.Varint(b[n:])
			t = uint64(x)
		}
		if k <= 0 {
			return false, rr.corrupt()
		}
		n += k
	}
	rr.first = false
	rr.ps, rr.pd, rr.pt = s, d, t
	rr.Cur = TRec{Rec: Rec{S: int64(s), D: int64(d), W: 1}, T: int64(t)}
	if rr.remap != nil {
		if s >= uint64(len(rr.remap)) || d >= uint64(len(rr.remap)) {
			return false, rr.corrupt()
		}
		rr.Cur.S, rr.Cur.D = int64(rr.remap[s]), int64(rr.remap[d])
	}
	if rr.Weighted {
		if len(b) < n+4 {
			return false, rr.corrupt()
		}
		rr.Cur.W = math.Float32frombits(binary.LittleEndian.Uint32(b[n:]))
		n += 4
	}
	if rr.Labelled {
		if len(b) < n+1 {
			return false, rr.corrupt()
		}
		rr.Cur.L = b[n]
		n++
	}
	rr.pos += n
	return true, nil
}
