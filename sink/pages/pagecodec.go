package pages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// pageCodec compresses page bodies.
type pageCodec struct {
	kind  Compression
	level zstd.EncoderLevel
	zstd  *zstd.Encoder
	huff  *huff0.Scratch // literal-only frames (appendLiteralsFrame) that lit does not code
	lit   *huffEncoder   // literal-only frames of up to 129 symbols
	kinds []int
	// appendRunsFrame's literals and sequences of a block.
	runLits []byte
	runSeqs []runSeq
	runEnds []int32
}

func newPageCodec(c Compression, level zstd.EncoderLevel) (*pageCodec, error) {
	pc := &pageCodec{kind: c, level: level}
	if c == Zstd {
		// All-literal entropy coding: byte-stream-split values have no
		// matches but skewed bytes (the high byte of a 22-bit id takes 64
		// values); without it the encoder stores such blocks raw.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1),
			zstd.WithAllLitEntropyCompression(true), zstd.WithZeroFrames(true),
			// Pages need no frame checksum (its xxhash was 8% of the
			// encoding time); the manifest has a CRC32C of each part.
			zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, err
		}
		pc.zstd = enc
		pc.huff = &huff0.Scratch{Reuse: huff0.ReusePolicyNone} // a table in every block: frames stand alone
		pc.lit = &huffEncoder{}
	}
	return pc, nil
}

func (pc *pageCodec) codec() format.CompressionCodec {
	switch pc.kind {
	case Zstd:
		return format.Zstd
	case Snappy:
		return format.Snappy
	}
	return format.Uncompressed
}

// encode appends body, followed by zeros zero bytes, compressed, to dst
// (whatever the codec).
// segs are the boundaries of the body's segments (levels, values or byte
// streams), which zstd frames one by one: a constant segment becomes an
// RLE block, a segment whose bytes are close to uniform (the random low
// bytes of ids) raw blocks, a large one of skewed bytes Huffman-coded
// literals, and only the others go through the zstd encoder. A page is
// then several zstd frames one after the other, which the format allows
// and every decoder reads as one stream. The encoder alone spent half the
// sink's time on this data: matching zero streams and Huffman-coding
// random bytes only to store them raw. The zeros (byte streams no value
// reaches) are a constant segment that is never written out: only zstd
// takes them (the other codecs need the body whole).
func (pc *pageCodec) encode(dst, body []byte, segs []int, zeros int) ([]byte, error) {
	if zeros > 0 && pc.kind != Zstd {
		return nil, errors.New("pages: implicit zero bytes need zstd")
	}
	switch pc.kind {
	case Snappy:
		// Snappy writes from the start of the slice it is given, and only
		// there if its length holds the worst case (32 + n + n/6): give
		// it dst's spare capacity, grown to that.
		dst = slices.Grow(dst, 32+len(body)+len(body)/6)
		tail := dst[len(dst):cap(dst)]
		out, err := parquet.Snappy.Encode(tail, body)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && &out[0] == &tail[0] {
			return dst[:len(dst)+len(out)], nil
		}
		return append(dst, out...), nil
	case None:
		return append(dst, body...), nil
	}
	kinds := pc.kinds[:0]
	for i := 0; i+1 < len(segs); i++ {
		kinds = append(kinds, segmentKind(body[segs[i]:segs[i+1]]))
	}
	real := len(kinds)
	if zeros > 0 {
		kinds = append(kinds, segRLE) // [len(body), len(body)+zeros)
	}
	pc.kinds = kinds
	first := func(i int) byte { // a constant segment's byte
		if i == real {
			return 0
		}
		return body[segs[i]]
	}
	for i := 0; i < len(kinds); {
		kind := kinds[i]
		j := i + 1
		// Literal segments keep a Huffman table each.
		for j < len(kinds) && kinds[j] == kind && kind != segLiterals && (kind != segRLE || first(j) == first(i)) {
			j++
		}
		from := segs[i]
		if i == real {
			from = len(body)
		}
		if kind == segRLE {
			to := len(body) + zeros
			if j <= real {
				to = segs[j]
			}
			if to > from {
				dst = appendFrame(dst, nil, first(i), to-from)
			}
			i = j
			continue
		}
		seg := body[from:segs[j]] // the zeros are RLE: j <= real here
		i = j
		switch {
		case len(seg) == 0:
		case kind == segRaw:
			dst = appendFrame(dst, seg, 0, len(seg))
		case kind == segLiterals:
			var err error
			if dst, err = pc.appendLiteralsFrame(dst, seg); err != nil {
				return nil, err
			}
		default:
			dst = pc.zstd.EncodeAll(seg, dst)
		}
	}
	return dst, nil
}

