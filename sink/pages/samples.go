package pages

// Sampled edges (the sink's "samples" output), one row per edge:
//
//	instance_id INT64 DELTA_BINARY_PACKED, seed INT64 DELTA_BINARY_PACKED,
//	hop INT32 DELTA_BINARY_PACKED, src INT64 PLAIN, dst INT64
//	DELTA_BINARY_PACKED [, edge_weight FLOAT BYTE_STREAM_SPLIT]
//
// and for a graph with string ids seed, src and dst as dictionary-encoded
// strings (strings.go's dictionary, one per column chunk). The encodings
// are those parquet-go wrote for the sink's row types (sink.SampleRow and
// its kin), so that the sink's part writer, still parquet-go's, copies
// these fragments verbatim; every reader the sink is tested with decodes
// them (no BYTE_STREAM_SPLIT on INT64, which DuckDB cannot read).
//
// parquet-go wrote them from rows: the sink mapped each edge to a 40-byte
// row of external ids, and parquet-go took the rows apart into columns
// again, kept its per-value statistics and encoded its pages (83% of the
// writer's CPU in a profile of BenchmarkWriteSamples, the mapping 17%).
// Here a row group's columns, as the engines produce them (dense ids), are
// encoded column by column: each value is mapped to its external id as its
// page is written, ids that fit 32 bits take the AVX2 delta packer, and
// the page codec frames the packed destination ids (close to uniform
// bytes) as raw zstd blocks instead of running the match finder over them.
// src stays PLAIN under the zstd match finder: its values come in runs
// (the edges of one source), which matches take and delta widths do not.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/graph"
)

// SampleRows is one row group of sampled edges: rows in instance order,
// vertices as dense ids. Instance IDs[k] (seed Seeds[k]) has rows
// Starts[k] .. Starts[k+1]-1 (the last one's run ends with the rows);
// Starts[0] is 0 and the runs are not empty. The first instance may have
// rows in the row group before, the last in the next.
type SampleRows struct {
	Starts []int32
	IDs    []int64
	// Seeds are external ids, or dense ids for a graph with string ids.
	Seeds []int64
	Hop   []int32
	// Src and Dst are dense ids, checked against the graph.
	Src, Dst []uint32
	// Edge indexes the graph's edges (for the edge weight); read only
	// with SampleConfig.Weights.
	Edge []uint64
}

// Rows is the number of rows (edges).
func (r *SampleRows) Rows() int { return len(r.Hop) }

// Reset empties r, keeping its memory.
func (r *SampleRows) Reset() {
	r.Starts, r.IDs, r.Seeds = r.Starts[:0], r.IDs[:0], r.Seeds[:0]
	r.Hop, r.Src, r.Dst, r.Edge = r.Hop[:0], r.Src[:0], r.Dst[:0], r.Edge[:0]
}

// SampleConfig says how a SampleEncoder writes row groups.
type SampleConfig struct {
	// Graph is the graph sampled: vertices are written as its external
	// ids (its string ids where it has them), edge weights read from it.
	Graph *graph.Graph
	// Compression and ZstdLevel choose the page codec.
	Compression Compression
	ZstdLevel   zstd.EncoderLevel
	// Weights adds the edge_weight column.
	Weights bool
	// Schema is the footer schema of the part writer's row type, which
	// fragments carry so that it copies them (the sink's).
	Schema []format.SchemaElement
}

// SampleEncoder writes row groups of sampled edges as fragments, like
// Encoder for walks; one per encoding goroutine, its buffers reused. Not
// safe for concurrent use.
type SampleEncoder struct {
	e       Encoder
	weights bool
	u32     []uint32
	// ends are the ends of the src page's runs, found as the page is
	// written (appendRunsFrame).
	ends []int32
}

