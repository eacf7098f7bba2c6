package pages

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// DELTA_BINARY_PACKED for the walk column, written by the sink itself.
// Every Parquet reader decodes it for INT64 (DuckDB, Arrow C++ and Go,
// arrow-rs and polars, hyparquet, parquet-go), unlike BYTE_STREAM_SPLIT,
// which DuckDB reads only for FLOAT and DOUBLE. parquet-go's encoder took
// the values as int64, made a block copy of each 128 and packed widths
// over 16 bits with a scalar loop: the one-shot GPU walk wrote 40% fewer
// vertices a second with it than with the byte-stream-split path.
//
// The layout (Parquet's Encodings.md): a header (block size 128, 4
// miniblocks, the value count, the first value as a zigzag varint), then
// per block of 128 deltas its smallest delta (zigzag varint), the bit
// widths of its four miniblocks, and the miniblocks: 32 deltas less the
// smallest, bit-packed LSB first. A last block's unused miniblocks have
// width 0 and no bytes; a last miniblock's unused deltas are packed as 0.
// The smallest delta is taken over the block's deltas alone (parquet-go's
// includes the padding of a last block), so the bytes may differ from
// parquet-go's in a page's last block, never in what it decodes to.

// deltaWalkPage writes walks [r0, r1) of row group gr (count vertices,
// lens their steps) as one DELTA_BINARY_PACKED page of the walk column.
// Dense ids are encoded from the walks' vertices as they lie (no int64
// copy of the page); external ids are mapped into one first.
func (e *Encoder) deltaWalkPage(c *column, gr *RowGroup, rows rowOrder, r0, r1, count int, lens []int32) error {
	body := e.levels(c, lens, count, r1-r0)
	at := len(body)
	nv := uint32(e.g.NumVertices())
	var lo, hi int64
	if ids := e.g.IDs; ids == nil {
		if e.codec.kind == Zstd && !e.generalPages {
			if done, err := e.framedDeltaPage(c, gr, rows, r0, r1, count, body); done || err != nil {
				return err
			}
		}
		var vs []uint32
		vs, e.flat = rows.vertices(r0, r1, count, e.flat)
		var vlo, vhi uint32
		body, vlo, vhi = appendDeltaUint32(body, vs)
		e.body = body
		// Identity ids: all are in range if the largest is.
		if vhi >= nv {
			return rows.beyond(r0, r1, nv, gr.Base)
		}
		lo, hi = int64(vlo), int64(vhi)
	} else {
		e.ext = grow(e.ext, count)
		vals := e.ext[:0]
		for r := r0; r < r1; r++ {
			for _, v := range rows.walk(r) {
				if v >= nv {
					return fmt.Errorf("%w: walk %d visits vertex %d, beyond the graph's %d", ErrBadChunk, gr.Base+uint64(r), v, nv)
				}
				vals = append(vals, ids[v])
			}
		}
		lo, hi = bounds(vals)
		body = appendDeltaInt64(body, vals)
		e.body = body
	}
	e.segs = append(e.segs[:0], 0, at, len(body))
	return e.page(c, count, r1-r0, lo, hi, binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)))
}

