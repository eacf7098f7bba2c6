package pages

import (
	"encoding/binary"
	"slices"
)

// huffEncoder codes a block of literals with zstd's Huffman coding (RFC
// 8878, 4.2.1): a prefix code of at most 11 bits described by 4-bit weights
// (the direct representation, so for alphabets of at most 129 symbols; the
// caller uses huff0 for others), and four streams, each written backwards
// so that the decoder reads its first symbol first.
//
// It serves the literal-only frames of split ids, whose top byte takes a
// few dozen values (64 for a 22-bit id). huff0 spent 2.6 ns a byte on them
// (26% of the GPU stage's CPU writing to file://, 16-core host): a counting
// loop whose increments of the same symbol wait on each other, a table
// built for any alphabet, and a bit writer that checks for room after
// every symbol. Here four counters take turns over a sample, the code of
// two symbols comes from one table of pairs, and a stream's writer flushes
// after every two pairs (at most 44 bits on top of 7, so the container
// holds them), in assembly where the CPU has BMI2 (huffStreamBMI2).
type huffEncoder struct {
	count [4][256]uint32
	lens  [256]uint8
	codes [256]uint16
	// pair is the code of two symbols taken one after the other (a, then
	// b, which a stream written backwards means b is read first), at
	// a<<8|b, the two bytes as they lie in memory (b first) read as one
	// little-endian 16-bit index: code bits << 8 | length.
	pair  []uint32
	order []uint8
	// goLoop keeps streams4's main loop in Go where huffStreamBMI2 could
	// run (tests compare the two).
	goLoop bool
}

// huffStream is one stream's bit writer in streams4's main loop, as
// huffStreamBMI2 reads and leaves it: the bits not yet written and their
// count, the next byte of dst to write, and the end of the symbols left.
type huffStream struct {
	bits uint64
	n    uint64
	pos  int64
	end  int64
}

// huffMaxBits is zstd's longest Huffman code.
const huffMaxBits = 11

// huffDirectSymbols is the most symbols the direct (4-bit) weight
// representation describes: weights of symbols 0..127 plus the last one,
// which is implied.
const huffDirectSymbols = 129

// compress4X returns lit's Huffman tree description, jump table and four
// streams appended to dst, and ok; or ok false where the block should be
// stored otherwise: one symbol (RLE), an alphabet beyond the direct
// representation, or a coding no smaller than the raw bytes.
func (h *huffEncoder) compress4X(dst, lit []byte) (out []byte, ok bool) {
	if len(lit) < 16 {
		return dst, false
	}
	maxSym, distinct := h.histogram(lit)
	if distinct < 2 || maxSym >= huffDirectSymbols {
		return dst, false
	}
	maxLen := h.codeLengths(maxSym)
	// Size before coding: the description, the jump table and the streams
	// (each padded to a byte with its end marker).
	bits, counted := 0, 0
	for s := 0; s <= maxSym; s++ {
		bits += int(h.count[0][s]) * int(h.lens[s])
		counted += int(h.count[0][s])
	}
	bits = bits * len(lit) / counted // the sample's bits per symbol
	desc := 1 + (maxSym+1)/2
	if desc+6+bits/8+4 >= len(lit) {
		return dst, false
	}
	h.assignCodes(maxSym, maxLen)
	// Tree description: header byte, then the weights of symbols
	// 0..maxSym-1 two to a byte, the first in the high nibble.
	dst = append(dst, byte(127+maxSym))
	for s := 0; s < maxSym; s += 2 {
		w := h.weight(s, maxLen) << 4
		if s+1 < maxSym {
			w |= h.weight(s+1, maxLen)
		}
		dst = append(dst, w)
	}
	h.pairTable(maxSym)
	jump := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0)
	dst, sizes := h.streams4(dst, lit, maxSym)
	for i := range 3 {
		binary.LittleEndian.PutUint16(dst[jump+2*i:], uint16(sizes[i]))
	}
	return dst, true
}