// NewSampleEncoder returns an encoder for cfg.
func NewSampleEncoder(cfg SampleConfig) (*SampleEncoder, error) {
	codec, err := newPageCodec(cfg.Compression, cfg.ZstdLevel)
	if err != nil {
		return nil, err
	}
	s := &SampleEncoder{e: Encoder{codec: codec}}
	if err := s.attach(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Reset makes s encode as cfg says, keeping its buffers, and reports
// whether it could (not for another codec: s is then unchanged).
func (s *SampleEncoder) Reset(cfg SampleConfig) (bool, error) {
	if s.e.codec.kind != cfg.Compression || s.e.codec.level != cfg.ZstdLevel {
		return false, nil
	}
	return true, s.attach(cfg)
}

// sampleColumns are the columns' names, in schema order.
var sampleColumns = [6]string{"instance_id", "seed", "hop", "src", "dst", "edge_weight"}

func (s *SampleEncoder) attach(cfg SampleConfig) error {
	e := &s.e
	strs := cfg.Graph.HasStringIDs()
	idType, seedEnc, srcEnc, dstEnc := format.Int64, format.DeltaBinaryPacked, format.Plain, format.DeltaBinaryPacked
	if strs {
		idType, seedEnc, srcEnc, dstEnc = format.ByteArray, format.RLEDictionary, format.RLEDictionary, format.RLEDictionary
	}
	e.cols = [6]column{
		{typ: format.Int64, encoding: format.DeltaBinaryPacked, order: format.Ascending},
		{typ: idType, encoding: seedEnc, order: format.Unordered},
		{typ: format.Int32, encoding: format.DeltaBinaryPacked, order: format.Unordered},
		{typ: idType, encoding: srcEnc, order: format.Unordered},
		{typ: idType, encoding: dstEnc, order: format.Unordered},
		{typ: format.Float, encoding: format.ByteStreamSplit, order: format.Unordered},
	}
	for i := range e.cols {
		e.cols[i].path = []string{sampleColumns[i]}
	}
	e.ncols = 5 + btoi(cfg.Weights)
	if len(cfg.Schema) != 1+e.ncols {
		return fmt.Errorf("pages: sample schema of %d elements, want %d", len(cfg.Schema), 1+e.ncols)
	}
	for i := range e.ncols {
		if el := cfg.Schema[1+i]; el.Name != sampleColumns[i] || !el.Type.Valid || el.Type.V != e.cols[i].typ {
			return fmt.Errorf("pages: sample schema column %d is %s %v, want %s %v", i, el.Name, el.Type.V, sampleColumns[i], e.cols[i].typ)
		}
	}
	e.g, e.schema, e.strings, s.weights = cfg.Graph, cfg.Schema, strs, cfg.Weights
	return nil
}

// Release drops s's references to the graph and the last fragment.
func (s *SampleEncoder) Release() { s.e.Release() }

// Sums are the CRC32Cs of the column chunks of the fragment Encode
// returned last, valid until the next Encode.
func (s *SampleEncoder) Sums() []SectionSum { return s.e.sums }

var errNoEdges = errors.New("row group without edges")

// Encode writes rows as a fragment (a standalone Parquet file of one row
// group), appended to dst[:0], grown when too small. A vertex or edge
// beyond the graph is an ErrBadChunk.
func (s *SampleEncoder) Encode(dst []byte, rows *SampleRows) ([]byte, error) {
	e := &s.e
	e.out = dst
	defer func() { e.out = nil }()
	n := rows.Rows()
	if n == 0 {
		return nil, errNoEdges
	}
	k := len(rows.Starts)
	if len(rows.Src) != n || len(rows.Dst) != n || s.weights && len(rows.Edge) != n || k == 0 || rows.Starts[0] != 0 ||
		len(rows.IDs) != k || len(rows.Seeds) != k {
		return nil, fmt.Errorf("%w: sample columns of %d, %d, %d, %d rows, %d instances (%d ids, %d seeds)", ErrBadChunk,
			n, len(rows.Src), len(rows.Dst), len(rows.Edge), k, len(rows.IDs), len(rows.Seeds))
	}
	// About 3.7 bytes an edge under zstd (BenchmarkWriteSamples), 25
	// without compression.
	want := 4 * n
	if e.codec.kind != Zstd {
		want = 26 * n
	}
	if cap(e.out) < want {
		e.out = make([]byte, 0, want)
	}
	e.out = append(e.out[:0], "PAR1"...)
	if err := s.instanceColumn(rows, rows.IDs, &e.cols[0]); err != nil {
		return nil, err
	}
	var err error
	if e.strings {
		err = s.stringSeedColumn(rows)
	} else {
		err = s.instanceColumn(rows, rows.Seeds, &e.cols[1])
	}
	if err != nil {
		return nil, err
	}
	if err := s.hopColumn(rows); err != nil {
		return nil, err
	}
	for i, vs := range [2][]uint32{rows.Src, rows.Dst} {
		c := &e.cols[3+i]
		switch {
		case e.strings:
			err = s.stringColumn(c, &e.dicts[1+i], vs)
		case i == 0:
			err = s.plainColumn(c, vs)
		default:
			err = s.deltaColumn(c, vs)
		}
		if err != nil {
			return nil, err
		}
	}
	if s.weights {
		if err := s.weightColumn(rows); err != nil {
			return nil, err
		}
	}
	if err := e.footer(n); err != nil {
		return nil, err
	}
	return e.out, nil
}

// forPages calls page for each page's rows [p0, p1) of n rows.
func forPages(n int, page func(p0, p1 int) error) error {
	for p0 := 0; p0 < n; p0 += pageValues {
		if err := page(p0, min(n, p0+pageValues)); err != nil {
			return err
		}
	}
	return nil
}

// fillRuns writes each row's instance value (vals[k] for the rows of
// instance k) for rows [p0, p1) to out (p1-p0 long), through set.
func fillRuns[T any](rows *SampleRows, vals []int64, p0, p1 int, out []T, set func(int64) T) {
	n := rows.Rows()
	k := sort.Search(len(rows.Starts), func(k int) bool { return int(rows.Starts[k]) > p0 }) - 1
	for r := p0; r < p1; k++ {
		end := n
		if k+1 < len(rows.Starts) {
			end = int(rows.Starts[k+1])
		}
		v := set(vals[k])
		// A run through a slice of its own: no bounds check a row.
		run := out[r-p0 : min(end, p1)-p0]
		for i := range run {
			run[i] = v
		}
		r += len(run)
	}
}

// appendDeltaRuns32 appends rows [p0, p1)'s instance values (vals[k] for
// the rows of instance k; all in 0 .. 2^32-1) as a DELTA_BINARY_PACKED
// page body, the bytes appendDeltaUint32 writes for them, and returns
// their bounds. The column is not written out first: a block of 128
// deltas inside one instance's run (most of them: neighbour [25, 10] has
// 275 rows an instance) is all zeros, whose block is a zero minimum delta
// and four zero widths; only blocks that cross a run's end are filled
// (129 values) and packed.
func appendDeltaRuns32(dst []byte, rows *SampleRows, vals []int64, p0, p1 int) (_ []byte, lo, hi uint32) {
	n, nr := p1-p0, rows.Rows()
	starts := rows.Starts
	end := func(k int) int { // the row past instance k's run
		if k+1 < len(starts) {
			return int(starts[k+1])
		}
		return nr
	}
	k0 := sort.Search(len(starts), func(k int) bool { return int(starts[k]) > p0 }) - 1
	lo, hi = uint32(vals[k0]), uint32(vals[k0])
	for k := k0; k < len(starts) && int(starts[k]) < p1; k++ {
		lo, hi = min(lo, uint32(vals[k])), max(hi, uint32(vals[k]))
	}
	dst = slices.Grow(dst, maxDBP32(n)+32)
	dst = appendDBPHeader(dst, n, vals[k0])
	fast := hasDBPAVX2 && hi < 1<<31
	var d [dbpBlock + 1]uint64
	var x [dbpBlock + 1]uint32
	k := k0
	for i := 1; i < n; i += dbpBlock {
		a, b := p0+i-1, p0+min(n, i+dbpBlock) // the block's values: rows [a, b)
		for end(k) <= a {
			k++
		}
		if end(k) >= b {
			// No delta but 0: the minimum 0, every miniblock's width 0.
			dst = append(dst, 0, 0, 0, 0, 0)
			continue
		}
		blk := x[:b-a]
		for r, kr := a, k; r < b; kr++ {
			v := uint32(vals[kr])
			run := blk[r-a : min(end(kr), b)-a]
			for j := range run {
				run[j] = v
			}
			r += len(run)
		}
		dst = appendDBPBlock32(dst, blk, fast, &d)
	}
	return dst, lo, hi
}

// instanceColumn writes a column of per-instance values vals (instance
// ids or integer seeds) repeated over each instance's rows, delta encoded:
// from 32-bit values where they all fit. Their pages go to zstd's match
// finder: a block whose deltas include one negative jump packs every other
// delta as that jump's size, the same bits again and again, which the
// codec's segment rules would store as Huffman-coded literals (eight times
// the bytes of parquet-go's pages for the seeds of BenchmarkWriteSamples).
func (s *SampleEncoder) instanceColumn(rows *SampleRows, vals []int64, c *column) error {
	e := &s.e
	c.reset(int64(len(e.out)))
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	return forPages(rows.Rows(), func(p0, p1 int) error {
		if lo >= 0 && hi < 1<<32 {
			var plo, phi uint32
			e.body, plo, phi = appendDeltaRuns32(e.body[:0], rows, vals, p0, p1)
			return s.page(c, p1-p0, int64(plo), int64(phi), matched)
		}
		e.ext = grow(e.ext, p1-p0)
		fillRuns(rows, vals, p0, p1, e.ext, func(v int64) int64 { return v })
		plo, phi := bounds(e.ext)
		e.body = appendDeltaInt64(e.body[:0], e.ext)
		return s.page(c, p1-p0, plo, phi, matched)
	})
}

// deltaPage32 writes vs (values below 2^32; below 2^31 for an INT32
// column) as one DELTA_BINARY_PACKED page of c, compressed as how says.
func (s *SampleEncoder) deltaPage32(c *column, vs []uint32, how int) error {
	e := &s.e
	var lo, hi uint32
	e.body, lo, hi = appendDeltaUint32(e.body[:0], vs)
	return s.page(c, len(vs), int64(lo), int64(hi), how)
}

// How a sample page is compressed under zstd.
const (
	asSegment = iota // as the codec frames a segment
	matched          // by zstd's match finder
	runs             // as runs of 8-byte values (appendRunsFrame)
)

// page frames e.body, n values of c (integers from lo to hi), as a data
// page, compressed as how says (under zstd; other codecs are the codec's).
func (s *SampleEncoder) page(c *column, n int, lo, hi int64, how int) error {
	e := &s.e
	minB, maxB := binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi))
	if c.typ == format.Int32 {
		minB, maxB = minB[:4], maxB[:4]
	}
	body := e.body
	b := &pageBounds{lo: lo, hi: hi, minB: minB, maxB: maxB}
	return e.pageWith(c, n, n, b, len(body), func(dst []byte) ([]byte, error) {
		switch {
		case e.codec.kind != Zstd || how == asSegment:
			return e.codec.encode(dst, body, []int{0, len(body)}, 0)
		case how == runs:
			return e.codec.appendRunsFrame(dst, body, s.ends)
		}
		return e.codec.zstd.EncodeAll(body, dst), nil
	})
}

