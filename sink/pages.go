package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The row group encoder: a small page writer for the one schema the sink
// writes. A CPU profile of the GPU engine's output path on 16 cores (issue
// 14) put 60% of the process in parquet-go's row path: assembling rows into
// column buffers, a per-level histogram loop (20% alone), growing buffers
// and its DELTA_BINARY_PACKED encoder. Here each row group becomes a small
// standalone Parquet file ("fragment") written directly from the chunks:
// external ids are mapped, bounds taken and values encoded in one pass per
// page, levels are produced as runs without materialising them. The part
// writer is still parquet-go: it opens each fragment and copies its column
// chunks verbatim (its WriteRowGroup copy path, which checks that type,
// codec, encodings and page version match its own configuration), and
// writes the part's footer, metadata and page index.
//
// Pages are data page v1: their levels are compressed with their values,
// which makes the repetition levels (a run of 0 and a run of 1 per walk)
// nearly free; in v2 pages they stay uncompressed, about 5 bytes per walk.

// rowSplit and rowDelta are the part writers' schemas: Row's columns, with
// the walk values in the encoding named by WalkEncoding. Start repeats for
// the walks of one seed and ascends with it for "all vertices" seeds, so
// delta encoding makes it almost free.
type rowSplit struct {
	WalkID int64   `parquet:"walk_id,delta"`
	Start  int64   `parquet:"start,delta"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list" parquet-element:",split"`
}

type rowDelta struct {
	WalkID int64   `parquet:"walk_id,delta"`
	Start  int64   `parquet:"start,delta"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list" parquet-element:",delta"`
}

// rowGroupWriter is the part of parquet-go's GenericWriter the parts use.
type rowGroupWriter interface {
	WriteRowGroup(parquet.RowGroup) (int64, error)
	Close() error
}

func newPartWriter(enc WalkEncoding, out io.Writer, opts ...parquet.WriterOption) rowGroupWriter {
	if enc == DeltaBinaryPacked {
		return parquet.NewGenericWriter[rowDelta](out, opts...)
	}
	return parquet.NewGenericWriter[rowSplit](out, opts...)
}

// fileSchema returns the footer schema parquet-go writes for enc, which
// fragments reuse so the part writer sees its own schema in them. It
// depends on the row type alone: the parts' options (codec, metadata, a
// 1 MiB write buffer) would only cost each new batch writer an allocation
// the size of that buffer, which was most of the 0.34 ms the stage's engine
// loop spent creating each batch's writer.
func fileSchema(enc WalkEncoding) ([]format.SchemaElement, error) {
	var buf bytes.Buffer
	pw := newPartWriter(enc, &buf)
	if err := pw.Close(); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	s := f.Metadata().Schema
	// walk_id, start, length, and the list: walk (group), list (repeated
	// group), element. The encoder below relies on this shape.
	if len(s) != 7 || s[6].Name != "element" || s[5].RepetitionType.V != format.Repeated {
		return nil, fmt.Errorf("sink: unexpected Parquet schema %v", s)
	}
	return s, nil
}

// Page sizes: a page of walk values holds about this many values (1 MiB
// of int64, parquet-go's page size too); walks are never split.
const pageValues = 1 << 17

// column is one column chunk being written into a fragment.
type column struct {
	typ      format.Type
	path     []string
	encoding format.Encoding
	levels   bool // the list's leaf: repetition and definition levels
	order    format.BoundaryOrder

	start            int64 // offset of the first page in the fragment
	values, rows     int64
	uncompressed     int64
	pages            int32
	min, max         int64
	index            format.ColumnIndex
	locations        []format.PageLocation
	repHist, defHist [2]int64
	crc              uint32 // CRC32C of the pages so far (sectionSum)
	lastCompressed   int32  // the last page's compressed size, kept by reset
}

