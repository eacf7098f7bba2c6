package edgelist

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// defaultBatchRows is how many rows a Parquet decoder hands over at a
// time: about 1.4 MB of decoded columns, large enough that handing over
// costs nothing, small enough that a huge row group needs no more memory
// than a small one.
const defaultBatchRows = 64 << 10

// pqPart is a row group to decode, or the rows [from, to) of one: a file
// with fewer row groups than decoders is read in parts of its row groups
// (see pqParts). to is -1 for the group's end.
type pqPart struct {
	gi       int
	rg       parquet.RowGroup
	from, to int64
}

// pqDecoder turns row groups into batches of validated edges. It reads the
// pages' decoded values as typed slices (and dictionaries by index) rather
// than as parquet.Value, which is most of what makes it fast.
type pqDecoder struct {
	cols []pqCol
	o    ImportOptions
	pool *batchPool
	rows int // rows a batch
	// columnsAtOnce reads a batch's columns on a goroutine each, for files
	// with fewer row groups than workers.
	columnsAtOnce bool
}

// decode emits the row group's edges in batches, the last one carrying the
// error that stopped it, if any.
func (d *pqDecoder) decode(p pqPart, emit func(*edgeBatch) bool) {
	chunks := p.rg.ColumnChunks()
	cols := make([]pqColumn, len(d.cols))
	for i, c := range d.cols {
		cols[i] = pqColumn{pqCol: c, pages: chunks[c.index].Pages()}
	}
	defer func() {
		for i := range cols {
			cols[i].close()
		}
	}()
	if p.from > 0 {
		for i := range cols {
			if err := cols[i].pages.SeekToRow(p.from); err != nil {
				e := d.pool.get()
				e.part, e.firstRow = p.gi, p.from
				e.err = fmt.Errorf("row group %d row %d: column %q: %w", p.gi, p.from, cols[i].name, err)
				emit(e)
				return
			}
		}
	}
	var ints []int64 // scratch for labels
	var floats []float64
	for row := p.from; ; {
		e := d.pool.get()
		e.part, e.firstRow = p.gi, row
		n := d.rows
		if p.to >= 0 {
			n = int(min(int64(n), p.to-row))
		}
		done := d.fill(e, cols, n, &ints, &floats)
		row += int64(len(e.src))
		if !emit(e) || done || row == p.to {
			return
		}
	}
}

// fill reads up to n rows into e, every column in lockstep, and reports
// whether the row group is finished: read to its end, or stopped at a bad
// row (e.err says which and why, e holding the rows before it).
func (d *pqDecoder) fill(e *edgeBatch, cols []pqColumn, n int, ints *[]int64, floats *[]float64) bool {
	e.src, e.dst = resize(e.src, n), resize(e.dst, n)
	var got [5]int
	var errs [5]error
	reads := []func(){
		func() { got[0], errs[0] = d.ids(&cols[0], e.src) },
		func() { got[1], errs[1] = d.ids(&cols[1], e.dst) },
	}
	if d.o.StringIDs {
		reads = []func(){
			func() { got[0], errs[0] = cols[0].strings(e, e.src, d.o.hashSeed) },
			func() { got[1], errs[1] = cols[1].strings(e, e.dst, d.o.hashSeed) },
		}
	}
	if d.o.Weighted {
		*floats = resize(*floats, n)
		e.w = resize(e.w, n)
		j := len(reads)
		reads = append(reads, func() { got[j], errs[j] = weights(&cols[j], e.w, *floats) })
	}
	if d.o.Labelled {
		*ints = resize(*ints, n)
		e.l = resize(e.l, n)
		j := len(reads)
		reads = append(reads, func() { got[j], errs[j] = labels(&cols[j], e.l, *ints) })
	}
	if d.o.timed {
		e.t = resize(e.t, n)
		j := len(reads)
		reads = append(reads, func() { got[j], errs[j] = cols[j].ints(e.t) })
	}
	i := len(reads)
	if d.columnsAtOnce {
		// The columns of a row group are independent until they are
		// joined here: with fewer row groups than workers, reading them
		// at once is the parallelism left.
		extsort.ParallelFor(i, func(j int) { reads[j]() })
	} else {
		for _, read := range reads {
			read()
		}
	}
	k, most := got[0], got[0]
	for _, g := range got[1:i] {
		k, most = min(k, g), max(most, g)
	}
	e.src, e.dst = e.src[:k], e.dst[:k]
	if e.w != nil {
		e.w = e.w[:k]
	}
	if e.l != nil {
		e.l = e.l[:k]
	}
	if e.t != nil {
		e.t = e.t[:k]
	}
	if d.o.StringIDs {
		e.joinLoops(0)
	}
	if d.o.DenseIDs {
		e.maxID = max(maxOf(e.src), maxOf(e.dst))
	}
	if k == n {
		return false
	}
	// Some column stopped at row k: the first one (in column order) with
	// an error there names the bad value; otherwise they all ended, and
	// they must end together.
	row := e.firstRow + int64(k)
	for j := range i {
		if got[j] == k && errs[j] != nil && errs[j] != errEOF {
			e.err = fmt.Errorf("row group %d row %d: %w", e.part, row, errs[j])
			return true
		}
	}
	if most > k {
		short := 0
		for got[short] != k {
			short++
		}
		e.err = fmt.Errorf("row group %d row %d: column %q ends here, the others go on", e.part, row, cols[short].name)
	}
	return true
}