// hopColumn writes the hops (0 and up), delta encoded.
func (s *SampleEncoder) hopColumn(rows *SampleRows) error {
	e := &s.e
	c := &e.cols[2]
	c.reset(int64(len(e.out)))
	// Hops of 0 .. 2^31-1 are their uint32 bits.
	hops := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(rows.Hop))), len(rows.Hop))
	return forPages(len(hops), func(p0, p1 int) error {
		if _, hi := bounds32(hops[p0:p1]); hi >= 1<<31 {
			return fmt.Errorf("%w: a negative hop among sampled edges %d..%d of the row group", ErrBadChunk, p0, p1-1)
		}
		return s.deltaPage32(c, hops[p0:p1], matched)
	})
}

// checkVertices reports vs's largest vertex as an ErrBadChunk if it is
// beyond the graph.
func (s *SampleEncoder) checkVertices(vs []uint32) (lo, hi uint32, err error) {
	lo, hi = bounds32(vs)
	if nv := uint32(s.e.g.NumVertices()); hi >= nv {
		return lo, hi, fmt.Errorf("%w: sampled edge with vertex %d, beyond the graph's %d", ErrBadChunk, hi, nv)
	}
	return lo, hi, nil
}

// plainColumn writes vs (src) as PLAIN pages of external ids, compressed
// as runs (the edges of one source; appendRunsFrame): the codec's segment
// rules would store them as literals, and zstd's match finder took half
// the encoder's CPU to find the runs.
func (s *SampleEncoder) plainColumn(c *column, vs []uint32) error {
	e := &s.e
	c.reset(int64(len(e.out)))
	ids := e.g.IDs
	return forPages(len(vs), func(p0, p1 int) error {
		page := vs[p0:p1]
		body := grow(e.body, 8*len(page))
		// One pass writes the page, finds its runs for the frame (src's
		// runs are the edges of one source) and its bounds (a run's
		// value once), instead of a pass for the bounds and a scan of
		// the 8-byte values afterwards: under load the encoders are
		// bound by memory more than by instructions.
		var lo32, hi32 uint32
		lo32, hi32, s.ends = fillPlainDense(body, grow(s.ends, len(page)+1), page)
		if nv := uint32(e.g.NumVertices()); hi32 >= nv {
			return fmt.Errorf("%w: sampled edge with vertex %d, beyond the graph's %d", ErrBadChunk, hi32, nv)
		}
		lo, hi := int64(lo32), int64(hi32)
		if ids != nil {
			// Mapped ids: the page again, now that its vertices are
			// known to be in the graph.
			lo, hi, s.ends = fillPlainMapped(body, s.ends, page, ids)
		}
		e.body = body
		return s.page(c, len(page), lo, hi, runs)
	})
}