func (c *column) reset(start int64) {
	*c = column{typ: c.typ, path: c.path, encoding: c.encoding, levels: c.levels, order: c.order, start: start, lastCompressed: c.lastCompressed,
		index: format.ColumnIndex{NullPages: c.index.NullPages[:0], MinValues: c.index.MinValues[:0],
			MaxValues: c.index.MaxValues[:0], NullCounts: c.index.NullCounts[:0]},
		locations: c.locations[:0]}
}

// fragmentEncoder writes row groups as fragments; one per encoding
// goroutine, its buffers reused from row group to row group.
type fragmentEncoder struct {
	w      *BatchWriter
	schema []format.SchemaElement
	codec  *pageCodec
	cols   [4]column

	seg, idx []int32  // per row of the group: segment index, walk index
	ext      []int64  // a page's values
	flat     []uint32 // a page's vertices, for splitDense
	lens     []int32
	body     []byte               // a page before compression
	segs     []int                // its segments' boundaries
	zeros    int                  // zero bytes after body, not written (pageCodec.encode)
	rawGuess int                  // framedWalkPage: raw streams of the last framed page
	laid     []byte               // framedWalkPage: a page's streams laid out again
	deltas   [dbpBlock + 1]uint64 // framedDeltaPage: a block's deltas
	header   []byte
	out      []byte       // the fragment
	sums     []sectionSum // its column chunks' CRC32Cs
	thrift   thrift.CompactProtocol
}

func newFragmentEncoder(w *BatchWriter) (*fragmentEncoder, error) {
	codec, err := newPageCodec(w.cfg.compression, w.cfg.zstdLevel)
	if err != nil {
		return nil, err
	}
	e := &fragmentEncoder{codec: codec}
	e.cols = [4]column{
		{typ: format.Int64, path: []string{"walk_id"}, encoding: format.DeltaBinaryPacked, order: format.Ascending},
		{typ: format.Int64, path: []string{"start"}, encoding: format.DeltaBinaryPacked, order: format.Unordered},
		{typ: format.Int32, path: []string{"length"}, encoding: format.Plain, order: format.Unordered},
		{typ: format.Int64, path: []string{"walk", "list", "element"}, levels: true, order: format.Unordered},
	}
	e.attach(w)
	return e, nil
}

// attach makes e encode w's row groups (an encoder from Buffers served
// another writer before, with the same codec).
func (e *fragmentEncoder) attach(w *BatchWriter) {
	e.w, e.schema = w, w.schema
	e.cols[3].encoding = format.ByteStreamSplit
	if w.cfg.walkEncoding == DeltaBinaryPacked {
		e.cols[3].encoding = format.DeltaBinaryPacked
	}
}

var errNoWalks = errors.New("row group without walks")

// encode returns the fragment of row group gr and its steps. The returned
// slice is the encoder's buffer: valid until the next call.
func (e *fragmentEncoder) encode(gr *group) ([]byte, int64, error) {
	n := gr.rows
	if n == 0 {
		return nil, 0, errNoWalks
	}
	rows, err := e.order(gr)
	if err != nil {
		return nil, 0, err
	}
	// The fragment grows page by page: start it at about its final size
	// (walks compress to under 3.5 bytes a vertex, staged at 4: 2.95 at
	// R-MAT scale 22 in DELTA_BINARY_PACKED, 3.23 for random 24-bit ids),
	// so that appends do not copy it again and again (0.6 core-s of a
	// scale-22 run on the 16-core host).
	if want := int(gr.staged * 7 / 8); cap(e.out) < want {
		e.out = make([]byte, 0, want)
	}
	e.out = append(e.out[:0], "PAR1"...)
	// walk_id: base, base+1, ...
	c := &e.cols[0]
	c.reset(int64(len(e.out)))
	e.ext = grow(e.ext, n)
	for r := range n {
		e.ext[r] = int64(gr.base) + int64(r)
	}
	if err := e.int64Page(c, e.ext[:n], int64(gr.base), int64(gr.base)+int64(n)-1, n, nil); err != nil {
		return nil, 0, err
	}
	steps, err := e.startColumn(gr, rows)
	if err != nil {
		return nil, 0, err
	}
	// length: steps per walk.
	c = &e.cols[2]
	c.reset(int64(len(e.out)))
	if cap(e.lens) < n {
		e.lens = make([]int32, n)
	}
	lens := e.lens[:n]
	for r := range n {
		lens[r] = int32(len(rows.walk(r)) - 1)
	}
	if err := e.int32Page(c, lens); err != nil {
		return nil, 0, err
	}
	if err := e.walkColumn(gr, rows, lens); err != nil {
		return nil, 0, err
	}
	if err := e.footer(n); err != nil {
		return nil, 0, err
	}
	return e.out, steps, nil
}