const (
	segZstd = iota
	segRLE
	segRaw
	segLiterals
)

// sampleEntropy[n] is p*log2(p) for p = n/segmentSamples, the term of a byte seen n
// times in segmentKind's sample: a lookup instead of 256 logarithms per
// segment (1% of the stage's CPU), with the same values summed in the same
// order. Read only.
var sampleEntropy = func() (t [segmentSamples + 1]float64) {
	for n := 1; n <= segmentSamples; n++ {
		p := float64(n) / segmentSamples
		t[n] = p * math.Log2(p)
	}
	return t
}()

// segmentSamples is how many bytes segmentKind samples.
const segmentSamples = 4096

// segmentSample counts the bytes of segmentKind's sample of b: segmentSamples
// bytes evenly spaced.
func segmentSample(b []byte) (hist [256]int) {
	step := len(b) / segmentSamples
	for i := range segmentSamples {
		hist[b[i*step]]++
	}
	return hist
}

// sampledEntropy is the entropy in bits of a byte of the sample hist counts.
func sampledEntropy(hist [256]int) float64 {
	h := 0.0
	for _, n := range hist {
		if n > 0 {
			h -= sampleEntropy[n]
		}
	}
	return h
}

// segmentKind classifies a segment for encode. Raw needs a large segment
// whose sampled bytes have an entropy above 7.8 bits: entropy coding would
// save under 2.5%. Literals need a large segment of at least 3 bits: below
// that, runs and repeats (which only the match finder sees) may be what
// compresses it.
func segmentKind(b []byte) int {
	if len(b) > 0 && allSame(b) {
		return segRLE
	}
	if len(b) < 16<<10 {
		return segZstd
	}
	return kindOfEntropy(sampledEntropy(segmentSample(b)))
}

// kindOfEntropy is segmentKind for a large segment whose sample has an
// entropy of h bits a byte.
func kindOfEntropy(h float64) int {
	// A sample of 4096 uniform bytes reads about 7.95 bits.
	switch {
	case h > 7.8:
		return segRaw
	case h >= 3:
		return segLiterals
	}
	return segZstd
}

// allSame reports whether every byte of b equals the first: b equals
// itself shifted by one (a vectorised compare; a byte loop over the zero
// streams was 15% of the sink's time on 16 cores).
func allSame(b []byte) bool {
	if b[0] != b[len(b)-1] {
		return false
	}
	return bytes.Equal(b[1:], b[:len(b)-1])
}

// maxRawBlock is the largest zstd block (RFC 8878: 128 KiB).
const maxRawBlock = 128 << 10

// appendRawFrame appends the headers of a zstd frame of n bytes stored in
// raw blocks, as appendFrame(dst, raw, 0, n) writes them, and room for the
// bytes: block b's bytes [b*maxRawBlock, ...) of the n start at
// start+3*(b+1)+b*maxRawBlock.
func appendRawFrame(dst []byte, n int) (_ []byte, start int) {
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0xa0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	start = len(dst)
	nb := (n + maxRawBlock - 1) / maxRawBlock
	dst = slices.Grow(dst, n+3*nb)[:start+n+3*nb]
	for b := range nb {
		m := min(maxRawBlock, n-b*maxRawBlock)
		h := uint32(m) << 3
		if b == nb-1 {
			h |= 1
		}
		p := start + b*(maxRawBlock+3)
		dst[p], dst[p+1], dst[p+2] = byte(h), byte(h>>8), byte(h>>16)
	}
	return dst, start
}

// appendFrame appends a zstd frame of n bytes: raw's as raw blocks, or,
// when raw is nil, RLE blocks of the byte rle (RFC 8878: a single-segment
// frame with a 4-byte content size, blocks of at most 128 KiB).
func appendFrame(dst, raw []byte, rle byte, n int) []byte {
	const maxBlock = maxRawBlock
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0xa0) // magic; single segment, 4-byte content size
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	for n > 0 {
		m := min(n, maxBlock)
		last := uint32(0)
		if m == n {
			last = 1
		}
		typ := uint32(0) // raw
		if raw == nil {
			typ = 1
		}
		h := uint32(m)<<3 | typ<<1 | last
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		if raw == nil {
			dst = append(dst, rle)
		} else {
			dst = append(dst, raw[:m]...)
			raw = raw[m:]
		}
		n -= m
	}
	return dst
}
