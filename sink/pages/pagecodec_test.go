package pages

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The sample's entropy from the table is the entropy computed term by term
// with logarithms, exactly, on segments from constant to uniform bytes, so
// segmentKind classifies as it did with them.
func TestSegmentKindTableMatchesLog2(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := map[int]int{}
	for i := range 400 {
		b := make([]byte, 16<<10+rng.IntN(200<<10))
		symbols := 1 + i%256 // alphabets from 1 to 256 symbols, uniform
		for j := range b {
			b[j] = byte(rng.IntN(symbols))
		}
		hist := segmentSample(b)
		want := 0.0
		for _, n := range hist {
			if n > 0 {
				p := float64(n) / segmentSamples
				want -= p * math.Log2(p)
			}
		}
		if got := sampledEntropy(hist); got != want {
			t.Fatalf("segment of %d bytes over %d symbols: entropy %v, want %v", len(b), symbols, got, want)
		}
		kinds[segmentKind(b)]++
	}
	if len(kinds) < 3 {
		t.Fatalf("kinds seen %v: the cases miss a class", kinds)
	}
}

// The zstd framing: segments of one byte become RLE frames, uniform ones
// raw frames, the rest encoder frames, and the concatenation decodes to the
// body whatever the mix.
func TestPageCodecFrames(t *testing.T) {
	pc, err := newPageCodec(Zstd, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	r := rand.New(rand.NewPCG(7, 8))
	seg := func(n int, gen func() byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = gen()
		}
		return b
	}
	uniform := func() byte { return byte(r.Uint32()) }
	sixBits := func() byte { return byte(r.Uint32() & 63) }
	zero := func() byte { return 0 }
	one := func() byte { return 1 }
	// About 4.6 bits: Huffman-coded literals, no match finder.
	skewed := func() byte { return byte(min(r.ExpFloat64()*8, 255)) }
	// Under 3 bits: the zstd encoder.
	rare := func() byte { return byte(min(r.ExpFloat64()/2, 255)) }
	for _, tc := range []struct {
		name  string
		parts [][]byte
	}{
		{"split ids", [][]byte{seg(300, sixBits), seg(200<<10, uniform), seg(200<<10, uniform), seg(200<<10, sixBits), seg(200<<10, zero), seg(200<<10, zero)}},
		{"different constants", [][]byte{seg(150<<10, zero), seg(150<<10, one), seg(10, zero)}},
		{"small", [][]byte{seg(5, uniform), seg(0, zero), seg(1, one)}},
		{"one big raw", [][]byte{seg(1<<20, uniform)}},
		{"literals in blocks", [][]byte{seg(300<<10, skewed), seg(40<<10, skewed), seg(20<<10, rare)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			segs := []int{0}
			for _, p := range tc.parts {
				body = append(body, p...)
				segs = append(segs, len(body))
			}
			comp, err := pc.encode(nil, body, segs, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.DecodeAll(comp, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("decoded %d bytes differ from the %d-byte body", len(got), len(body))
			}
			// Trailing zero segments left implicit: the same frames.
			k := len(segs) - 1
			for k > 0 && segs[k] > segs[k-1] && !slices.ContainsFunc(body[segs[k-1]:segs[k]], func(b byte) bool { return b != 0 }) {
				k--
			}
			// Some or all of them: a written zero segment and the implicit
			// ones make one frame.
			for z := k; z < len(segs)-1; z++ {
				implicit, err := pc.encode(nil, body[:segs[z]], segs[:z+1], len(body)-segs[z])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(implicit, comp) {
					t.Fatalf("%d trailing zero bytes left implicit: %d bytes of frames, want the %d written out", len(body)-segs[z], len(implicit), len(comp))
				}
			}
		})
	}
}