// rowOrder finds a row group's walks by row: row r is walk idx[r] of the
// chunk of segment seg[r].
type rowOrder struct {
	segs     []segment
	seg, idx []int32
}

func (o rowOrder) walk(r int) []uint32 { return o.segs[o.seg[r]].c.Walk(int(o.idx[r])) }

// first is row r's start vertex and its number of vertices: from the
// chunk's Starts where the engine gave them, so that the walk itself is
// not read.
func (o rowOrder) first(r int) (start uint32, n int) {
	c, k := &o.segs[o.seg[r]].c.Chunk, o.idx[r]
	n = int(c.Offsets[k+1] - c.Offsets[k])
	if c.Starts != nil {
		return c.Starts[k], n
	}
	return c.Vertices[c.Offsets[k]], n
}

// order places gr's walks in row order (walk id - base); a walk written
// twice or missing is an ErrBadChunk.
func (e *fragmentEncoder) order(gr *group) (rowOrder, error) {
	n := gr.rows
	if cap(e.seg) < n {
		e.seg, e.idx = make([]int32, n), make([]int32, n)
	}
	seg, idx := e.seg[:n], e.idx[:n]
	for i := range seg {
		seg[i] = -1
	}
	for s, sg := range gr.segs {
		for k := sg.lo; k < sg.hi; k++ {
			r := sg.c.WalkIDs[k] - gr.base
			if seg[r] >= 0 {
				return rowOrder{}, fmt.Errorf("%w: walk %d written twice", ErrBadChunk, sg.c.WalkIDs[k])
			}
			seg[r], idx[r] = int32(s), int32(k)
		}
	}
	for r := range seg {
		if seg[r] < 0 {
			return rowOrder{}, fmt.Errorf("%w: walk %d missing from row group %d", ErrBadChunk, gr.base+uint64(r), gr.index)
		}
	}
	return rowOrder{segs: gr.segs, seg: seg, idx: idx}, nil
}

// startColumn writes the start column (each walk's first vertex) and
// returns the row group's steps.
func (e *fragmentEncoder) startColumn(gr *group, rows rowOrder) (int64, error) {
	n := gr.rows
	nv := uint32(e.w.g.NumVertices())
	ids := e.w.g.IDs
	c := &e.cols[1]
	c.reset(int64(len(e.out)))
	var steps int64
	for r := range n {
		v, nvert := rows.first(r)
		if v >= nv {
			return 0, fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, gr.base+uint64(r), v, nv)
		}
		if ids == nil {
			e.ext[r] = int64(v)
		} else {
			e.ext[r] = ids[v]
		}
		steps += int64(nvert - 1)
	}
	lo, hi := bounds(e.ext[:n])
	if err := e.int64Page(c, e.ext[:n], lo, hi, n, nil); err != nil {
		return 0, err
	}
	return steps, nil
}