// fillPlainDense writes page's values as 8 little-endian bytes each to
// body (8*len(page) long) and the ends of its runs of equal values to
// ends (len(page)+1 long), which it returns cut to the runs, with the
// page's smallest and largest value.
func fillPlainDense(body []byte, ends []int32, page []uint32) (lo, hi uint32, _ []int32) {
	ends = ends[:len(page)+1]
	n := 0
	prev := page[0]
	lo, hi = prev, prev
	if nativeLittleEndian {
		// The values as they lie in memory, without a bounds check each.
		u := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(body))), len(page))
		for i, v := range page {
			if v != prev {
				ends[n] = int32(i)
				n++
				prev = v
				lo, hi = min(lo, v), max(hi, v)
			}
			u[i] = uint64(v)
		}
	} else {
		for i, v := range page {
			if v != prev {
				ends[n] = int32(i)
				n++
				prev = v
				lo, hi = min(lo, v), max(hi, v)
			}
			binary.LittleEndian.PutUint64(body[8*i:], uint64(v))
		}
	}
	ends[n] = int32(len(page))
	return lo, hi, ends[:n+1]
}

// fillPlainMapped is fillPlainDense for external ids (ids[v] for vertex
// v), and returns the bounds of the ids written too.
func fillPlainMapped(body []byte, ends []int32, page []uint32, ids []int64) (lo, hi int64, _ []int32) {
	ends = ends[:len(page)+1]
	n := 0
	prev := ids[page[0]]
	lo, hi = prev, prev
	for i, v := range page {
		x := ids[v]
		if x != prev {
			ends[n] = int32(i)
			n++
			prev = x
			lo, hi = min(lo, x), max(hi, x)
		}
		binary.LittleEndian.PutUint64(body[8*i:], uint64(x))
	}
	ends[n] = int32(len(page))
	return lo, hi, ends[:n+1]
}

