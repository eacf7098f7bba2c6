package pages

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"
)

// splitWalkPage writes walks [r0, r1) of row group gr (count vertices,
// lens their steps) as one BYTE_STREAM_SPLIT page of the walk column,
// without an int64 buffer of the mapped values. Mapping into one (with a
// min/max chain per value) and splitting it with parquet-go's encoder cost
// 4.2 ns a vertex on the 16-core host, a third of the sink's time; the
// bytes are the same.
//
// Under zstd the streams a dense id cannot reach (denseStreams) are not
// written at all: the codec frames them as one run of zeros. Clearing them
// and then finding them constant took 4-5% of the stage's CPU on the
// 16-core host (profile of a GPU backlog to file://).
func (e *Encoder) splitWalkPage(c *column, gr *RowGroup, rows rowOrder, r0, r1, count int, lens []int32) error {
	body := e.levels(c, lens, count, r1-r0)
	at := len(body)
	if e.g.IDs == nil && e.codec.kind == Zstd && !e.generalPages {
		if done, err := e.framedWalkPage(c, gr, rows, r0, r1, count, body); done || err != nil {
			return err
		}
	}
	body = slices.Grow(body, 8*count)[:at+8*count]
	streams := 8
	var lo, hi int64
	var err error
	if e.g.IDs == nil {
		nv := uint32(e.g.NumVertices())
		streams = denseStreams(nv)
		lo, hi, e.flat, err = splitDense(body[at:], e.flat, count, nv, gr.Base, rows, r0, r1)
		if e.codec.kind == Zstd {
			body = body[:at+streams*count]
			e.zeros = (8 - streams) * count
		} else {
			clear(body[at+streams*count:])
			streams = 8
		}
	} else {
		lo, hi, err = splitMapped(body[at:], count, e.g.IDs, gr.Base, rows, r0, r1)
	}
	if err != nil {
		e.zeros = 0
		return err
	}
	e.body = body
	e.segs = append(e.segs[:0], 0, at)
	for k := 1; k <= streams; k++ {
		e.segs = append(e.segs, at+k*count)
	}
	return e.page(c, count, r1-r0, lo, hi, binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)))
}

// framedWalkPage is splitWalkPage's page of dense ids under zstd when its
// leading byte streams are close to uniform (the low bytes of random ids),
// which zstd stores as raw blocks. The other streams go through the codec
// as before, so the bytes are those of the general path. It reports
// false, having written nothing, for a page that path must take.
//
// The vertices are split once, the leading streams straight into a raw
// frame's blocks in the fragment (around the block headers) and the rest
// into the body buffer, and which streams are raw is then found from the
// split streams, in cache. The split needs the number of raw streams
// before it is known: it takes the last framed page's, and a page that
// turns out otherwise (rare: a page's low bytes are random or not) has
// its streams laid out again. The vertices are not in cache (the GPU
// engine's were just copied in from the device): sampling them before the
// split, to know the layout first, read a line here and there over every
// page, 0.33-0.54 of 5.4-6.0 core-s of the scale-22 one-shot on the
// 16-core host; splitting them into a buffer and copying the raw streams
// into the frame cost as much in the copy's stores.
func (e *Encoder) framedWalkPage(c *column, gr *RowGroup, rows rowOrder, r0, r1, count int, levels []byte) (bool, error) {
	if count < 16<<10 || segmentKind(levels) == segRaw {
		return false, nil
	}
	nv := uint32(e.g.NumVertices())
	streams := denseStreams(nv)
	if e.rawGuess == 0 || e.rawGuess > streams {
		e.rawGuess = streams - 1
	}
	guess := e.rawGuess
	var vs []uint32
	vs, e.flat = rows.vertices(r0, r1, count, e.flat)
	// The streams not in the raw frame go after the levels in the body
	// buffer.
	at := len(levels)
	grown := slices.Grow(levels, (4-guess)*count)
	e.body, levels = grown[:at], grown[:at]
	spare := grown[at : at+(4-guess)*count]
	var b pageBounds
	encode := func(dst []byte) ([]byte, error) {
		dst, err := e.codec.encode(dst, levels, []int{0, at}, 0)
		if err != nil {
			return nil, err
		}
		mark := len(dst)
		dst, start := appendRawFrame(dst, guess*count)
		lo, hi := splitFramed(dst[start:], spare, vs, guess)
		if hi >= nv {
			return nil, errBeyond
		}
		b = pageBounds{int64(lo), int64(hi), binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)), 0}
		raw := 0
		for raw < streams && kindOfEntropy(sampledEntropy(framedSample(dst[start:], spare, count, guess, raw))) == segRaw {
			raw++
		}
		rest := spare
		if raw != guess {
			// Lay the streams out for raw: the first raw into a raw frame
			// (none when none is raw: then the codec frames them all, as
			// the general path does), the rest for the codec.
			e.laid = grow(e.laid, 4*count)
			for k := range streams {
				if k < guess {
					copyFromFrame(e.laid[k*count:(k+1)*count], dst[start:], k*count)
				} else {
					copy(e.laid[k*count:(k+1)*count], spare[(k-guess)*count:])
				}
			}
			dst = dst[:mark]
			if raw > 0 {
				dst = appendFrame(dst, e.laid[:raw*count], 0, raw*count)
			}
			rest = e.laid[raw*count:]
			e.rawGuess = max(raw, 1)
		}
		segs := e.segs[:0]
		for k := 0; k <= streams-raw; k++ {
			segs = append(segs, k*count)
		}
		e.segs = segs
		return e.codec.encode(dst, rest[:(streams-raw)*count], segs, (8-streams)*count)
	}
	err := e.pageWith(c, count, r1-r0, &b, at+8*count, encode)
	if errors.Is(err, errBeyond) {
		return true, rows.beyond(r0, r1, nv, gr.Base)
	}
	return true, err
}

