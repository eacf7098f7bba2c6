// Package pages is the sink's Parquet page encoder: it turns a row group
// of walks (RowGroup: walk.Chunk segments, walk ids Base..Base+Rows-1) into
// a "fragment", a standalone Parquet file of that one row group, in the
// schema of the sink's walks parts (walk_id, start, length, and the walk
// as a LIST of external ids). It holds the Encoder and its page writers,
// the walk values' encodings (DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT,
// with AVX2 and BMI2 kernels in the *_amd64.s files and pure Go under the
// purego tag and on other architectures), the zstd framing that writes
// frames directly (pagecodec.go, literals.go, huffman.go), the codec and
// encoding names (Compression, WalkEncoding), the per-column-chunk
// CRC32Cs (SectionSum) and the part schema and writer the sink splices
// fragments into (FileSchema, NewPartWriter). SampleEncoder does the same
// for row groups of sampled edges (samples.go; runs.go writes their src
// column's zstd frames).
//
// It knows walks and graphs (for external ids); it knows nothing of
// batches, parts, manifests, object stores, Kafka or the stage: the sink
// (its BatchWriter) gathers chunks into row groups, runs encoders
// concurrently and commits their fragments in order.
//
// Size: about 4,000 lines without tests, over the project's ~3,000,
// because the walks' and the samples' encoders share every piece below
// the row group: the page writers, the integer encodings and their
// assembly kernels, the zstd framing (literals, Huffman tables, frames of
// runs) and the part schema. A package per output kind would export all of
// that as an API of its own; a package for the codecs alone would split
// the zstd frames from the pages they are sized for.
package pages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
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

// rowSplit and rowDelta are the part writers' schemas: sink.Row's columns, with
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

// rowSplitTimes and rowDeltaTimes add a temporal walk's times, parallel
// to its walk (walk.Chunk.Times), always DELTA_BINARY_PACKED: they ascend
// (or descend) along a walk, so their deltas are small.
type rowSplitTimes struct {
	WalkID int64   `parquet:"walk_id,delta"`
	Start  int64   `parquet:"start,delta"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list" parquet-element:",split"`
	Times  []int64 `parquet:"times,list" parquet-element:",delta"`
}

type rowStringTimes struct {
	WalkID int64    `parquet:"walk_id,delta"`
	Start  string   `parquet:"start,dict"`
	Length int32    `parquet:"length"`
	Walk   []string `parquet:"walk,list" parquet-element:",dict"`
	Times  []int64  `parquet:"times,list" parquet-element:",delta"`
}

type rowDeltaTimes struct {
	WalkID int64   `parquet:"walk_id,delta"`
	Start  int64   `parquet:"start,delta"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list" parquet-element:",delta"`
	Times  []int64 `parquet:"times,list" parquet-element:",delta"`
}

// RowGroupWriter is the part of parquet-go's GenericWriter the parts use.
type RowGroupWriter interface {
	WriteRowGroup(parquet.RowGroup) (int64, error)
	Close() error
}

// NewPartWriter returns parquet-go's writer of a part whose walk values
// are in encoding enc: the writer into which the sink splices fragments.
func NewPartWriter(enc WalkEncoding, out io.Writer, opts ...parquet.WriterOption) RowGroupWriter {
	return NewPartWriterFor(enc, false, out, opts...)
}

// NewPartWriterFor is NewPartWriter for parts with the times column
// (times) or without.
func NewPartWriterFor(enc WalkEncoding, times bool, out io.Writer, opts ...parquet.WriterOption) RowGroupWriter {
	if times {
		switch enc {
		case StringDictionary:
			return parquet.NewGenericWriter[rowStringTimes](out, opts...)
		case DeltaBinaryPacked:
			return parquet.NewGenericWriter[rowDeltaTimes](out, opts...)
		}
		return parquet.NewGenericWriter[rowSplitTimes](out, opts...)
	}
	if enc == StringDictionary {
		return newStringPartWriter(out, opts...)
	}
	if enc == DeltaBinaryPacked {
		return parquet.NewGenericWriter[rowDelta](out, opts...)
	}
	return parquet.NewGenericWriter[rowSplit](out, opts...)
}

// FileSchema returns the footer schema parquet-go writes for enc, which
// fragments reuse so the part writer sees its own schema in them. It
// depends on the row type alone: the parts' options (codec, metadata, a
// 1 MiB write buffer) would only cost each new batch writer an allocation
// the size of that buffer, which was most of the 0.34 ms the stage's engine
// loop spent creating each batch's writer.
func FileSchema(enc WalkEncoding) ([]format.SchemaElement, error) { return FileSchemaFor(enc, false) }