// framedDeltaPage is deltaWalkPage's page of dense ids under zstd. The
// codec stores packed deltas of random ids, whose bytes are close to
// uniform, as a raw frame; so the values are packed straight into one in
// the fragment, around its block headers, instead of into the body and
// then copied into the frame (the copy was 40% of the encoder's time in
// BenchmarkEncode on the 2-core VM). The frame's content is then
// classified as the codec classifies a segment, and a page it would store
// otherwise is laid out again for it: the bytes are the general path's.
// It reports false, having written nothing, for a page that path must
// take (levels the codec stores raw would share the values' frame).
func (e *Encoder) framedDeltaPage(c *column, gr *RowGroup, rows rowOrder, r0, r1, count int, levels []byte) (bool, error) {
	if segmentKind(levels) == segRaw {
		return false, nil
	}
	nv := uint32(e.g.NumVertices())
	var vs []uint32
	vs, e.flat = rows.vertices(r0, r1, count, e.flat)
	at := len(levels)
	var b pageBounds
	encode := func(dst []byte) ([]byte, error) {
		mark := len(dst)
		dst, err := e.codec.encode(dst, levels, []int{0, at}, 0)
		if err != nil {
			return nil, err
		}
		bound := maxDBP32(count)
		dst = slices.Grow(dst, 9+rawAt(bound)+dbpRoom32)
		dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0) // as appendRawFrame's
		size := len(dst) - 4
		frame := dst[len(dst):cap(dst)]
		n, lo, hi := packDeltaFramed(frame, vs, &e.deltas)
		if hi >= nv {
			return nil, errBeyond
		}
		b = pageBounds{int64(lo), int64(hi), binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)), at + n}
		binary.LittleEndian.PutUint32(dst[size:], uint32(n))
		nb := (n + maxRawBlock - 1) / maxRawBlock
		for k := range nb {
			h := uint32(min(maxRawBlock, n-k*maxRawBlock)) << 3
			if k == nb-1 {
				h |= 1
			}
			p := k * (maxRawBlock + 3)
			frame[p], frame[p+1], frame[p+2] = byte(h), byte(h>>8), byte(h>>16)
		}
		if n >= 16<<10 && kindOfEntropy(sampledEntropy(frameSample(frame, n))) == segRaw {
			return dst[:len(dst)+n+3*nb], nil
		}
		// The codec takes these values otherwise: after the levels.
		body := slices.Grow(levels, n)[:at+n]
		copyFromFrame(body[at:], frame, 0)
		e.body = body
		return e.codec.encode(dst[:mark], body, []int{0, at, at + n}, 0)
	}
	// About 3 bytes a vertex: the header's size takes as many bytes as the
	// page's almost always, and the page need not move (pageWith).
	err := e.pageWith(c, count, r1-r0, &b, at+3*count, encode)
	if errors.Is(err, errBeyond) {
		return true, rows.beyond(r0, r1, nv, gr.Base)
	}
	return true, err
}

// packDeltaFramed writes the DELTA_BINARY_PACKED encoding of vs (not
// empty) as the content of a raw zstd frame's blocks (frame: the frame
// after its header, laid out as rawAt says, with room for maxDBP32 bytes
// of content and dbpRoom32 more), leaving the block headers' bytes alone.
// It returns the content's length and vs's bounds. A block of deltas
// that fits before the next block header is packed in place; one that
// may not is packed aside and copied around the header.
func packDeltaFramed(frame []byte, vs []uint32, d *[dbpBlock + 1]uint64) (n int, lo, hi uint32) {
	lo, hi = bounds32(vs)
	fast := hasDBPAVX2 && hi < 1<<31
	var aside [dbpRoom32 + 2*binary.MaxVarintLen64 + 8]byte
	n = copyToFrame(frame, 0, appendDBPHeader(aside[:0], len(vs), int64(vs[0])))
	for i := 1; i < len(vs); i += dbpBlock {
		x := vs[i-1 : min(len(vs), i+dbpBlock)]
		p := rawAt(n)
		if end := min(p+maxRawBlock-n%maxRawBlock, len(frame)); end-p >= dbpRoom32 {
			n += len(appendDBPBlock32(frame[p:p:end], x, fast, d))
		} else {
			n = copyToFrame(frame, n, appendDBPBlock32(aside[:0], x, fast, d))
		}
	}
	return n, lo, hi
}

// copyToFrame copies src into a raw frame's content from byte p on (the
// inverse of copyFromFrame) and returns the content's new end.
func copyToFrame(frame []byte, p int, src []byte) int {
	for len(src) > 0 {
		q := rawAt(p)
		m := copy(frame[q:q+min(len(src), maxRawBlock-p%maxRawBlock)], src)
		src, p = src[m:], p+m
	}
	return p
}