// histogram counts lit's symbols into count[0] and returns the largest
// symbol and how many symbols have a count. A block of 16 KiB or more is
// sampled first: every fourth byte is counted, and the sample stands for
// the block if it holds every symbol up to the bound of all bytes OR-ed
// together (the largest symbol's bit length), so each symbol that occurs
// has a code. The code is then the Huffman code of the sample, a little
// longer than the block's own (0.2% on the top byte of 22-bit ids), for a
// quarter of the counting; a sparser alphabet is counted in full.
func (h *huffEncoder) histogram(lit []byte) (maxSym, distinct int) {
	c := &h.count
	*c = [4][256]uint32{}
	if len(lit) >= 16<<10 && h.sample(lit) {
		return h.sum()
	}
	*c = [4][256]uint32{}
	n := len(lit) &^ 3
	for i := 0; i < n; i += 4 {
		c[0][lit[i]]++
		c[1][lit[i+1]]++
		c[2][lit[i+2]]++
		c[3][lit[i+3]]++
	}
	for _, b := range lit[n:] {
		c[0][b]++
	}
	return h.sum()
}

// sample counts every fourth byte of lit and reports whether the sample
// holds every symbol up to the bound of lit's bytes.
func (h *huffEncoder) sample(lit []byte) bool {
	c := &h.count
	var or uint64
	n := len(lit) &^ 15
	for i := 0; i < n; i += 16 {
		q := (*[16]byte)(lit[i : i+16])
		or |= binary.LittleEndian.Uint64(q[:8]) | binary.LittleEndian.Uint64(q[8:])
		c[0][q[0]]++
		c[1][q[4]]++
		c[2][q[8]]++
		c[3][q[12]]++
	}
	for _, b := range lit[n:] {
		or |= uint64(b)
	}
	or |= or >> 32
	or |= or >> 16
	or |= or >> 8
	bound := byte(or)
	for s := bound; s != 0; s >>= 1 {
		bound |= s
	}
	for s := 0; s <= int(bound); s++ {
		if c[0][s]|c[1][s]|c[2][s]|c[3][s] == 0 {
			return false
		}
	}
	return true
}

// sum adds the four counters into count[0] and returns the largest symbol
// counted and how many symbols were.
func (h *huffEncoder) sum() (maxSym, distinct int) {
	c := &h.count
	for s := range 256 {
		c[0][s] += c[1][s] + c[2][s] + c[3][s]
		if c[0][s] > 0 {
			maxSym = s
			distinct++
		}
	}
	return maxSym, distinct
}

