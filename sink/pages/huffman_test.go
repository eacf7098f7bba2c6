package pages

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// huffCases are literal blocks of the alphabets and skews a page meets, and
// some it should not: uniform over 2 to 129 symbols, the top byte of
// R-MAT-like ids (geometric), counts in a Fibonacci series (whose Huffman
// code is deeper than 11 bits, so the lengths must be limited), a single
// symbol, and alphabets beyond the direct weights (huff0's then).
func huffCases() map[string][]byte {
	rng := rand.New(rand.NewPCG(7, 11))
	cases := map[string][]byte{}
	gen := func(name string, n int, sym func() byte) {
		b := make([]byte, n)
		for i := range b {
			b[i] = sym()
		}
		cases[fmt.Sprintf("%s/%d", name, n)] = b
	}
	for _, n := range []int{16, 17, 1000, 1023, 4097, 65536, 131071, 128 << 10} {
		gen("uniform2", n, func() byte { return byte(rng.IntN(2)) })
		gen("uniform64", n, func() byte { return byte(rng.IntN(64)) })
		gen("uniform129", n, func() byte { return byte(rng.IntN(129)) })
		gen("sparse", n, func() byte { return byte(rng.IntN(40)) * 3 })
		gen("geometric", n, func() byte { return byte(min(63, int(-math.Log2(1-rng.Float64())*6))) })
		gen("one", n, func() byte { return 42 })
		gen("uniform256", n, func() byte { return byte(rng.Uint32()) })
		gen("twovalues", n, func() byte {
			if rng.IntN(1000) == 0 {
				return 100
			}
			return 7
		})
	}
	// Fibonacci counts over 25 symbols: 1, 1, 2, 3, 5, ... (about 200 K
	// in all), shuffled, then cut to a block.
	var fib []byte
	a, b := 1, 1
	for s := range 25 {
		for range a {
			fib = append(fib, byte(s))
		}
		a, b = b, a+b
	}
	rng.Shuffle(len(fib), func(i, j int) { fib[i], fib[j] = fib[j], fib[i] })
	cases["fibonacci"] = fib[:128<<10]
	return cases
}

// Every block the encoder codes decodes, through a zstd decoder of another
// implementation, to its literals; blocks it declines are left to huff0,
// and a frame of them still decodes.
func TestHuffmanBlocksDecode(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	pc, err := newPageCodec(Zstd, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	coded := 0
	for name, lit := range huffCases() {
		var h huffEncoder
		out, ok := h.compress4X(nil, lit)
		if ok {
			coded++
			frame := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0}, byte(len(lit)), byte(len(lit)>>8), byte(len(lit)>>16), byte(len(lit)>>24))
			frame = appendHuffmanBlock(frame, literalsHeader(len(out), len(lit)), out, 1)
			got, err := dec.DecodeAll(frame, nil)
			if err != nil || !bytes.Equal(got, lit) {
				t.Fatalf("%s: decoded %d bytes (%v), equal %v", name, len(got), err, bytes.Equal(got, lit))
			}
		}
		frame, err := pc.appendLiteralsFrame(nil, lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := dec.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(got, lit) {
			t.Fatalf("%s: frame decoded %d bytes (%v)", name, len(got), err)
		}
	}
	if coded < 30 {
		t.Fatalf("only %d blocks coded by huffEncoder", coded)
	}
}

// The codes are as short as huff0's: within 0.5% plus the description's
// bytes on every block both code, and their lengths at most 11 bits with a
// Kraft sum of exactly 1.
func TestHuffmanSizeMatchesHuff0(t *testing.T) {
	for name, lit := range huffCases() {
		var h huffEncoder
		out, ok := h.compress4X(nil, lit)
		if !ok {
			continue
		}
		maxLen, kraft := 0, 0.0
		for s := range 256 {
			if l := h.lens[s]; l > 0 && h.count[0][s] > 0 {
				maxLen = max(maxLen, int(l))
				kraft += math.Ldexp(1, -int(l))
			}
		}
		if maxLen > huffMaxBits || kraft != 1 {
			t.Fatalf("%s: longest code %d bits, Kraft sum %v", name, maxLen, kraft)
		}
		ref, _, err := huff0.Compress4X(lit, &huff0.Scratch{Reuse: huff0.ReusePolicyNone})
		if err != nil {
			continue // huff0 would store it raw or as RLE
		}
		if float64(len(out)) > float64(len(ref))*1.005+70 {
			t.Fatalf("%s: %d bytes, huff0 %d", name, len(out), len(ref))
		}
		if name == "fibonacci" && maxLen != huffMaxBits {
			t.Fatalf("fibonacci: longest code %d bits, want the limit %d", maxLen, huffMaxBits)
		}
	}
}

// The same block gives the same bytes, whatever the encoder coded before.
func TestHuffmanDeterministic(t *testing.T) {
	cases := huffCases()
	var used huffEncoder
	for _, lit := range cases {
		used.compress4X(nil, lit)
	}
	for name, lit := range cases {
		var fresh huffEncoder
		a, okA := fresh.compress4X(nil, lit)
		b, okB := used.compress4X(nil, lit)
		if okA != okB || !bytes.Equal(a, b) {
			t.Fatalf("%s: a used encoder wrote other bytes", name)
		}
	}
}

func BenchmarkHuffman(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	lit := make([]byte, 128<<10)
	for i := range lit {
		lit[i] = byte(min(63, int(-math.Log2(1-rng.Float64())*6)))
	}
	b.Run("huffEncoder", func(b *testing.B) {
		var h huffEncoder
		var out []byte
		b.SetBytes(int64(len(lit)))
		for range b.N {
			out, _ = h.compress4X(out[:0], lit)
		}
	})
	b.Run("huff0", func(b *testing.B) {
		s := &huff0.Scratch{Reuse: huff0.ReusePolicyNone}
		b.SetBytes(int64(len(lit)))
		for range b.N {
			huff0.Compress4X(lit, s)
		}
	})
}

// The assembly main loop (huffStreamBMI2) writes the bytes of the Go loop.
func TestHuffmanStreamsBMI2MatchGo(t *testing.T) {
	if !hasHuffBMI2 {
		t.Skip("no BMI2 here: streams4 runs its Go loop only")
	}
	for name, lit := range huffCases() {
		var asm, gol huffEncoder
		gol.goLoop = true
		a, okA := asm.compress4X(nil, lit)
		g, okG := gol.compress4X(nil, lit)
		if okA != okG || !bytes.Equal(a, g) {
			t.Fatalf("%s: the BMI2 loop wrote %d bytes, the Go loop %d, equal %v", name, len(a), len(g), bytes.Equal(a, g))
		}
	}
}