// walkColumn writes the walk.list.element column: pages of whole walks,
// their vertices mapped to external ids. lens are the walks' steps.
func (e *fragmentEncoder) walkColumn(gr *group, rows rowOrder, lens []int32) error {
	n := gr.rows
	c := &e.cols[3]
	c.reset(int64(len(e.out)))
	for r0 := 0; r0 < n; {
		r1, count := r0, 0
		for r1 < n && (r1 == r0 || count+len(rows.walk(r1)) <= pageValues) {
			count += len(rows.walk(r1))
			r1++
		}
		var err error
		if c.encoding == format.ByteStreamSplit {
			err = e.splitWalkPage(c, gr, rows, r0, r1, count, lens[r0:r1])
		} else {
			err = e.deltaWalkPage(c, gr, rows, r0, r1, count, lens[r0:r1])
		}
		if err != nil {
			return err
		}
		r0 = r1
	}
	return nil
}

func bounds(vals []int64) (lo, hi int64) {
	lo, hi = vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// int64Page writes one page of int64 values for rows rows; lens (walk
// steps per row) is given for the list's leaf, whose levels it encodes.
// lo and hi are the smallest and largest value.
func (e *fragmentEncoder) int64Page(c *column, vals []int64, lo, hi int64, rows int, lens []int32) error {
	body := e.levels(c, lens, len(vals), rows)
	at := len(body)
	body = slices.Grow(body, 8*len(vals)+64)
	var enc []byte
	var err error
	// The encoders write into the capacity after the levels (they resize
	// or append to the slice given).
	switch c.encoding {
	case format.ByteStreamSplit:
		enc, err = (&bytestreamsplit.Encoding{}).EncodeInt64(body[at:at], vals)
	default:
		enc = appendDeltaInt64(body[at:at], vals)
	}
	if err != nil {
		return fmt.Errorf("sink: encode %v: %w", c.path, err)
	}
	if len(enc) > 0 && &enc[0] != &body[at : at+1][0] {
		body = append(body, enc...) // the encoder reallocated
	} else {
		body = body[:at+len(enc)]
	}
	e.body = body
	// Segments the codec may treat apart: the levels, then the values, or
	// each byte stream of split values.
	e.segs = append(e.segs[:0], 0, at)
	if c.encoding == format.ByteStreamSplit && len(vals) > 0 {
		for k := 1; k <= 8; k++ {
			e.segs = append(e.segs, at+k*len(vals))
		}
	} else {
		e.segs = append(e.segs, len(body))
	}
	return e.page(c, len(vals), rows, lo, hi, binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)))
}

func (e *fragmentEncoder) int32Page(c *column, vals []int32) error {
	lo, hi := vals[0], vals[0]
	body := e.body[:0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
		body = binary.LittleEndian.AppendUint32(body, uint32(v))
	}
	e.body = body
	e.segs = append(e.segs[:0], 0, len(body))
	return e.page(c, len(vals), len(vals), int64(lo), int64(hi), binary.LittleEndian.AppendUint32(nil, uint32(lo)), binary.LittleEndian.AppendUint32(nil, uint32(hi)))
}

// levels starts a page body in e.body with the list leaf's levels (nothing
// for the other columns).
func (e *fragmentEncoder) levels(c *column, lens []int32, nvals, rows int) []byte {
	body := e.body[:0]
	if !c.levels {
		return body
	}
	// Repetition levels as RLE runs: per walk a 0, then a 1 for each
	// further vertex. Definition levels: every value is defined (1).
	body = append(body, 0, 0, 0, 0)
	for _, l := range lens {
		body = appendRun(body, 1, 0)
		if l > 0 {
			body = appendRun(body, int(l), 1)
		}
	}
	binary.LittleEndian.PutUint32(body[0:4], uint32(len(body)-4))
	at := len(body)
	body = append(body, 0, 0, 0, 0)
	body = appendRun(body, nvals, 1)
	binary.LittleEndian.PutUint32(body[at:at+4], uint32(len(body)-at-4))
	c.repHist[0] += int64(rows)
	c.repHist[1] += int64(nvals - rows)
	c.defHist[1] += int64(nvals)
	return body
}