// ids reads src or dst values into dst; with dense ids, a value outside
// [0, MaxVertices) stops the column.
func (d *pqDecoder) ids(c *pqColumn, dst []int64) (int, error) {
	n, err := c.ints(dst)
	if d.o.DenseIDs {
		for i, x := range dst[:n] {
			if uint64(x) >= graph.MaxVertices {
				return i, fmt.Errorf("%s id %d outside [0, %d) with dense ids", c.name, x, int64(graph.MaxVertices))
			}
		}
	}
	return n, err
}

// weights reads a weight column into dst, stopping at a weight that is not
// a finite number > 0.
func weights(c *pqColumn, dst []float32, scratch []float64) (int, error) {
	n, err := c.floats(scratch)
	for i, x := range scratch[:n] {
		if !(x > 0) || x > math.MaxFloat32 {
			return i, fmt.Errorf("bad weight %v (want a finite number > 0)", x)
		}
		dst[i] = float32(x)
	}
	return n, err
}

// labels reads a label column into dst, stopping at a label outside
// [0, 255].
func labels(c *pqColumn, dst []uint8, scratch []int64) (int, error) {
	n, err := c.ints(scratch)
	for i, x := range scratch[:n] {
		if uint64(x) > 255 {
			return i, fmt.Errorf("bad label %d (want an integer in [0, 255])", x)
		}
		dst[i] = uint8(x)
	}
	return n, err
}

// pqColumn reads one column chunk of a row group page by page.
type pqColumn struct {
	pqCol
	pages parquet.Pages
	page  parquet.Page
	vals  encoding.Values // the page's values, or its dictionary indexes
	dict  encoding.Values // the dictionary's values when the page has one
	coded bool            // the page is dictionary-coded
	off   int             // values of the page consumed
	n     int             // values of the page usable: up to its first null
	stop  error           // why the column cannot go past the current page's n
	eof   bool
}

var errEOF = errors.New("end of column") // a column read to its end

func (c *pqColumn) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.pages.Close()
}

// next makes the next page current. It returns errEOF at the end of the
// column, or the error that stops the column here.
func (c *pqColumn) next() error {
	switch {
	case c.stop != nil:
		return c.stop
	case c.eof:
		return errEOF
	}
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	p, err := c.pages.ReadPage()
	if err == io.EOF {
		c.eof = true
		return errEOF
	}
	if err != nil {
		c.stop = fmt.Errorf("column %q: %w", c.name, err)
		return c.stop
	}
	c.page, c.off, c.n = p, 0, int(p.NumValues())
	c.vals, c.coded = p.Data(), false
	if dict := p.Dictionary(); dict != nil {
		c.dict, c.coded = dict.Page().Data(), true
	}
	if p.NumNulls() > 0 {
		for i, l := range p.DefinitionLevels() {
			if l < c.maxDef {
				c.n, c.stop = i, fmt.Errorf("null %s", c.name)
				break
			}
		}
	}
	// Values before the first null are the rows' values in order; a page
	// that has fewer is damaged, as is one of an unexpected type.
	if have, ok := c.typedLen(); !ok || have < c.n {
		c.n, c.stop = 0, fmt.Errorf("column %q: a page holds %d values of type %v for %d rows", c.name, have, c.vals.Kind(), c.n)
	}
	return nil
}

// typedLen returns how many values the current page's data holds, and
// false when their type is not the column's (or dictionary indexes).
func (c *pqColumn) typedLen() (int, bool) {
	want := encodingKind(c.kind)
	if c.coded {
		if c.dict.Kind() != want {
			return 0, false
		}
		want = encoding.Int32
	}
	if c.vals.Kind() != want {
		return 0, false
	}
	return valueCount(&c.vals), true
}

// valueCount is the number of values in v.
func valueCount(v *encoding.Values) int {
	if v.Kind() == encoding.ByteArray {
		_, offs := v.ByteArray()
		return max(0, len(offs)-1)
	}
	return int(v.Size()) / typeSize(v.Kind())
}

// encodingKind maps a column's physical type to the kind of its decoded
// values (the two enumerations number them differently).
func encodingKind(k parquet.Kind) encoding.Kind {
	switch k {
	case parquet.Int32:
		return encoding.Int32
	case parquet.Int64:
		return encoding.Int64
	case parquet.Float:
		return encoding.Float
	case parquet.Double:
		return encoding.Double
	case parquet.ByteArray:
		return encoding.ByteArray
	}
	return encoding.Undefined
}