// errBeyond stops a page's encoding at a vertex beyond the graph, found
// by the pass that splits it; the page's caller reports it (beyond).
var errBeyond = errors.New("pages: a vertex beyond the graph")

// rawAt is where byte p of a raw frame's content lies after the frame's
// header (appendRawFrame): after a 3-byte header every maxRawBlock bytes.
func rawAt(p int) int { return 3*(p/maxRawBlock+1) + p }

// splitFramed splits vals into their four byte streams: the first raw
// into the raw frame's blocks (frame: the frame after its header, sized
// for raw streams of len(vals) bytes), the others one after the other into
// spare. It returns the smallest and largest value.
func splitFramed(frame, spare []byte, vals []uint32, raw int) (lo, hi uint32) {
	count := len(vals)
	cuts := []int{0, count}
	for k := range raw { // where a stream crosses a block boundary
		for b := k*count/maxRawBlock + 1; b*maxRawBlock < (k+1)*count; b++ {
			cuts = append(cuts, b*maxRawBlock-k*count)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	lo, hi = vals[0], vals[0]
	for i := 0; i+1 < len(cuts); i++ {
		ja, jb := cuts[i], cuts[i+1]
		var d [4][]byte
		for k := range 4 {
			if k < raw {
				q := rawAt(k*count + ja)
				d[k] = frame[q : q+jb-ja]
			} else {
				d[k] = spare[(k-raw)*count+ja : (k-raw)*count+jb]
			}
		}
		l, h := split4(&d, vals[ja:jb])
		lo, hi = min(lo, l), max(hi, h)
	}
	return lo, hi
}

// framedSample is segmentSample of stream k of count bytes as splitFramed
// laid it out for raw streams in the frame.
func framedSample(frame, spare []byte, count, raw, k int) [256]int {
	if k >= raw {
		return segmentSample(spare[(k-raw)*count : (k-raw+1)*count])
	}
	var hist [256]int
	step := count / segmentSamples
	for i := range segmentSamples {
		hist[frame[rawAt(k*count+i*step)]]++
	}
	return hist
}

// copyFromFrame copies len(dst) bytes of a raw frame's content, from p on,
// out of its blocks.
func copyFromFrame(dst, frame []byte, p int) {
	for n := 0; n < len(dst); {
		m := copy(dst[n:min(len(dst), n+maxRawBlock-(p+n)%maxRawBlock)], frame[rawAt(p+n):])
		n += m
	}
}

// denseStreams is how many byte streams of a page can hold other bytes than
// zero when its values are dense ids of a graph of nv vertices (below nv):
// the bytes of nv-1.
func denseStreams(nv uint32) int {
	n := 1
	for m := nv - 1; m > 0xff && nv > 0; m >>= 8 {
		n++
	}
	return n
}

// splitDense splits the walks of a graph without external ids (a vertex's
// id is its dense index, below 2^32) into the byte streams s (8 x count
// bytes): the low four streams are the BYTE_STREAM_SPLIT of the vertices as
// 32-bit values (splitBounds32 over the walks' vertices, copied into the
// scratch buffer flat unless one chunk holds them in a row); the high
// four, and those of the low four beyond denseStreams(nv), are zero, and
// are left as they are. It returns the smallest and largest id and the
// scratch buffer. (A single scalar Go pass taking the bounds and writing
// three streams was slower than the bounds and parquet-go's vectorised
// four, even on pages out of cache: 1.15-1.20 against 0.97-1.01 ns a
// vertex on the 2-core VM; splitBounds32 does both in one AVX2 pass.)
func splitDense(s []byte, flat []uint32, count int, nv uint32, base uint64, rows rowOrder, r0, r1 int) (lo, hi int64, _ []uint32, err error) {
	vs, flat := rows.vertices(r0, r1, count, flat)
	vlo, vhi := splitBounds32(s, vs)
	if vhi >= nv {
		return 0, 0, flat, rows.beyond(r0, r1, nv, base)
	}
	return int64(vlo), int64(vhi), flat, nil
}

// vertices are the count vertices of rows [r0, r1) one after the other:
// the chunk's own when they lie so in one (run), else copied into flat,
// which it returns (grown).
func (o rowOrder) vertices(r0, r1, count int, flat []uint32) (_, _ []uint32) {
	if vs, ok := o.run(r0, r1); ok {
		return vs, flat
	}
	flat = grow(flat, count)
	i := 0
	for r := r0; r < r1; r++ {
		i += copy(flat[i:], o.walk(r))
	}
	return flat[:count], flat
}

// beyond is the error for rows [r0, r1) of a row group starting at walk
// base, some vertex of which is nv or more: identity ids are all in range
// if the largest is, so only then is the walk looked for.
func (o rowOrder) beyond(r0, r1 int, nv uint32, base uint64) error {
	for r := r0; r < r1; r++ {
		for _, v := range o.walk(r) {
			if v >= nv {
				return fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, base+uint64(r), v, nv)
			}
		}
	}
	return fmt.Errorf("%w: a vertex beyond the graph's %d", ErrBadChunk, nv)
}

// splitBounds32Go is splitBounds32 in two passes: the bounds in four
// chains (bounds32), then parquet-go's splitter.
func splitBounds32Go(s []byte, vals []uint32) (lo, hi uint32) {
	lo, hi = bounds32(vals)
	as32 := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals))
	out, _ := (&bytestreamsplit.Encoding{}).EncodeInt32(s[:0:4*len(vals)], as32) // never fails for int32
	if len(out) > 0 && &out[0] != &s[0] {
		copy(s, out) // the encoder reallocated
	}
	return lo, hi
}