// frameSample is segmentSample of the n bytes of a raw frame's content.
func frameSample(frame []byte, n int) (hist [256]int) {
	step := n / segmentSamples
	for i := range segmentSamples {
		hist[frame[rawAt(i*step)]]++
	}
	return hist
}

const (
	dbpBlock = 128 // deltas a block
	dbpMinis = 4   // miniblocks a block
	dbpMini  = dbpBlock / dbpMinis
)

// appendDBPHeader appends the page header of count values, the first
// first.
func appendDBPHeader(dst []byte, count int, first int64) []byte {
	dst = binary.AppendUvarint(dst, dbpBlock)
	dst = binary.AppendUvarint(dst, dbpMinis)
	dst = binary.AppendUvarint(dst, uint64(count))
	return binary.AppendVarint(dst, first)
}

// maxDBP32 bounds the encoding of n values below 2^32: deltas of such
// values less the block's smallest fit in 33 bits.
func maxDBP32(n int) int {
	return 40 + (n/dbpBlock+1)*(binary.MaxVarintLen64+dbpMinis+dbpMinis*dbpMini*33/8)
}

// maxDBP64 bounds the encoding of n int64 values.
func maxDBP64(n int) int {
	return 40 + (n/dbpBlock+1)*(binary.MaxVarintLen64+dbpMinis+dbpMinis*dbpMini*8)
}

// dbpRoom32 is the most bytes appendDBPBlock32 writes past dst's length
// (a block of 33-bit deltas and the AVX2 packer's overrun).
const dbpRoom32 = binary.MaxVarintLen64 + dbpMinis + dbpMinis*dbpMini*33/8 + 32

// appendDeltaUint32 appends the DELTA_BINARY_PACKED encoding of vs, as
// INT64 values, to dst, and returns vs's smallest and largest (0, 0 for
// none). The deltas of values below 2^32 fit in int64: one pass per block
// takes them, the block's smallest and each miniblock's largest, and a
// second packs them; the bounds are bounds32's (AVX2) over the page.
func appendDeltaUint32(dst []byte, vs []uint32) (_ []byte, lo, hi uint32) {
	if len(vs) == 0 {
		return appendDBPHeader(dst, 0, 0), 0, 0
	}
	dst = slices.Grow(dst, maxDBP32(len(vs))+32)
	dst = appendDBPHeader(dst, len(vs), int64(vs[0]))
	lo, hi = bounds32(vs)
	fast := hasDBPAVX2 && hi < 1<<31
	var d [dbpBlock + 1]uint64
	for i := 1; i < len(vs); i += dbpBlock {
		dst = appendDBPBlock32(dst, vs[i-1:min(len(vs), i+dbpBlock)], fast, &d)
	}
	return dst, lo, hi
}