// page frames e.body (nvals values of rows rows, e.segs its segments) as
// a data page v1 of column c: compression, header, page index entries.
func (e *fragmentEncoder) page(c *column, nvals, rows int, lo, hi int64, minB, maxB []byte) error {
	body, segs, zeros := e.body, e.segs, e.zeros
	e.zeros = 0
	return e.pageWith(c, nvals, rows, &pageBounds{lo: lo, hi: hi, minB: minB, maxB: maxB}, len(body)+zeros, func(dst []byte) ([]byte, error) {
		return e.codec.encode(dst, body, segs, zeros)
	})
}

// pageBounds are a page's smallest and largest values, as numbers and as
// the page index holds them.
type pageBounds struct {
	lo, hi     int64
	minB, maxB []byte
	// size is the body's uncompressed size where encode learns it only as
	// it writes the page (framedDeltaPage); 0: pageWith's uncompressed.
	size int
}

// pageWith frames a data page v1 of column c whose body, of uncompressed
// bytes (or b.size), encode appends compressed to dst. b is read once
// encode has returned.
func (e *fragmentEncoder) pageWith(c *column, nvals, rows int, b *pageBounds, uncompressed int,
	encode func(dst []byte) ([]byte, error)) error {
	// The page is compressed straight into the fragment, after room for
	// its header: sized with the compressed size of this column's last
	// page (of any fragment of this encoder) standing in for its own,
	// which almost always takes as many bytes as a thrift varint (the copy
	// of each compressed page into the fragment was 3% of the GPU stage's
	// CPU). Where it does not, the body moves. (The uncompressed size
	// stood in before: a full walk page's 1 MiB is a varint byte longer
	// than its 0.36 MiB compressed, so every such body moved, 0.15 of
	// 5.84 core-s of the scale-22 one-shot on the 16-core host.)
	guessSize := int32(uncompressed)
	if c.lastCompressed > 0 {
		guessSize = c.lastCompressed
	}
	h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: int32(uncompressed), CompressedPageSize: guessSize,
		DataPageHeader: thrift.New(format.DataPageHeader{NumValues: int32(nvals), Encoding: c.encoding,
			DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE})}
	guess, err := thrift.Marshal(&e.thrift, &h)
	if err != nil {
		return fmt.Errorf("sink: page header %v: %w", c.path, err)
	}
	offset := len(e.out)
	room := len(guess)
	out, err := encode(slices.Grow(e.out, room)[:offset+room])
	if err != nil {
		return fmt.Errorf("sink: compress %v: %w", c.path, err)
	}
	e.out = out
	n := len(out) - offset - room
	if b.size > 0 {
		uncompressed = b.size
		h.UncompressedPageSize = int32(uncompressed)
	}
	h.CompressedPageSize = int32(n)
	c.lastCompressed = int32(n)
	hb, err := thrift.Marshal(&e.thrift, &h)
	if err != nil {
		return fmt.Errorf("sink: page header %v: %w", c.path, err)
	}
	if len(hb) != room {
		e.out = slices.Grow(e.out, max(0, len(hb)-room))[:offset+len(hb)+n]
		copy(e.out[offset+len(hb):], out[offset+room:offset+room+n])
	}
	copy(e.out[offset:], hb)
	c.crc = crc32cUpdate(c.crc, e.out[offset:offset+len(hb)+n])
	c.locations = append(c.locations, format.PageLocation{Offset: int64(offset), CompressedPageSize: int32(len(hb) + n),
		FirstRowIndex: c.rows})
	c.index.NullPages = append(c.index.NullPages, false)
	c.index.MinValues = append(c.index.MinValues, b.minB)
	c.index.MaxValues = append(c.index.MaxValues, b.maxB)
	c.index.NullCounts = append(c.index.NullCounts, 0)
	c.rows += int64(rows)
	if c.pages == 0 {
		c.min, c.max = b.lo, b.hi
	} else {
		c.min, c.max = min(c.min, b.lo), max(c.max, b.hi)
	}
	c.pages++
	c.values += int64(nvals)
	c.uncompressed += int64(len(hb) + uncompressed)
	return nil
}

