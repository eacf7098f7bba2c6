package pages

import (
	"encoding/binary"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/huff0"
)

// Runs of 8-byte values as zstd frames written directly (RFC 8878). The
// src column of sampled edges is PLAIN, and its values come in runs (the
// edges of one source: 25 and 10 in neighbour [25, 10]). zstd's match
// finder took them as a literal value and a match 8 bytes back each, but
// hashed every position to find that: half the sample encoder's CPU in
// BenchmarkWriteSamples. Here the runs are found by comparing each value
// with the one before, and written as those very sequences: the run's first
// value as literals (Huffman-coded per block, as the codec codes literal
// segments), a match of the rest of the run at offset 8 (appendRunsBlock);
// literal lengths and offsets as RLE codes, match lengths in an FSE table
// of the block's own (appendSequences).

// runSeq is one sequence: ll literal bytes, then a match of mlBase+3 bytes
// at offset 8.
type runSeq struct {
	ll, mlBase uint32
}

// fseSym is how an FSE table codes one symbol (zstd's symbolTT): the
// state's bits to write and the next state, and the symbol's extra bits.
type fseSym struct {
	deltaNbBits    uint32
	deltaFindState int32
	extra          uint8
}

// fseTable is an FSE coding table of a predefined distribution.
type fseTable struct {
	log   uint8
	state []uint16
	sym   []fseSym
}

// newFSETable builds the coding table of distribution norm (-1: a low
// probability symbol) at accuracy log, as zstd's FSE_buildCTable does;
// extra gives each symbol's extra bits.
func newFSETable(norm []int16, log uint8, extra func(int) uint8) *fseTable {
	size := uint32(1) << log
	high := size - 1
	cumul := make([]int32, len(norm)+1)
	symbols := make([]uint8, size)
	for s, v := range norm {
		if v == -1 {
			cumul[s+1] = cumul[s] + 1
			symbols[high] = uint8(s)
			high--
		} else {
			cumul[s+1] = cumul[s] + int32(v)
		}
	}
	step := size>>1 + size>>3 + 3
	pos := uint32(0)
	for s, v := range norm {
		for range max(v, 0) {
			symbols[pos] = uint8(s)
			pos = (pos + step) & (size - 1)
			for pos > high {
				pos = (pos + step) & (size - 1)
			}
		}
	}
	t := &fseTable{log: log, state: make([]uint16, size), sym: make([]fseSym, len(norm))}
	for u, s := range symbols {
		t.state[cumul[s]] = uint16(size + uint32(u))
		cumul[s]++
	}
	total := int32(0)
	for s, v := range norm {
		t.sym[s].extra = extra(s)
		switch v {
		case 0:
		case -1, 1:
			t.sym[s].deltaNbBits = uint32(log)<<16 - 1<<log
			t.sym[s].deltaFindState = total - 1
			total++
		default:
			maxBitsOut := uint32(log) - uint32(bits.Len32(uint32(v-1))-1)
			t.sym[s].deltaNbBits = maxBitsOut<<16 - uint32(v)<<maxBitsOut
			t.sym[s].deltaFindState = total - int32(v)
			total += int32(v)
		}
	}
	return t
}