// appendDBPBlock32 appends the block of the deltas of x (2 to 129 values
// below 2^32; fast: below 2^31, and AVX2) to dst, which has dbpRoom32
// bytes of capacity past its length: it does not grow. d is scratch
// space (one more than a block: the pair packer reads past a miniblock's
// end).
func appendDBPBlock32(dst []byte, x []uint32, fast bool, d *[dbpBlock + 1]uint64) []byte {
	n := len(x) - 1
	var mn int64
	var mx [dbpMinis]int64
	var minis int
	switch {
	case n == dbpBlock && fast:
		// Deltas of values below 2^31, and their differences from the
		// smallest, fit in 32 bits: AVX2 takes eight a register.
		m, m0, m1, m2, m3 := dbpPlanAVX2(&x[0])
		w := uint32(bits.Len32(uint32(m0-m))) | uint32(bits.Len32(uint32(m1-m)))<<8 |
			uint32(bits.Len32(uint32(m2-m)))<<16 | uint32(bits.Len32(uint32(m3-m)))<<24
		dst = binary.AppendVarint(dst, int64(m))
		dst = binary.LittleEndian.AppendUint32(dst, w)
		size := 4 * int(w&0xff+w>>8&0xff+w>>16&0xff+w>>24)
		at := len(dst)
		_ = dst[at : at+size+32] // the packer's overrun
		dbpPackAVX2(&dst[at : at+1][0], &x[0], m, w, &dbpTabs)
		return dst[:at+size]
	case n == dbpBlock:
		mn, mx = blockDeltas32((*[dbpBlock + 1]uint32)(x), d)
		minis = dbpMinis
	default:
		mn = 1<<63 - 1
		for m := range mx {
			mx[m] = -1 << 63
		}
		for k := range n {
			dk := int64(x[k+1]) - int64(x[k])
			d[k] = uint64(dk)
			mn = min(mn, dk)
			mx[k/dbpMini] = max(mx[k/dbpMini], dk)
		}
		minis = (n + dbpMini - 1) / dbpMini
		// Unused deltas of the last miniblock pack as 0.
		for k := n; k < minis*dbpMini; k++ {
			d[k] = uint64(mn)
		}
	}
	dst = binary.AppendVarint(dst, mn)
	var w [dbpMinis]uint
	for m := range minis {
		w[m] = uint(bits.Len64(uint64(mx[m] - mn)))
	}
	dst = append(dst, byte(w[0]), byte(w[1]), byte(w[2]), byte(w[3]))
	for m := range minis {
		mini := (*[dbpMini]uint64)(d[m*dbpMini:])
		size := dbpMini * int(w[m]) / 8
		at := len(dst)
		dst = dst[:at+size]
		switch {
		case w[m] == 0:
		case w[m] <= 32:
			packMini32(dst[at:], mini, uint64(mn), w[m])
		default:
			packMini64(dst[at:], mini, uint64(mn), w[m])
		}
	}
	return dst
}

// blockDeltas32 writes the 128 deltas of x (x[k+1]-x[k]) to d and
// returns the smallest and each miniblock's largest, in two chains each:
// one min or max chain (compare and move) a value would bound the loop.
func blockDeltas32(x *[dbpBlock + 1]uint32, d *[dbpBlock + 1]uint64) (mn int64, mx [dbpMinis]int64) {
	mn0, mn1 := int64(1<<63-1), int64(1<<63-1)
	for m := range dbpMinis {
		mx0, mx1 := int64(-1<<63), int64(-1<<63)
		for k := m * dbpMini; k < (m+1)*dbpMini; k += 2 {
			d0 := int64(x[k+1]) - int64(x[k])
			d1 := int64(x[k+2]) - int64(x[k+1])
			d[k], d[k+1] = uint64(d0), uint64(d1)
			mn0, mx0 = min(mn0, d0), max(mx0, d0)
			mn1, mx1 = min(mn1, d1), max(mx1, d1)
		}
		mx[m] = max(mx0, mx1)
	}
	return min(mn0, mn1), mx
}

// appendDeltaInt64 appends the DELTA_BINARY_PACKED encoding of vals to
// dst. Deltas and their differences from the block's smallest wrap around
// as the format says (two's complement), so any int64 values encode.
func appendDeltaInt64(dst []byte, vals []int64) []byte {
	if len(vals) == 0 {
		return appendDBPHeader(dst, 0, 0)
	}
	dst = slices.Grow(dst, maxDBP64(len(vals)))
	dst = appendDBPHeader(dst, len(vals), vals[0])
	var d [dbpBlock]uint64
	for i := 1; i < len(vals); i += dbpBlock {
		n := min(dbpBlock, len(vals)-i)
		x := vals[i-1 : i+n]
		var mn int64 = 1<<63 - 1
		for k := 0; k < n; k++ {
			dk := x[k+1] - x[k]
			d[k] = uint64(dk)
			mn = min(mn, dk)
		}
		dst = binary.AppendVarint(dst, mn)
		minis := (n + dbpMini - 1) / dbpMini
		for k := n; k < minis*dbpMini; k++ {
			d[k] = uint64(mn)
		}
		var w [dbpMinis]uint
		for m := range minis {
			var or uint64
			for _, u := range d[m*dbpMini : (m+1)*dbpMini] {
				or |= u - uint64(mn)
			}
			w[m] = uint(bits.Len64(or))
		}
		dst = append(dst, byte(w[0]), byte(w[1]), byte(w[2]), byte(w[3]))
		for m := range minis {
			size := dbpMini * int(w[m]) / 8
			at := len(dst)
			dst = dst[:at+size]
			if w[m] > 0 {
				packMini64(dst[at:], (*[dbpMini]uint64)(d[m*dbpMini:]), uint64(mn), w[m])
			}
		}
	}
	return dst
}