// codeLengths sets lens of symbols 0..maxSym: Huffman code lengths limited
// to huffMaxBits and complete (their Kraft sum exactly 1, which zstd's
// implied last weight requires), 0 for absent symbols; it returns the
// longest.
func (h *huffEncoder) codeLengths(maxSym int) int {
	count := h.count[0][:maxSym+1]
	h.order = h.order[:0]
	for s, c := range count {
		h.lens[s] = 0
		if c > 0 {
			h.order = append(h.order, uint8(s))
		}
	}
	// Least frequent first, ties by symbol: the same input always gets the
	// same code.
	slices.SortFunc(h.order, func(a, b uint8) int {
		if count[a] != count[b] {
			return int(count[a]) - int(count[b])
		}
		return int(a) - int(b)
	})
	n := len(h.order)
	// Huffman's merge with two queues (leaves in order, internal nodes in
	// the order they are made): weights and parents of the 2n-1 nodes.
	var weight [2 * 256]uint64
	var parent [2 * 256]int16
	for i, s := range h.order {
		weight[i] = uint64(count[s])
	}
	leaf, inner, next := 0, n, n
	take := func() int {
		if leaf < n && (inner >= next || weight[leaf] <= weight[inner]) {
			leaf++
			return leaf - 1
		}
		inner++
		return inner - 1
	}
	for next < 2*n-1 {
		a, b := take(), take()
		weight[next] = weight[a] + weight[b]
		parent[a], parent[b] = int16(next), int16(next)
		next++
	}
	// Depths from the root down: a node's parent comes after it.
	var depth [2 * 256]uint8
	for i := 2*n - 3; i >= 0; i-- {
		depth[i] = depth[parent[i]] + 1
	}
	maxLen := 0
	for i, s := range h.order {
		h.lens[s] = depth[i]
		maxLen = max(maxLen, int(depth[i]))
	}
	if maxLen <= huffMaxBits {
		return maxLen
	}
	// Too long: clamp to huffMaxBits, lengthen the least frequent shorter
	// codes until the Kraft sum is at most 1, then shorten the most
	// frequent of the longest codes until it is exactly 1. Kraft sums are
	// counted in units of 2^-huffMaxBits.
	const full = 1 << huffMaxBits
	kraft := 0
	for _, s := range h.order {
		h.lens[s] = min(h.lens[s], huffMaxBits)
		kraft += full >> h.lens[s]
	}
	for kraft > full {
		for _, s := range h.order {
			if kraft <= full {
				break
			}
			if h.lens[s] < huffMaxBits {
				kraft -= full >> (h.lens[s] + 1)
				h.lens[s]++
			}
		}
	}
	for kraft < full {
		longest := uint8(0)
		for _, s := range h.order {
			longest = max(longest, h.lens[s])
		}
		// The most frequent code of the longest length: the last in order.
		for i := n - 1; i >= 0; i-- {
			if s := h.order[i]; h.lens[s] == longest {
				kraft += full >> longest
				h.lens[s]--
				break
			}
		}
	}
	maxLen = 0
	for _, s := range h.order {
		maxLen = max(maxLen, int(h.lens[s]))
	}
	return maxLen
}

// weight is symbol s's zstd weight: maxLen+1 less its code length, 0 when
// absent.
func (h *huffEncoder) weight(s, maxLen int) byte {
	if h.lens[s] == 0 {
		return 0
	}
	return byte(maxLen + 1 - int(h.lens[s]))
}

// assignCodes gives the codes zstd's decoder derives from the weights:
// from the lowest weight (the longest code) up, symbols of one weight in
// their order take consecutive values, and each step to a shorter length
// halves the next value.
func (h *huffEncoder) assignCodes(maxSym, maxLen int) {
	next := 0
	for l := maxLen; l >= 1; l-- {
		for s := 0; s <= maxSym; s++ {
			if int(h.lens[s]) == l {
				h.codes[s] = uint16(next)
				next++
			}
		}
		next >>= 1
	}
}

// pairTable fills pair for the symbols 0..maxSym.
func (h *huffEncoder) pairTable(maxSym int) {
	if h.pair == nil {
		// Every 16-bit index, so that streams4 indexes it without bounds
		// checks; only rows and columns up to maxSym are filled and read
		// (as many cache lines as a dense table of them).
		h.pair = make([]uint32, 1<<16)
	}
	for a := 0; a <= maxSym; a++ {
		ca, la := uint32(h.codes[a]), uint32(h.lens[a])
		row := h.pair[a<<8 : a<<8+maxSym+1]
		for b := range row {
			// a is written first, so b's code lies above a's.
			row[b] = (ca|uint32(h.codes[b])<<la)<<8 | (la + uint32(h.lens[b]))
		}
	}
}