// nativeLittleEndian says the CPU stores integers little-endian, as
// Parquet's PLAIN values are.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// deltaColumn writes vs (dst) as DELTA_BINARY_PACKED pages of external
// ids: dense ids from the column as it lies.
func (s *SampleEncoder) deltaColumn(c *column, vs []uint32) error {
	e := &s.e
	c.reset(int64(len(e.out)))
	ids := e.g.IDs
	return forPages(len(vs), func(p0, p1 int) error {
		page := vs[p0:p1]
		if _, _, err := s.checkVertices(page); err != nil {
			return err
		}
		if ids == nil {
			return s.deltaPage32(c, page, asSegment)
		}
		e.ext = grow(e.ext, len(page))
		for i, v := range page {
			e.ext[i] = ids[v]
		}
		lo, hi := bounds(e.ext)
		e.body = appendDeltaInt64(e.body[:0], e.ext)
		return s.page(c, len(page), lo, hi, asSegment)
	})
}

// stringSeedColumn writes the seeds (dense ids) of a graph with string
// ids, dictionary-encoded.
func (s *SampleEncoder) stringSeedColumn(rows *SampleRows) error {
	nv := int64(s.e.g.NumVertices())
	for _, v := range rows.Seeds {
		if v < 0 || v >= nv {
			return fmt.Errorf("%w: seed %d beyond the graph's %d vertices", ErrBadChunk, v, nv)
		}
	}
	n := rows.Rows()
	s.u32 = grow(s.u32, n)
	fillRuns(rows, rows.Seeds, 0, n, s.u32, func(v int64) uint32 { return uint32(v) })
	return s.stringColumn(&s.e.cols[1], &s.e.dicts[0], s.u32)
}