// The predefined distributions of literal lengths, offsets and match
// lengths (RFC 8878, 3.1.1.3.2.2) and the extra bits of their codes.
var seqTables = sync.OnceValue(func() (t [3]*fseTable) {
	llExtra := [36]uint8{16: 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	mlExtra := [53]uint8{32: 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	t[0] = newFSETable([]int16{4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1,
		-1, -1, -1, -1}, 6, func(s int) uint8 { return llExtra[s] })
	t[1] = newFSETable([]int16{1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1},
		5, func(s int) uint8 { return uint8(s) })
	t[2] = newFSETable([]int16{1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1}, 6, func(s int) uint8 { return mlExtra[s] })
	return t
})

// mlTableLog is the accuracy of a block's match length table for present
// codes: the format's smallest (5), or more for many codes (at least two
// states a code; at most the format's 9), so that every code has one.
func mlTableLog(present int) uint8 {
	log := uint8(5)
	for 1<<log < 2*present && log < 9 {
		log++
	}
	return log
}

// normalizeCounts scales hist (counts of codes, total of them) to
// 1<<log, every present code at least 1, the rest given to or taken
// from the most frequent (1<<log is at least the present codes: there is
// always enough to take).
func normalizeCounts(hist []uint32, total uint32, log uint8) []int16 {
	norm := make([]int16, len(hist))
	size := int32(1) << log
	sum, top := int32(0), 0
	for s, c := range hist {
		if c == 0 {
			continue
		}
		norm[s] = int16(max(1, int32(uint64(c)*uint64(size)/uint64(total))))
		sum += int32(norm[s])
		if c > hist[top] {
			top = s
		}
	}
	norm[top] += int16(size - sum)
	for norm[top] < 1 { // more codes than the scale left the top one: take from others
		for s := range norm {
			if s != top && norm[s] > 1 && norm[top] < 1 {
				norm[s]--
				norm[top]++
			}
		}
	}
	// Trim the symbols after the last present one: the description ends
	// there.
	last := 0
	for s, v := range norm {
		if v != 0 {
			last = s
		}
	}
	return norm[:last+1]
}

// appendNCount appends the FSE table description of norm at accuracy log
// (RFC 8878, 4.1.1; zstd's FSE_writeNCount).
func appendNCount(dst []byte, norm []int16, log uint8) []byte {
	w := bitWriter{b: dst}
	w.add(uint64(log-5), 4)
	remaining := int32(1)<<log + 1
	threshold := int32(1) << log
	nbBits := uint32(log) + 1
	prev0 := false
	for s := 0; s < len(norm) && remaining > 1; {
		if prev0 {
			start := s
			for s < len(norm) && norm[s] == 0 {
				s++
			}
			for s >= start+24 {
				start += 24
				w.add(0xffff, 16)
				w.flush()
			}
			for s >= start+3 {
				start += 3
				w.add(3, 2)
			}
			w.add(uint64(s-start), 2)
			w.flush()
		}
		count := int32(norm[s])
		s++
		maxV := 2*threshold - 1 - remaining
		remaining -= max(count, -count)
		count++
		if count >= threshold {
			count += maxV
		}
		if count < maxV {
			w.add(uint64(count), nbBits-1)
		} else {
			w.add(uint64(count), nbBits)
		}
		w.flush()
		prev0 = count == 1
		for remaining < threshold {
			nbBits--
			threshold >>= 1
		}
	}
	w.flush()
	if w.n > 0 {
		w.b = append(w.b, byte(w.c))
	}
	return w.b
}

// llCode and mlCode are the codes of a literal length and of a match
// length less 3 (zstd's LL_Code and ML_Code).
func llCode(ll uint32) uint8 {
	if ll > 63 {
		return uint8(bits.Len32(ll)-1) + 19
	}
	switch {
	case ll < 16:
		return uint8(ll)
	case ll < 24:
		return 16 + uint8(ll-16)/2
	case ll < 32:
		return 20 + uint8(ll-24)/4
	case ll < 48:
		return 22 + uint8(ll-32)/8
	}
	return 24
}

func mlCode(mlBase uint32) uint8 {
	switch {
	case mlBase > 127:
		return uint8(bits.Len32(mlBase)-1) + 36
	case mlBase < 32:
		return uint8(mlBase)
	case mlBase < 40:
		return 32 + uint8(mlBase-32)/2
	case mlBase < 48:
		return 36 + uint8(mlBase-40)/4
	case mlBase < 64:
		return 38 + uint8(mlBase-48)/8
	case mlBase < 96:
		return 40 + uint8(mlBase-64)/16
	}
	return 42
}

// fseState is one FSE coder's state.
type fseState struct {
	t     *fseTable
	state uint16
}

func (s *fseState) init(t *fseTable, sym uint8) {
	tt := t.sym[sym]
	nb := (tt.deltaNbBits + 1<<15) >> 16
	im := int32(nb<<16 - tt.deltaNbBits)
	s.t, s.state = t, t.state[im>>nb+tt.deltaFindState]
}

func (s *fseState) encode(w *bitWriter, sym uint8) {
	tt := s.t.sym[sym]
	nb := (uint32(s.state) + tt.deltaNbBits) >> 16
	w.add(uint64(s.state), nb)
	s.state = s.t.state[int32(s.state>>nb)+tt.deltaFindState]
}

// bitWriter writes a zstd bitstream forward (the decoder reads it from
// its end).
type bitWriter struct {
	b []byte
	c uint64
	n uint32
}

// add appends the low n bits of v; at most 56 bits are held between
// flushes.
func (w *bitWriter) add(v uint64, n uint32) {
	w.c |= (v & (1<<n - 1)) << w.n
	w.n += n
}

func (w *bitWriter) flush() {
	for w.n >= 8 {
		w.b = append(w.b, byte(w.c))
		w.c >>= 8
		w.n -= 8
	}
}

// close ends the stream with its 1 marker bit.
func (w *bitWriter) close() {
	w.add(1, 1)
	w.flush()
	if w.n > 0 {
		w.b = append(w.b, byte(w.c))
	}
	w.c, w.n = 0, 0
}

// appendSequences appends the sequences section of seqs, all at offset 8:
// given as such (explicit) until the frame has a sequence at offset 8,
// repeat offset 1 after (every sequence has literals). A code that every
// sequence shares is coded as an RLE symbol (no state bits), the others
// in the predefined tables.
func appendSequences(dst []byte, seqs []runSeq, explicit bool) []byte {
	n := len(seqs)
	switch {
	case n < 128:
		dst = append(dst, byte(n))
	case n < 0x7f00:
		dst = append(dst, byte(n>>8)+0x80, byte(n))
	default:
		dst = append(dst, 0xff, byte(n-0x7f00), byte((n-0x7f00)>>8))
	}
	t := seqTables()
	ofb, ofc := uint32(1), uint8(0)
	if explicit {
		ofb, ofc = 8+3, 3
	}
	llc0, mlc0 := llCode(seqs[0].ll), mlCode(seqs[0].mlBase)
	llRLE, mlRLE := true, true
	var mlHist [53]uint32
	present := 0
	for _, s := range seqs {
		llRLE = llRLE && llCode(s.ll) == llc0
		mlc := mlCode(s.mlBase)
		mlRLE = mlRLE && mlc == mlc0
		if mlHist[mlc] == 0 {
			present++
		}
		mlHist[mlc]++
	}
	modes := byte(1<<4 | 2<<2) // offsets RLE, match lengths in a table of the block's own
	if llRLE {
		modes |= 1 << 6
	}
	if mlRLE {
		modes = modes&^(3<<2) | 1<<2
	}
	dst = append(dst, modes)
	if llRLE {
		dst = append(dst, llc0)
	}
	dst = append(dst, ofc)
	mlTable := t[2]
	if mlRLE {
		dst = append(dst, mlc0)
	} else {
		log := mlTableLog(present)
		norm := normalizeCounts(mlHist[:], uint32(n), log)
		dst = appendNCount(dst, norm, log)
		mlTable = newFSETable(norm, log, func(s int) uint8 { return t[2].sym[s].extra })
	}
	w := bitWriter{b: dst}
	var ll, ml fseState
	last := seqs[n-1]
	llc, mlc := llCode(last.ll), mlCode(last.mlBase)
	if !llRLE {
		ll.init(t[0], llc)
	}
	if !mlRLE {
		ml.init(mlTable, mlc)
	}
	w.add(uint64(last.ll), uint32(t[0].sym[llc].extra))
	w.add(uint64(last.mlBase), uint32(t[2].sym[mlc].extra))
	w.flush()
	w.add(uint64(ofb), uint32(ofc))
	for i := n - 2; i >= 0; i-- {
		s := seqs[i]
		llc, mlc := llCode(s.ll), mlCode(s.mlBase)
		w.flush()
		if !mlRLE {
			ml.encode(&w, mlc)
		}
		if !llRLE {
			ll.encode(&w, llc)
		}
		w.flush()
		w.add(uint64(s.ll), uint32(t[0].sym[llc].extra))
		w.add(uint64(s.mlBase), uint32(t[2].sym[mlc].extra))
		w.flush()
		w.add(uint64(ofb), uint32(ofc))
	}
	w.flush()
	if !mlRLE {
		w.add(uint64(ml.state), uint32(mlTable.log))
	}
	if !llRLE {
		w.add(uint64(ll.state), uint32(t[0].log))
	}
	w.close()
	return w.b
}

// appendRunsFrame appends body (8-byte values) compressed as a zstd frame
// of blocks of 16,384 values: a block with runs as literals and sequences,
// one without as the codec frames a literal segment, and a block that
// would not shrink raw. ends are the ends of body's runs of equal values
// (ascending value indexes, the last one len(body)/8) where the caller
// found them as it wrote body; nil scans body for them, a second pass over
// it.
func (pc *pageCodec) appendRunsFrame(dst, body []byte, ends []int32) ([]byte, error) {
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0xa0) // magic; single segment, 4-byte content size
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	if len(body) <= 8 {
		return appendRawBlock(dst, body, 1), nil
	}
	// The first value in a raw block of its own: every value after it has
	// one before it to match (see appendRunsBlock).
	dst = appendRawBlock(dst, body[:8], 0)
	explicit := true
	e := 0 // ends[e] is the first run end past the block's first value
	for b0 := 8; b0 < len(body); b0 += maxRawBlock {
		blk := body[b0:min(len(body), b0+maxRawBlock)]
		var runs []int32
		if ends == nil {
			runs = scanRuns(pc.runEnds[:0], blk)
		} else {
			// The page's runs cut at the block's bounds: the runs a scan
			// of the block finds (one continued from the block before
			// starts at its first value).
			v0, v1 := int32(b0/8), int32((b0+len(blk))/8)
			runs = pc.runEnds[:0]
			for ; e < len(ends) && ends[e] <= v0; e++ {
			}
			for ; e < len(ends) && ends[e] < v1; e++ {
				runs = append(runs, ends[e]-v0)
			}
			runs = append(runs, v1-v0)
		}
		pc.runEnds = runs
		var err error
		if dst, err = pc.appendRunsBlock(dst, blk, binary.LittleEndian.Uint64(body[b0-8:]), runs, &explicit, b0+len(blk) == len(body)); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// scanRuns appends to dst the end of each run of equal 8-byte values of
// blk (the index past its last value).
func scanRuns(dst []int32, blk []byte) []int32 {
	m := len(blk) / 8
	for i := 0; i < m; {
		v := binary.LittleEndian.Uint64(blk[8*i:])
		j := i + 1
		for j < m && binary.LittleEndian.Uint64(blk[8*j:]) == v {
			j++
		}
		dst = append(dst, int32(j))
		i = j
	}
	return dst
}

// appendRunsBlock appends one block of 8-byte values blk, prev the value
// before them. A run's first value v is written as literals up to its
// highest byte that differs from the value before it, p, and a match at
// offset 8 copies p's bytes above it (ids are far below 2^64: their high
// bytes are p's) and the rest of the run: zstd's match finder wrote the
// same. Where ids fit in 5 bytes, every run's literals are as long as the
// longest's (the other bytes are still p's): the sequences then share their
// literal length, coded as one RLE symbol. *explicit says the frame has no
// sequence yet (appendSequences).
func (pc *pageCodec) appendRunsBlock(dst, blk []byte, prev uint64, runs []int32, explicit *bool, last bool) ([]byte, error) {
	k := 1
	p := prev
	i := 0
	for _, j := range runs {
		v := binary.LittleEndian.Uint64(blk[8*i:])
		k = max(k, (bits.Len64(v^p)+7)/8)
		p = v
		i = int(j)
	}
	lits, seqs := pc.runLits[:0], pc.runSeqs[:0]
	pending := uint32(0)
	i = 0
	for _, j := range runs {
		// k <= 5: a run of one is a sequence too, of 8-k >= 3 bytes.
		if ml := 8 - k + 8*(int(j)-i-1); ml >= 3 {
			lits = append(lits, blk[8*i:8*i+k]...)
			seqs = append(seqs, runSeq{ll: pending + uint32(k), mlBase: uint32(ml - 3)})
			pending = 0
		} else {
			lits = append(lits, blk[8*i:8*i+8]...)
			pending += 8
		}
		i = int(j)
	}
	pc.runLits, pc.runSeqs = lits, seqs
	lastBit := uint32(0)
	if last {
		lastBit = 1
	}
	if len(seqs) == 0 {
		if len(blk) >= 1<<10 {
			return pc.appendLiteralsBlock(dst, blk, last)
		}
		return appendRawBlock(dst, blk, lastBit), nil
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0)
	dst = pc.appendLiteralsSection(dst, lits)
	dst = appendSequences(dst, seqs, *explicit)
	size := len(dst) - start - 3
	if size >= len(blk) {
		return appendRawBlock(dst[:start], blk, lastBit), nil
	}
	*explicit = false
	bh := uint32(size)<<3 | 2<<1 | lastBit // compressed block
	dst[start], dst[start+1], dst[start+2] = byte(bh), byte(bh>>8), byte(bh>>16)
	return dst, nil
}

// appendRawBlock appends b as a raw block.
func appendRawBlock(dst, b []byte, lastBit uint32) []byte {
	bh := uint32(len(b))<<3 | lastBit
	return append(append(dst, byte(bh), byte(bh>>8), byte(bh>>16)), b...)
}

// appendLiteralsSection appends the literals section of lit: Huffman-coded
// in four streams where that is smaller, else raw.
func (pc *pageCodec) appendLiteralsSection(dst, lit []byte) []byte {
	if len(lit) >= 1<<10 {
		start := len(dst)
		lhn := len(literalsHeader(len(lit), len(lit)))
		dst = append(dst, 0, 0, 0, 0, 0)[:start+lhn]
		out, ok := pc.lit.compress4X(dst, lit)
		if comp := len(out) - start - lhn; ok && comp+lhn < len(lit) {
			if lh := literalsHeader(comp, len(lit)); len(lh) == lhn {
				copy(out[start:], lh)
				return out
			}
		}
		dst = out[:start]
		// An alphabet beyond huffEncoder's (the bytes of ids): huff0's.
		if out, reused, err := huff0.Compress4X(lit, pc.huff); err == nil && !reused && len(out)+lhn < len(lit) {
			if lh := literalsHeader(len(out), len(lit)); len(lh) == lhn {
				return append(append(dst, lh...), out...)
			}
		}
	}
	n := uint32(len(lit))
	switch {
	case n < 32:
		dst = append(dst, byte(n<<3))
	case n < 1<<12:
		dst = append(dst, byte(1<<2|n<<4), byte(n>>4))
	default:
		dst = append(dst, byte(3<<2|n<<4), byte(n>>4), byte(n>>12))
	}
	return append(dst, lit...)
}