// FileSchemaFor is FileSchema for parts with the times column or without.
func FileSchemaFor(enc WalkEncoding, times bool) ([]format.SchemaElement, error) {
	switch {
	case times && enc == StringDictionary:
		return stringTimesSchema()
	case times && enc == DeltaBinaryPacked:
		return deltaTimesSchema()
	case times:
		return splitTimesSchema()
	case enc == StringDictionary:
		return stringSchema()
	case enc == DeltaBinaryPacked:
		return deltaSchema()
	}
	return splitSchema()
}

// deltaSchema and splitSchema compute each schema once: the schema is
// read, never written, by every fragment's footer.
var (
	deltaSchema      = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(DeltaBinaryPacked, false) })
	splitSchema      = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(ByteStreamSplit, false) })
	deltaTimesSchema = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(DeltaBinaryPacked, true) })
	// stringTimesSchema is strings.go's stringSchema with the times column.
	stringTimesSchema = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(StringDictionary, true) })
	splitTimesSchema  = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(ByteStreamSplit, true) })
)

func fileSchemaOf(enc WalkEncoding, times bool) ([]format.SchemaElement, error) {
	var buf bytes.Buffer
	pw := NewPartWriterFor(enc, times, &buf)
	if err := pw.Close(); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	s := f.Metadata().Schema
	// walk_id, start, length, and the list: walk (group), list (repeated
	// group), element; with times, the times list after it in the same
	// shape. The encoder below relies on this shape.
	if len(s) != 7+3*btoi(times) || s[6].Name != "element" || s[5].RepetitionType.V != format.Repeated ||
		times && (s[7].Name != "times" || s[9].Name != "element" || s[8].RepetitionType.V != format.Repeated) {
		return nil, fmt.Errorf("pages: unexpected Parquet schema %v", s)
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
	crc              uint32 // CRC32C of the pages so far (SectionSum)
	lastCompressed   int32  // the last page's compressed size, kept by reset
	// A dictionary-encoded column (strings.go): its dictionary page opens
	// the chunk, the data pages start at dataStart, and min and max are
	// indices into dictVerts.
	dict      bool
	dictVerts []uint32
	dataStart int64
}

func (c *column) reset(start int64) {
	*c = column{typ: c.typ, path: c.path, encoding: c.encoding, levels: c.levels, order: c.order, start: start, lastCompressed: c.lastCompressed,
		index: format.ColumnIndex{NullPages: c.index.NullPages[:0], MinValues: c.index.MinValues[:0],
			MaxValues: c.index.MaxValues[:0], NullCounts: c.index.NullCounts[:0]},
		locations: c.locations[:0]}
}

// Config says how an Encoder writes row groups.
type Config struct {
	// Graph is the graph the walks ran on: vertex ids must be below its
	// NumVertices, and are written as its external ids (Graph.IDs) where
	// it has them.
	Graph *graph.Graph
	// Compression and ZstdLevel choose the page codec.
	Compression Compression
	ZstdLevel   zstd.EncoderLevel
	// WalkEncoding is the walk values' encoding, DeltaBinaryPacked or
	// ByteStreamSplit (AutoWalkEncoding is the caller's to resolve).
	WalkEncoding WalkEncoding
	// GeneralPages turns off the framed page paths, which write zstd
	// frames directly: the general path compresses each page with the
	// codec. Tests compare the two.
	GeneralPages bool
	// Times adds the times column (FileSchemaFor): every chunk must
	// carry its walks' times (walk.Chunk.Times).
	Times bool
}

// RowGroup is the walks of one row group: rows Base..Base+Rows-1 of the
// batch, walk id order, found in Segments in any order.
type RowGroup struct {
	// Index is the row group's number in its batch, for errors.
	Index int64
	// Base is the walk id of the first row.
	Base uint64
	// Rows is the number of walks; each walk id of the range must be in
	// Segments exactly once (else ErrBadChunk).
	Rows     int
	Segments []Segment
	// Staged is the memory the walks take as chunks: the fragment buffer
	// starts at about its compressed size (7/8 of it).
	Staged int64
}

// Segment is walks [Lo, Hi) of a chunk.
type Segment struct {
	Chunk  *walk.Chunk
	Lo, Hi int
}

// ErrBadChunk is wrapped when a row group's walks break the walk.Chunk
// contract: a walk missing or given twice, a vertex beyond the graph.
var ErrBadChunk = errors.New("invalid walk chunk")

// Encoder writes row groups as fragments; one per encoding
// goroutine, its buffers reused from row group to row group. Not safe for
// concurrent use.
type Encoder struct {
	g            *graph.Graph
	generalPages bool
	schema       []format.SchemaElement
	codec        *pageCodec
	cols         [6]column
	ncols        int // 4, or 5 with the times column; 5 or 6 for samples (samples.go)

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
	dicts    [3]dictionary // start and walk dictionaries of string ids (strings.go); seed, src, dst of samples
	strings  bool          // walks of a graph with string ids
	out      []byte        // the fragment
	sums     []SectionSum  // its column chunks' CRC32Cs
	thrift   thrift.CompactProtocol
}

// NewEncoder returns an encoder for cfg.
func NewEncoder(cfg Config) (*Encoder, error) {
	codec, err := newPageCodec(cfg.Compression, cfg.ZstdLevel)
	if err != nil {
		return nil, err
	}
	e := &Encoder{codec: codec}
	e.cols = [6]column{
		{typ: format.Int64, path: []string{"walk_id"}, encoding: format.DeltaBinaryPacked, order: format.Ascending},
		{typ: format.Int64, path: []string{"start"}, encoding: format.DeltaBinaryPacked, order: format.Unordered},
		{typ: format.Int32, path: []string{"length"}, encoding: format.Plain, order: format.Unordered},
		{typ: format.Int64, path: []string{"walk", "list", "element"}, levels: true, order: format.Unordered},
		{typ: format.Int64, path: []string{"times", "list", "element"}, levels: true, encoding: format.DeltaBinaryPacked, order: format.Unordered},
	}
	if err := e.attach(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// Reset makes e encode as cfg says, keeping its buffers, and reports
// whether it could: an encoder keeps its codec, so for another compression
// or zstd level it returns false and e is unchanged.
func (e *Encoder) Reset(cfg Config) (bool, error) {
	if e.codec.kind != cfg.Compression || e.codec.level != cfg.ZstdLevel {
		return false, nil
	}
	return true, e.attach(cfg)
}

// attach makes e encode cfg's row groups (an encoder reset for another
// writer's served one before, with the same codec).
func (e *Encoder) attach(cfg Config) error {
	schema, err := FileSchemaFor(cfg.WalkEncoding, cfg.Times)
	if err != nil {
		return err
	}
	e.g, e.generalPages, e.schema = cfg.Graph, cfg.GeneralPages, schema
	e.ncols = 4 + btoi(cfg.Times)
	e.strings = cfg.WalkEncoding == StringDictionary
	e.cols[1].typ, e.cols[1].encoding = format.Int64, format.DeltaBinaryPacked
	e.cols[3].typ, e.cols[3].encoding = format.Int64, format.ByteStreamSplit
	switch cfg.WalkEncoding {
	case DeltaBinaryPacked:
		e.cols[3].encoding = format.DeltaBinaryPacked
	case StringDictionary:
		e.cols[1].typ, e.cols[1].encoding = format.ByteArray, format.RLEDictionary
		e.cols[3].typ, e.cols[3].encoding = format.ByteArray, format.RLEDictionary
	}
	return nil
}

// Release drops e's references to the graph and the last fragment, so
// that an encoder kept for reuse holds no caller's memory.
func (e *Encoder) Release() {
	e.g, e.schema, e.out, e.zeros = nil, nil, nil, 0
}

// Encode writes row group gr as a fragment: a standalone Parquet file of
// one row group, appended to dst[:0] (grown when too small), and returns it
// with the row group's steps. Sums gives its column chunks' CRC32Cs.
func (e *Encoder) Encode(dst []byte, gr *RowGroup) (frag []byte, steps int64, err error) {
	e.out = dst
	frag, steps, err = e.encode(gr)
	e.out = nil
	return frag, steps, err
}

// Sums are the CRC32Cs of the column chunks of the fragment Encode
// returned last, valid until the next Encode.
func (e *Encoder) Sums() []SectionSum { return e.sums }

// SectionSum is the CRC32C of a section of a fragment (a column chunk),
// computed by the encoder page by page while the pages were in cache; the
// part writer combines it into the part's checksum instead of reading the
// section a second time for it.
type SectionSum struct {
	Off, N int64
	CRC    uint32
}

// castagnoli is the CRC32C table; hash/crc32 uses the CPU's CRC32
// instruction for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32cUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

var errNoWalks = errors.New("row group without walks")

// encode returns the fragment of row group gr, in e.out, and its steps.
func (e *Encoder) encode(gr *RowGroup) ([]byte, int64, error) {
	n := gr.Rows
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
	if want := int(gr.Staged * 7 / 8); cap(e.out) < want {
		e.out = make([]byte, 0, want)
	}
	e.out = append(e.out[:0], "PAR1"...)
	// walk_id: base, base+1, ...
	c := &e.cols[0]
	c.reset(int64(len(e.out)))
	e.ext = grow(e.ext, n)
	for r := range n {
		e.ext[r] = int64(gr.Base) + int64(r)
	}
	if err := e.int64Page(c, e.ext[:n], int64(gr.Base), int64(gr.Base)+int64(n)-1, n, nil); err != nil {
		return nil, 0, err
	}
	var steps int64
	if e.strings {
		steps, err = e.stringStartColumn(gr, rows)
	} else {
		steps, err = e.startColumn(gr, rows)
	}
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
	if e.strings {
		err = e.stringWalkColumn(gr, rows, lens)
	} else {
		err = e.walkColumn(gr, rows, lens)
	}
	if err != nil {
		return nil, 0, err
	}
	if e.ncols == 5 {
		if err := e.timesColumn(gr, rows, lens); err != nil {
			return nil, 0, err
		}
	}
	if err := e.footer(n); err != nil {
		return nil, 0, err
	}
	return e.out, steps, nil
}

// rowOrder finds a row group's walks by row: row r is walk idx[r] of the
// chunk of segment seg[r].
type rowOrder struct {
	segs     []Segment
	seg, idx []int32
}

func (o rowOrder) walk(r int) []uint32 { return o.segs[o.seg[r]].Chunk.Walk(int(o.idx[r])) }

// first is row r's start vertex and its number of vertices: from the
// chunk's Starts where the engine gave them, so that the walk itself is
// not read.
func (o rowOrder) first(r int) (start uint32, n int) {
	c, k := o.segs[o.seg[r]].Chunk, o.idx[r]
	n = int(c.Offsets[k+1] - c.Offsets[k])
	if c.Starts != nil {
		return c.Starts[k], n
	}
	return c.Vertices[c.Offsets[k]], n
}

// order places gr's walks in row order (walk id - base); a walk written
// twice or missing is an ErrBadChunk.
func (e *Encoder) order(gr *RowGroup) (rowOrder, error) {
	n := gr.Rows
	if cap(e.seg) < n {
		e.seg, e.idx = make([]int32, n), make([]int32, n)
	}
	seg, idx := e.seg[:n], e.idx[:n]
	for i := range seg {
		seg[i] = -1
	}
	for s, sg := range gr.Segments {
		for k := sg.Lo; k < sg.Hi; k++ {
			r := sg.Chunk.WalkIDs[k] - gr.Base
			if seg[r] >= 0 {
				return rowOrder{}, fmt.Errorf("%w: walk %d written twice", ErrBadChunk, sg.Chunk.WalkIDs[k])
			}
			seg[r], idx[r] = int32(s), int32(k)
		}
	}
	for r := range seg {
		if seg[r] < 0 {
			return rowOrder{}, fmt.Errorf("%w: walk %d missing from row group %d", ErrBadChunk, gr.Base+uint64(r), gr.Index)
		}
	}
	return rowOrder{segs: gr.Segments, seg: seg, idx: idx}, nil
}

// startColumn writes the start column (each walk's first vertex) and
// returns the row group's steps.
func (e *Encoder) startColumn(gr *RowGroup, rows rowOrder) (int64, error) {
	n := gr.Rows
	nv := uint32(e.g.NumVertices())
	ids := e.g.IDs
	c := &e.cols[1]
	c.reset(int64(len(e.out)))
	var steps int64
	for r := range n {
		v, nvert := rows.first(r)
		if v >= nv {
			return 0, fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, gr.Base+uint64(r), v, nv)
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
func (e *Encoder) walkColumn(gr *RowGroup, rows rowOrder, lens []int32) error {
	n := gr.Rows
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

// timesColumn writes the times.list.element column: each walk's times
// (walk.Chunk.Times), in pages of whole walks like the walk column's.
func (e *Encoder) timesColumn(gr *RowGroup, rows rowOrder, lens []int32) error {
	n := gr.Rows
	c := &e.cols[4]
	c.reset(int64(len(e.out)))
	for r0 := 0; r0 < n; {
		r1, count := r0, 0
		for r1 < n && (r1 == r0 || count+int(lens[r1])+1 <= pageValues) {
			count += int(lens[r1]) + 1
			r1++
		}
		e.ext = grow(e.ext, count)[:0]
		for r := r0; r < r1; r++ {
			sg := rows.segs[rows.seg[r]]
			ch, k := sg.Chunk, rows.idx[r]
			if len(ch.Times) != len(ch.Vertices) {
				return fmt.Errorf("%w: walk %d has no times (%d for %d vertices)", ErrBadChunk, ch.WalkIDs[k], len(ch.Times), len(ch.Vertices))
			}
			e.ext = append(e.ext, ch.Times[ch.Offsets[k]:ch.Offsets[k+1]]...)
		}
		lo, hi := bounds(e.ext)
		if err := e.int64Page(c, e.ext, lo, hi, r1-r0, lens[r0:r1]); err != nil {
			return err
		}
		r0 = r1
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
func (e *Encoder) int64Page(c *column, vals []int64, lo, hi int64, rows int, lens []int32) error {
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
		return fmt.Errorf("pages: encode %v: %w", c.path, err)
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

func (e *Encoder) int32Page(c *column, vals []int32) error {
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
func (e *Encoder) levels(c *column, lens []int32, nvals, rows int) []byte {
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
func (e *Encoder) page(c *column, nvals, rows int, lo, hi int64, minB, maxB []byte) error {
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
func (e *Encoder) pageWith(c *column, nvals, rows int, b *pageBounds, uncompressed int,
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
		return fmt.Errorf("pages: page header %v: %w", c.path, err)
	}
	offset := len(e.out)
	room := len(guess)
	out, err := encode(slices.Grow(e.out, room)[:offset+room])
	if err != nil {
		return fmt.Errorf("pages: compress %v: %w", c.path, err)
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
		return fmt.Errorf("pages: page header %v: %w", c.path, err)
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
func (e *Encoder) footer(rows int) error {
	var chunks []format.ColumnChunk
	var total, totalComp int64
	e.sums = e.sums[:0]
	cols := e.cols[:e.ncols]
	for i := range cols {
		c := &cols[i]
		end := int64(len(e.out)) // columns are contiguous: one ends where the next starts
		if i+1 < len(cols) {
			end = e.cols[i+1].start
		}
		e.sums = append(e.sums, SectionSum{c.start, end - c.start, c.crc})
		le := func(v int64) []byte {
			switch c.typ {
			case format.Int32:
				return binary.LittleEndian.AppendUint32(nil, uint32(v))
			case format.Float:
				return binary.LittleEndian.AppendUint32(nil, floatBits(v))
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
		if c.dict {
			// As parquet-go writes its dictionary columns, so that the
			// part writer copies the chunk verbatim.
			md.Encoding = append([]format.Encoding{format.Plain}, encs...)
			md.DictionaryPageOffset, md.DataPageOffset = c.start, c.dataStart
			md.Statistics.MinValue, md.Statistics.MaxValue = e.stringStats(c)
			md.EncodingStats = append(md.EncodingStats, format.PageEncodingStats{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1})
		}
		if c.levels {
			md.SizeStatistics = format.SizeStatistics{RepetitionLevelHistogram: c.repHist[:], DefinitionLevelHistogram: c.defHist[:]}
		}
		chunks = append(chunks, format.ColumnChunk{FileOffset: c.start, MetaData: md})
		total += c.uncompressed
		totalComp += end - c.start
	}
	for i := range cols {
		c := &cols[i]
		c.index.BoundaryOrder = c.order
		b, err := thrift.Marshal(&e.thrift, &c.index)
		if err != nil {
			return fmt.Errorf("pages: column index: %w", err)
		}
		chunks[i].ColumnIndexOffset, chunks[i].ColumnIndexLength = int64(len(e.out)), int32(len(b))
		e.out = append(e.out, b...)
	}
	for i := range cols {
		b, err := thrift.Marshal(&e.thrift, &format.OffsetIndex{PageLocations: cols[i].locations})
		if err != nil {
			return fmt.Errorf("pages: offset index: %w", err)
		}
		chunks[i].OffsetIndexOffset, chunks[i].OffsetIndexLength = int64(len(e.out)), int32(len(b))
		e.out = append(e.out, b...)
	}
	md := format.FileMetaData{Version: 1, Schema: e.schema, NumRows: int64(rows), CreatedBy: "walkstage",
		RowGroups: []format.RowGroup{{Columns: chunks, TotalByteSize: total, NumRows: int64(rows), FileOffset: 4, TotalCompressedSize: totalComp}}}
	b, err := thrift.Marshal(&e.thrift, &md)
	if err != nil {
		return fmt.Errorf("pages: footer: %w", err)
	}
	e.out = append(e.out, b...)
	e.out = binary.LittleEndian.AppendUint32(e.out, uint32(len(b)))
	e.out = append(e.out, "PAR1"...)
	return nil
}