// streams4 appends the four Huffman streams of lit (quarters of
// (len+3)/4 symbols, the last one shorter) to dst and returns their sizes.
// Each stream holds its quarter's symbols from the last to the first, so
// that a decoder reading the stream from its end meets the first symbol
// first, then the end marker (a 1 bit) and zero padding to a byte. Each
// goes to a region of its own, moved together at the end.
func (h *huffEncoder) streams4(dst, lit []byte, maxSym int) ([]byte, [4]int) {
	pair := (*[1 << 16]uint32)(h.pair)
	seg := (len(lit) + 3) / 4
	room := seg*huffMaxBits/8 + 16 // every symbol at the longest code, and an 8-byte store past the end
	base := len(dst)
	dst = slices.Grow(dst, 4*room)[:base+4*room]
	var bits [4]uint64
	var n [4]uint
	var pos, end [4]int
	for j := range 4 {
		pos[j] = base + j*room
		end[j] = min((j+1)*seg, len(lit))
	}
	add := func(j int, a, b byte) {
		p := pair[uint16(a)<<8|uint16(b)]
		bits[j] |= uint64(p>>8) << (n[j] & 63)
		n[j] += uint(p & 0xff)
	}
	flush := func(j int) {
		binary.LittleEndian.PutUint64(dst[pos[j]:], bits[j])
		pos[j] += int(n[j] >> 3)
		bits[j] >>= n[j] & 56
		n[j] &= 7
	}
	// The fourth quarter is up to three symbols shorter, and a quarter
	// may hold an odd count: take the others' extra last symbols one by
	// one first, then an odd one out of every quarter, then pairs.
	last := end[3] - 3*seg
	for j := range 3 {
		for end[j]-j*seg > last {
			end[j]--
			s := lit[end[j]]
			bits[j] |= uint64(h.codes[s]) << (n[j] & 63)
			n[j] += uint(h.lens[s])
		}
	}
	if last%2 == 1 {
		for j := range 4 {
			end[j]--
			s := lit[end[j]]
			bits[j] |= uint64(h.codes[s]) << (n[j] & 63)
			n[j] += uint(h.lens[s])
		}
		last--
	}
	// Now n[j] is at most 3*11 bits: flush before the pairs.
	for j := range 4 {
		flush(j)
	}
	// The main loop: four symbols of a stream a round, one stream after
	// the other (in assembly where the CPU has BMI2).
	if rounds := last / 4; rounds > 0 {
		for j := range 4 {
			st := huffStream{bits: bits[j], n: uint64(n[j]), pos: int64(pos[j]), end: int64(end[j])}
			if hasHuffBMI2 && !h.goLoop {
				huffStreamBMI2(&st, &lit[0], &pair[0], rounds, &dst[0])
			} else {
				huffStreamGo(&st, lit, pair, rounds, dst)
			}
			bits[j], n[j], pos[j], end[j] = st.bits, uint(st.n), int(st.pos), int(st.end)
		}
		last -= 4 * rounds
	}
	for ; last >= 2; last -= 2 {
		for j := range 4 {
			add(j, lit[end[j]-1], lit[end[j]-2])
			flush(j)
			end[j] -= 2
		}
	}
	var sizes [4]int
	out := base
	for j := range 4 {
		// The end marker, then the last partial byte.
		bits[j] |= 1 << (n[j] & 63)
		n[j]++
		binary.LittleEndian.PutUint64(dst[pos[j]:], bits[j])
		pos[j] += int(n[j]+7) >> 3
		from := base + j*room
		sizes[j] = pos[j] - from
		out += copy(dst[out:], dst[from:pos[j]])
	}
	return dst[:out], sizes
}

// huffStreamGo is huffStreamBMI2 in Go: rounds times, the four symbols
// before st.end in lit as the pairs (3, 2) and (1, 0), then a flush of the
// whole bytes to dst at st.pos.
func huffStreamGo(st *huffStream, lit []byte, pair *[1 << 16]uint32, rounds int, dst []byte) {
	bits, n, pos, end := st.bits, uint(st.n), int(st.pos), int(st.end)
	for range rounds {
		q := (*[4]byte)(lit[end-4 : end])
		x := pair[uint16(q[3])<<8|uint16(q[2])]
		y := pair[uint16(q[1])<<8|uint16(q[0])]
		bits |= uint64(x>>8) << (n & 63)
		n += uint(x & 0xff)
		bits |= uint64(y>>8) << (n & 63)
		n += uint(y & 0xff)
		binary.LittleEndian.PutUint64(dst[pos:], bits)
		pos += int(n >> 3)
		bits >>= n & 56
		n &= 7
		end -= 4
	}
	st.bits, st.n, st.pos, st.end = bits, uint64(n), int64(pos), int64(end)
}