// appendRun appends an RLE run of count copies of a 1-bit level (the
// RLE/bit-packed hybrid's run: varint count<<1, then the value in one byte).
func appendRun(b []byte, count int, level byte) []byte {
	return append(binary.AppendUvarint(b, uint64(count)<<1), level)
}

// footer appends the page index and the footer of a fragment of rows rows.
func (e *fragmentEncoder) footer(rows int) error {
	var chunks []format.ColumnChunk
	var total, totalComp int64
	e.sums = e.sums[:0]
	for i := range e.cols {
		c := &e.cols[i]
		end := int64(len(e.out)) // columns are contiguous: one ends where the next starts
		if i+1 < len(e.cols) {
			end = e.cols[i+1].start
		}
		e.sums = append(e.sums, sectionSum{c.start, end - c.start, c.crc})
		size := int64(8)
		if c.typ == format.Int32 {
			size = 4
		}
		le := func(v int64) []byte {
			if size == 4 {
				return binary.LittleEndian.AppendUint32(nil, uint32(v))
			}
			return binary.LittleEndian.AppendUint64(nil, uint64(v))
		}
		encs := []format.Encoding{c.encoding}
		if c.levels {
			encs = []format.Encoding{format.RLE, c.encoding}
		}
		md := format.ColumnMetaData{Type: c.typ, Encoding: encs, PathInSchema: c.path, Codec: e.codec.codec(),
			NumValues: c.values, TotalUncompressedSize: c.uncompressed, TotalCompressedSize: end - c.start,
			DataPageOffset: c.start, Statistics: format.Statistics{MinValue: le(c.min), MaxValue: le(c.max)},
			EncodingStats: []format.PageEncodingStats{{PageType: format.DataPage, Encoding: c.encoding, Count: c.pages}}}
		if c.levels {
			md.SizeStatistics = format.SizeStatistics{RepetitionLevelHistogram: c.repHist[:], DefinitionLevelHistogram: c.defHist[:]}
		}
		chunks = append(chunks, format.ColumnChunk{FileOffset: c.start, MetaData: md})
		total += c.uncompressed
		totalComp += end - c.start
	}
	for i := range e.cols {
		c := &e.cols[i]
		c.index.BoundaryOrder = c.order
		b, err := thrift.Marshal(&e.thrift, &c.index)
		if err != nil {
			return fmt.Errorf("sink: column index: %w", err)
		}
		chunks[i].ColumnIndexOffset, chunks[i].ColumnIndexLength = int64(len(e.out)), int32(len(b))
		e.out = append(e.out, b...)
	}
	for i := range e.cols {
		b, err := thrift.Marshal(&e.thrift, &format.OffsetIndex{PageLocations: e.cols[i].locations})
		if err != nil {
			return fmt.Errorf("sink: offset index: %w", err)
		}
		chunks[i].OffsetIndexOffset, chunks[i].OffsetIndexLength = int64(len(e.out)), int32(len(b))
		e.out = append(e.out, b...)
	}
	md := format.FileMetaData{Version: 1, Schema: e.schema, NumRows: int64(rows), CreatedBy: "walkstage",
		RowGroups: []format.RowGroup{{Columns: chunks, TotalByteSize: total, NumRows: int64(rows), FileOffset: 4, TotalCompressedSize: totalComp}}}
	b, err := thrift.Marshal(&e.thrift, &md)
	if err != nil {
		return fmt.Errorf("sink: footer: %w", err)
	}
	e.out = append(e.out, b...)
	e.out = binary.LittleEndian.AppendUint32(e.out, uint32(len(b)))
	e.out = append(e.out, "PAR1"...)
	return nil
}
