package pages

// Walks of a graph with string ids: the start and walk.list.element
// columns are BYTE_ARRAY (logical type STRING), dictionary-encoded. Each
// column chunk's dictionary is the set of vertices its row group visits;
// data pages hold the indices as the RLE/bit-packed hybrid
// (RLE_DICTIONARY), here bit-packed runs only. The walk_id and length
// columns are those of integer walks.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// StringDictionary is the encoding of walks of a graph with string ids
// (start and walk values as dictionary-encoded strings). It is not a
// user's choice: the sink takes it for such graphs whatever the walk
// encoding asked for, since the integer encodings do not apply to strings.
const StringDictionary WalkEncoding = "string_dictionary"

// rowString is the part writers' schema of walks of a graph with string
// ids: sink.StringRow's columns.
type rowString struct {
	WalkID int64    `parquet:"walk_id,delta"`
	Start  string   `parquet:"start,dict"`
	Length int32    `parquet:"length"`
	Walk   []string `parquet:"walk,list" parquet-element:",dict"`
}

var stringSchema = sync.OnceValues(func() ([]format.SchemaElement, error) { return fileSchemaOf(StringDictionary) })

func newStringPartWriter(out io.Writer, opts ...parquet.WriterOption) RowGroupWriter {
	return parquet.NewGenericWriter[rowString](out, opts...)
}

// dictionary is one column chunk's dictionary: the distinct vertices of
// its values in dense id order, and the positions of its smallest and
// largest string id; keys and tmp are buildDictionary's sort buffers.
type dictionary struct {
	verts     []uint32
	lo, hi    int
	keys, tmp []uint64
}

// buildDictionary makes the dictionary of the vertices vals (dense ids,
// checked against the graph) and maps vals to their indices in place.
// Entries are in dense id order, not string order: sorting a row group's
// strings was most of the encoder's time (1.36 of 3.38 s in a profile of
// BenchmarkEncodeStrings), and readers need no order. Pages therefore
// carry the column chunk's bounds in the page index, which the format
// allows (its bounds need not be tight). The values are radix sorted with
// their positions (a comparison sort and a binary search per value took
// 250 ns a vertex on random walks over a million vertices).
func (e *Encoder) buildDictionary(d *dictionary, vals []uint32) {
	n := len(vals)
	if cap(d.keys) < n {
		d.keys, d.tmp = make([]uint64, n), make([]uint64, n)
	}
	keys, tmp := d.keys[:n], d.tmp[:n]
	for i, v := range vals {
		keys[i] = uint64(v)<<32 | uint64(i)
	}
	// LSD radix sort on the vertex (the high 32 bits), 11 bits a pass.
	var count [1 << 11]int
	for shift := 32; shift < 64; shift += 11 {
		clear(count[:])
		for _, k := range keys {
			count[(k>>shift)&(1<<11-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i], sum = sum, sum+c
		}
		for _, k := range keys {
			b := (k >> shift) & (1<<11 - 1)
			tmp[count[b]] = k
			count[b]++
		}
		keys, tmp = tmp, keys
	}
	d.verts = d.verts[:0]
	for _, k := range keys {
		v := uint32(k >> 32)
		if len(d.verts) == 0 || d.verts[len(d.verts)-1] != v {
			d.verts = append(d.verts, v)
		}
		vals[uint32(k)] = uint32(len(d.verts) - 1)
	}
	d.lo, d.hi = 0, 0
	for i := 1; i < len(d.verts); i++ {
		s := e.idBytes(d.verts[i])
		if bytes.Compare(s, e.idBytes(d.verts[d.lo])) < 0 {
			d.lo = i
		}
		if bytes.Compare(s, e.idBytes(d.verts[d.hi])) > 0 {
			d.hi = i
		}
	}
}

// stringStartColumn writes the start column of a string-id row group (a
// dictionary page, then one page of the walks' first vertices) and returns
// the row group's steps.
func (e *Encoder) stringStartColumn(gr *RowGroup, rows rowOrder) (int64, error) {
	n := gr.Rows
	nv := uint32(e.g.NumVertices())
	c := &e.cols[1]
	c.reset(int64(len(e.out)))
	e.flat = grow(e.flat, n)
	var steps int64
	for r := range n {
		v, nvert := rows.first(r)
		if v >= nv {
			return 0, fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, gr.Base+uint64(r), v, nv)
		}
		e.flat[r] = v
		steps += int64(nvert - 1)
	}
	d := &e.dicts[0]
	e.buildDictionary(d, e.flat[:n])
	if err := e.dictPage(c, d); err != nil {
		return 0, err
	}
	if err := e.indexPage(c, e.flat[:n], n, nil, d); err != nil {
		return 0, err
	}
	return steps, nil
}

