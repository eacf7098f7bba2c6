package pages

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/huff0"
)

// appendLiteralsFrame appends a zstd frame holding b as blocks of
// Huffman-coded literals and no sequences (RFC 8878, 3.1.1.3): the zstd
// encoder's own entropy stage (huff0), without its match finder. For a
// byte stream of split ids (the top byte of a 22-bit id) the match finder
// found nothing and cost a quarter of the encoder's time (0.8 core-s of a
// scale-22 run on the 16-core host).
func (pc *pageCodec) appendLiteralsFrame(dst, b []byte) ([]byte, error) {
	const maxBlock = 128 << 10
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0xa0) // magic; single segment, 4-byte content size
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	// Blocks of equal size: none so small that four streams cannot hold it.
	blocks := (len(b) + maxBlock - 1) / maxBlock
	size := (len(b) + blocks - 1) / blocks
	for len(b) > 0 {
		n := min(size, len(b))
		var err error
		if dst, err = pc.appendLiteralsBlock(dst, b[:n], n == len(b)); err != nil {
			return nil, err
		}
		b = b[n:]
	}
	return dst, nil
}

// appendLiteralsBlock appends one block of lit (at least 1 KiB, at most
// 128 KiB): Huffman-coded in four streams, or raw or RLE where that is
// smaller, as the zstd encoder decides.
func (pc *pageCodec) appendLiteralsBlock(dst, lit []byte, last bool) ([]byte, error) {
	var lastBit uint32
	if last {
		lastBit = 1
	}
	// The coding goes straight after room for the two headers, not into
	// a buffer the block then copied (0.16 of 5.84 core-s of the scale-22
	// one-shot on the 16-core host). Any coding smaller than lit has the
	// literals header that lit's own size calls for.
	start := len(dst)
	lhn := len(literalsHeader(len(lit), len(lit)))
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)[:start+3+lhn]
	out, ok := pc.lit.compress4X(dst, lit)
	if comp := len(out) - start - 3 - lhn; ok && comp+lhn < len(lit) {
		if lh := literalsHeader(comp, len(lit)); len(lh) == lhn {
			bh := uint32(lhn+comp+1)<<3 | 2<<1 | lastBit // compressed block
			out[start], out[start+1], out[start+2] = byte(bh), byte(bh>>8), byte(bh>>16)
			copy(out[start+3:], lh)
			return append(out, 0), nil // no sequences
		}
	}
	dst = out[:start]
	// One symbol, an alphabet beyond huffEncoder's, or no gain: huff0
	// decides between its coding, RLE and raw.
	out, reused, err := huff0.Compress4X(lit, pc.huff)
	lh := literalsHeader(len(out), len(lit))
	switch {
	case reused:
		return nil, errors.New("huffman literals: a table was reused, this frame would not stand alone")
	case errors.Is(err, huff0.ErrUseRLE):
		bh := uint32(len(lit))<<3 | 1<<1 | lastBit
		return append(dst, byte(bh), byte(bh>>8), byte(bh>>16), lit[0]), nil
	case errors.Is(err, huff0.ErrIncompressible) || err == nil && len(out)+len(lh) >= len(lit):
		bh := uint32(len(lit))<<3 | lastBit
		return append(append(dst, byte(bh), byte(bh>>8), byte(bh>>16)), lit...), nil
	case err != nil:
		return nil, fmt.Errorf("huffman literals: %w", err)
	}
	return appendHuffmanBlock(dst, lh, out, lastBit), nil
}

// appendHuffmanBlock appends a compressed block of Huffman-coded literals
// (header lh, tree description and streams out) and no sequences.
func appendHuffmanBlock(dst, lh, out []byte, lastBit uint32) []byte {
	bh := uint32(len(lh)+len(out)+1)<<3 | 2<<1 | lastBit // compressed block
	dst = append(dst, byte(bh), byte(bh>>8), byte(bh>>16))
	dst = append(dst, lh...)
	dst = append(dst, out...)
	return append(dst, 0) // no sequences
}

// literalsHeader is the header of a Compressed_Literals_Block of four
// streams, comp bytes regenerating to regen: the shortest Size_Format that
// holds both sizes (10, 14 or 18 bits each).
func literalsHeader(comp, regen int) []byte {
	var h uint64
	var n int
	switch {
	case comp < 1<<10 && regen < 1<<10:
		h, n = 1<<2|uint64(regen)<<4|uint64(comp)<<14, 3
	case comp < 1<<14 && regen < 1<<14:
		h, n = 2<<2|uint64(regen)<<4|uint64(comp)<<18, 4
	default:
		h, n = 3<<2|uint64(regen)<<4|uint64(comp)<<22, 5
	}
	h |= 2 // Compressed_Literals_Block
	b := binary.LittleEndian.AppendUint64(nil, h)
	return b[:n]
}