// run returns the vertices of rows [r0, r1) when they lie one after the
// other in one chunk (as they do when chunks arrive in walk id order and
// hold more walks than a page): then no copy is needed.
func (o rowOrder) run(r0, r1 int) ([]uint32, bool) {
	s, i0, i1 := o.seg[r0], int(o.idx[r0]), int(o.idx[r1-1])
	// The rows' walk ids are consecutive and a segment's ascend: if the
	// first and last row are walks of one segment as far apart as the
	// rows, every row between is too, in order.
	if o.seg[r1-1] != s || i1-i0 != r1-1-r0 {
		return nil, false
	}
	c := o.segs[s].Chunk
	return c.Vertices[c.Offsets[i0]:c.Offsets[i1+1]], true
}

// bounds32Go is the smallest and largest of vals (not empty), in four
// independent chains: one min/max chain per value was a third of the
// sink's mapping time. bounds32 (bounds_amd64.go) uses AVX2 where it can.
func bounds32Go(vals []uint32) (lo, hi uint32) {
	l0, l1, l2, l3 := vals[0], vals[0], vals[0], vals[0]
	h0, h1, h2, h3 := l0, l0, l0, l0
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		x := vals[i : i+4 : i+4]
		l0, h0 = min(l0, x[0]), max(h0, x[0])
		l1, h1 = min(l1, x[1]), max(h1, x[1])
		l2, h2 = min(l2, x[2]), max(h2, x[2])
		l3, h3 = min(l3, x[3]), max(h3, x[3])
	}
	for _, v := range vals[i:] {
		l0, h0 = min(l0, v), max(h0, v)
	}
	return min(l0, l1, l2, l3), max(h0, h1, h2, h3)
}

// splitMapped splits the walks of a graph with external ids into the byte
// streams s (8 x count bytes), checking each vertex against the id table.
// It returns the smallest and largest external id.
func splitMapped(s []byte, count int, ids []int64, base uint64, rows rowOrder, r0, r1 int) (lo, hi int64, err error) {
	var st [8][]byte
	for k := range st {
		st[k] = s[k*count : (k+1)*count]
	}
	lo, hi = int64(1<<63-1), int64(-1<<63)
	i := 0
	for r := r0; r < r1; r++ {
		for _, v := range rows.walk(r) {
			if int(v) >= len(ids) {
				return 0, 0, fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, base+uint64(r), v, len(ids))
			}
			x := ids[v]
			lo, hi = min(lo, x), max(hi, x)
			u := uint64(x)
			st[0][i], st[1][i], st[2][i], st[3][i] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			st[4][i], st[5][i], st[6][i], st[7][i] = byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56)
			i++
		}
	}
	return lo, hi, nil
}