// stringColumn writes vs (dense ids) as column c of string ids: the
// dictionary of its vertices, then pages of indices.
func (s *SampleEncoder) stringColumn(c *column, d *dictionary, vs []uint32) error {
	e := &s.e
	if _, _, err := s.checkVertices(vs); err != nil {
		return err
	}
	e.flat = grow(e.flat, len(vs))
	copy(e.flat, vs)
	e.buildDictionary(d, e.flat)
	c.reset(int64(len(e.out)))
	if err := e.dictPage(c, d); err != nil {
		return err
	}
	return forPages(len(vs), func(p0, p1 int) error { return e.indexPage(c, e.flat[p0:p1], p1-p0, nil, d) })
}

// weightColumn writes the edges' weights as BYTE_STREAM_SPLIT pages of
// FLOAT.
func (s *SampleEncoder) weightColumn(rows *SampleRows) error {
	e := &s.e
	c := &e.cols[5]
	c.reset(int64(len(e.out)))
	ws := e.g.Weights
	return forPages(rows.Rows(), func(p0, p1 int) error {
		m := p1 - p0
		body := grow(e.body, 4*m)
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for i, x := range rows.Edge[p0:p1] {
			if x >= uint64(len(ws)) {
				return fmt.Errorf("%w: sampled edge %d beyond the graph's %d edges", ErrBadChunk, x, len(ws))
			}
			w := ws[x]
			lo, hi = min(lo, w), max(hi, w)
			b := math.Float32bits(w)
			body[i], body[m+i], body[2*m+i], body[3*m+i] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
		}
		e.body = body
		e.segs = append(e.segs[:0], 0, m, 2*m, 3*m, 4*m)
		return e.page(c, m, m, floatKey(lo), floatKey(hi),
			binary.LittleEndian.AppendUint32(nil, math.Float32bits(lo)), binary.LittleEndian.AppendUint32(nil, math.Float32bits(hi)))
	})
}

// floatKey maps a float to an int64 in the same order, so that a FLOAT
// column's bounds are kept as the integer columns' are; floatBits is its
// inverse, to the float's bits.
func floatKey(f float32) int64 {
	b := math.Float32bits(f)
	if b&(1<<31) != 0 {
		return -int64(b&(1<<31-1)) - 1
	}
	return int64(b)
}

func floatBits(k int64) uint32 {
	if k < 0 {
		return uint32(-(k + 1)) | 1<<31
	}
	return uint32(k)
}

// MaxUint32 is the largest of vs, 0 for none: the AVX2 bounds where the
// CPU has them. The sink checks each call's sampled vertices against the
// graph with it before it copies them into row groups (a scalar loop
// there was 8% of BenchmarkWriteSamples' CPU on the 2-core VM).
func MaxUint32(vs []uint32) uint32 {
	if len(vs) == 0 {
		return 0
	}
	_, hi := bounds32(vs)
	return hi
}