func typeSize(k encoding.Kind) int {
	if k == encoding.Int64 || k == encoding.Double {
		return 8
	}
	return 4
}

// ints reads up to len(dst) values of an INT32 or INT64 column. It returns
// the values read and, when fewer than len(dst), why: errEOF at the end,
// or the error that stopped the column.
func (c *pqColumn) ints(dst []int64) (int, error) {
	return readColumn(c, dst, func(d []int64) int {
		switch {
		case c.coded && c.kind == parquet.Int32:
			return gather(d, c.vals.Int32()[c.off:], c.dict.Int32())
		case c.coded:
			return gather(d, c.vals.Int32()[c.off:], c.dict.Int64())
		case c.kind == parquet.Int32:
			return widen(d, c.vals.Int32()[c.off:])
		default:
			return copy(d, c.vals.Int64()[c.off:])
		}
	})
}

// floats is ints for FLOAT and DOUBLE columns.
func (c *pqColumn) floats(dst []float64) (int, error) {
	return readColumn(c, dst, func(d []float64) int {
		switch {
		case c.coded && c.kind == parquet.Float:
			return gather(d, c.vals.Int32()[c.off:], c.dict.Float())
		case c.coded:
			return gather(d, c.vals.Int32()[c.off:], c.dict.Double())
		case c.kind == parquet.Float:
			return widen(d, c.vals.Float()[c.off:])
		default:
			return copy(d, c.vals.Double()[c.off:])
		}
	})
}

// readColumn fills dst from c page by page: take copies the current page's
// values from c.off into its argument (as many as fit) and returns how many
// it took; fewer means a dictionary index out of range.
func readColumn[T any](c *pqColumn, dst []T, take func([]T) int) (int, error) {
	k := 0
	for k < len(dst) {
		if c.off == c.n {
			if err := c.next(); err != nil {
				return k, err
			}
			continue
		}
		m := min(len(dst)-k, c.n-c.off)
		ok := take(dst[k : k+m])
		if k, c.off = k+ok, c.off+ok; ok < m {
			return k, c.badIndex()
		}
	}
	return k, nil
}

// badIndex stops the column at a dictionary index out of range.
func (c *pqColumn) badIndex() error {
	c.stop = fmt.Errorf("column %q: dictionary index %d out of range (%d entries)", c.name,
		c.vals.Int32()[c.off], valueCount(&c.dict))
	c.n = c.off
	return c.stop
}

// strings reads up to len(refs) values of a BYTE_ARRAY id column (src or
// dst) and stages them in e, their batch places in refs, stopping at a
// value that is not a string id (checkStringID). It returns the values
// read and, when fewer than len(refs), why (see ints).
func (c *pqColumn) strings(e *edgeBatch, refs []int64, seed maphash.Seed) (int, error) {
	k := 0
	for k < len(refs) {
		if c.off == c.n {
			if err := c.next(); err != nil {
				return k, err
			}
			continue
		}
		m := min(len(refs)-k, c.n-c.off)
		var data []byte
		var offs []uint32
		var idx []int32
		if c.coded {
			idx = c.vals.Int32()[c.off : c.off+m]
			data, offs = c.dict.ByteArray()
		} else {
			data, offs = c.vals.ByteArray()
		}
		for i := range m {
			j := c.off + i
			if c.coded {
				if uint32(idx[i]) >= uint32(len(offs)-1) {
					c.off += i
					return k + i, c.badIndex()
				}
				j = int(idx[i])
			}
			s := data[offs[j]:offs[j+1]]
			if err := checkStringID(s); err != nil {
				c.off += i
				return k + i, fmt.Errorf("bad %s id %q: %v", c.name, s, err)
			}
			if c.name == "src" {
				refs[k+i] = e.stageSrc(s, seed)
			} else {
				refs[k+i] = e.stageDst(s, seed)
			}
		}
		k, c.off = k+m, c.off+m
	}
	return k, nil
}

// widen converts len(dst) values of src; it returns len(dst).
func widen[S int32 | float32, T int64 | float64](dst []T, src []S) int {
	src = src[:len(dst)]
	for i, x := range src {
		dst[i] = T(x)
	}
	return len(dst)
}

// gather looks up len(dst) dictionary indexes; it returns how many it
// could, stopping at the first index out of range.
func gather[S int32 | int64 | float32 | float64, T int64 | float64](dst []T, idx []int32, dict []S) int {
	idx = idx[:len(dst)]
	for i, j := range idx {
		if uint32(j) >= uint32(len(dict)) {
			return i
		}
		dst[i] = T(dict[j])
	}
	return len(dst)
}

// resize returns s with length n, reusing its array when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// maxOf returns the largest value of s, or -1 when s is empty.
func maxOf(s []int64) int64 {
	m := int64(-1)
	for _, x := range s {
		m = max(m, x)
	}
	return m
}