// stringWalkColumn writes the walk.list.element column of a string-id row
// group: the dictionary of every vertex visited, then pages of whole walks.
func (e *Encoder) stringWalkColumn(gr *RowGroup, rows rowOrder, lens []int32) error {
	n := gr.Rows
	nv := uint32(e.g.NumVertices())
	total := 0
	for r := range n {
		total += len(rows.walk(r))
	}
	e.flat = grow(e.flat, total)
	at := 0
	for r := range n {
		w := rows.walk(r)
		for _, v := range w {
			if v >= nv {
				return fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, gr.Base+uint64(r), v, nv)
			}
		}
		at += copy(e.flat[at:], w)
	}
	d := &e.dicts[1]
	e.buildDictionary(d, e.flat[:total])
	c := &e.cols[3]
	c.reset(int64(len(e.out)))
	if err := e.dictPage(c, d); err != nil {
		return err
	}
	at = 0
	for r0 := 0; r0 < n; {
		r1, count := r0, 0
		for r1 < n && (r1 == r0 || count+len(rows.walk(r1)) <= pageValues) {
			count += len(rows.walk(r1))
			r1++
		}
		if err := e.indexPage(c, e.flat[at:at+count], r1-r0, lens[r0:r1], d); err != nil {
			return err
		}
		at += count
		r0 = r1
	}
	return nil
}

// dictPage writes column c's dictionary page: each string id PLAIN (a
// 4-byte length, then the bytes), compressed with the page codec.
func (e *Encoder) dictPage(c *column, d *dictionary) error {
	body := e.body[:0]
	for _, v := range d.verts {
		s := e.idBytes(v)
		body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
		body = append(body, s...)
	}
	e.body = body
	if len(body) > math.MaxInt32 {
		// Ids of up to 1 KiB and a row group's million distinct vertices
		// could come near it: a page's size is an int32.
		return fmt.Errorf("pages: %v dictionary of %d bytes is beyond a Parquet page's 2 GiB: lower the row group size", c.path, len(body))
	}
	e.segs = append(e.segs[:0], 0, len(body))
	comp, err := e.codec.encode(e.laid[:0], body, e.segs, 0)
	if err != nil {
		return fmt.Errorf("pages: compress %v dictionary: %w", c.path, err)
	}
	e.laid = comp
	h := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(body)), CompressedPageSize: int32(len(comp)),
		DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(len(d.verts)), Encoding: format.Plain})}
	hb, err := thrift.Marshal(&e.thrift, &h)
	if err != nil {
		return fmt.Errorf("pages: dictionary page header %v: %w", c.path, err)
	}
	off := len(e.out)
	e.out = append(append(e.out, hb...), comp...)
	c.crc = crc32cUpdate(c.crc, e.out[off:])
	c.dict = true
	c.dictVerts = d.verts
	c.uncompressed += int64(len(hb) + len(body))
	c.dataStart = int64(len(e.out))
	return nil
}

// indexPage writes one data page of dictionary indices idx (rows rows;
// lens the walks' steps for the list's leaf, whose levels it encodes).
func (e *Encoder) indexPage(c *column, idx []uint32, rows int, lens []int32, d *dictionary) error {
	body := e.levels(c, lens, len(idx), rows)
	at := len(body)
	width := max(1, bits.Len32(uint32(len(d.verts)-1)))
	body = append(body, byte(width))
	body = appendBitPacked(body, idx, width)
	e.body = body
	e.segs = append(e.segs[:0], 0, at, len(body))
	minB, maxB := slices.Clone(e.idBytes(d.verts[d.lo])), slices.Clone(e.idBytes(d.verts[d.hi]))
	return e.page(c, len(idx), rows, int64(d.lo), int64(d.hi), minB, maxB)
}

// appendBitPacked appends vals as one bit-packed run of the RLE/bit-packed
// hybrid: a varint header (groups of 8 << 1 | 1), then the values at
// width bits each, least significant bit first, the last group padded
// with zeros.
func appendBitPacked(b []byte, vals []uint32, width int) []byte {
	groups := (len(vals) + 7) / 8
	b = binary.AppendUvarint(b, uint64(groups)<<1|1)
	var acc uint64
	var n int
	for i := range groups * 8 {
		var v uint32
		if i < len(vals) {
			v = vals[i]
		}
		acc |= uint64(v) << n
		n += width
		for n >= 8 {
			b = append(b, byte(acc))
			acc >>= 8
			n -= 8
		}
	}
	// groups*8 values of width bits are whole bytes: nothing is left.
	return b
}

// stringStats are a string column's smallest and largest values, from
// the dictionary indices its pages recorded.
func (e *Encoder) stringStats(c *column) (lo, hi []byte) {
	return slices.Clone(e.idBytes(c.dictVerts[c.min])), slices.Clone(e.idBytes(c.dictVerts[c.max]))
}

// idBytes is dense vertex v's string id, in the graph's memory where it
// has string ids (ExternalString would copy it for every comparison of
// the dictionary's sort).
func (e *Encoder) idBytes(v uint32) []byte {
	if g := e.g; g.StrOffsets != nil {
		return g.StrBytes[g.StrOffsets[v]:g.StrOffsets[v+1]]
	}
	return []byte(e.g.ExternalString(v))
}