// packMini32 packs the 32 values d[k]-base, each below 2^w with w <= 32,
// LSB first into dst (4w bytes). Two values make a pair of 2w <= 64 bits,
// and a 64-bit accumulator takes the pairs, spilling a word whenever it
// fills: half the iterations of a loop over values, whose bit count is a
// chain from one to the next.
func packMini32(dst []byte, d *[dbpMini]uint64, base uint64, w uint) {
	_ = dst[4*w-1]
	var acc uint64
	var n uint
	o := uint(0)
	w2 := 2 * w
	for k := 0; k < dbpMini; k += 2 {
		p := (d[k] - base) | (d[k+1]-base)<<(w&63)
		acc |= p << (n & 63)
		if n+w2 >= 64 {
			binary.LittleEndian.PutUint64(dst[o:], acc)
			o += 8
			acc = p >> ((64 - n) & 63)
			if n == 0 {
				acc = 0
			}
			n = n + w2 - 64
		} else {
			n += w2
		}
	}
	if n > 0 { // an odd width leaves 32 bits
		binary.LittleEndian.PutUint32(dst[o:], uint32(acc))
	}
}

// packMini64 is packMini32 for widths up to 64.
func packMini64(dst []byte, d *[dbpMini]uint64, base uint64, w uint) {
	var acc uint64
	var n uint
	o := 0
	for _, u := range d {
		u -= base
		acc |= u << n
		if n+w >= 64 {
			binary.LittleEndian.PutUint64(dst[o:], acc)
			o += 8
			acc = u >> (64 - n) // 0 when n is 0
			n = n + w - 64
		} else {
			n += w
		}
	}
	if n > 0 { // an odd width leaves 32 bits
		binary.LittleEndian.PutUint32(dst[o:], uint32(acc))
	}
}

// dbpTab is dbpPackAVX2's table for one width w: how the upper 128-bit
// lane's 4w-bit number [a, b] (two words) moves up by 4w bits. Word i of
// the result is word idxL[2i]/2 of the register shifted left by cntL[i]
// ORed with word idxR[2i]/2 shifted right by cntR[i]; a count of 64
// gives 0.
type dbpTab struct {
	idxL [8]uint32
	cntL [4]uint64
	idxR [8]uint32
	cntR [4]uint64
}

// dbpTabs holds dbpTab for widths 0 to 32. Read only.
var dbpTabs = func() (t [33]dbpTab) {
	for w := 1; w <= 32; w++ {
		q, s := 4*w/64, uint64(4*w%64)
		tb := &t[w]
		for i := range 4 {
			tb.cntL[i], tb.cntR[i] = 64, 64
			src := func(idx *[8]uint32, word uint32) { idx[2*i], idx[2*i+1] = 2*word, 2*word+1 }
			switch i {
			case q: // a's bits that stay in word q
				src(&tb.idxL, 2)
				tb.cntL[i] = s
			case q + 1: // b's, and those of a's that move up
				src(&tb.idxL, 3)
				tb.cntL[i] = s
				if s > 0 {
					src(&tb.idxR, 2)
					tb.cntR[i] = 64 - s
				}
			case q + 2: // those of b's that move up
				if s > 0 {
					src(&tb.idxR, 3)
					tb.cntR[i] = 64 - s
				}
			}
		}
	}
	return t
}()
