package pages

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bounds32 (AVX2 where the CPU has it) agrees with the scalar chains for
// every length around its blocks of 32, with the extremes anywhere,
// values above 2^31 included (the comparison is unsigned).
func TestBounds32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 1; n <= 300; n++ {
		for _, span := range []uint32{1 << 22, math.MaxUint32} {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = r.Uint32N(span)
			}
			for _, at := range []int{0, n / 2, n - 1} { // extremes first, middle, last (the tail)
				w := append([]uint32(nil), vals...)
				w[at] = 0
				w[(at+1)%n] = span
				if n == 1 {
					w[0] = span / 3
				}
				lo, hi := bounds32(w)
				wlo, whi := bounds32Go(w)
				if lo != wlo || hi != whi {
					t.Fatalf("n %d, extremes at %d, span %d: %d..%d, want %d..%d", n, at, span, lo, hi, wlo, whi)
				}
			}
		}
	}
}

func BenchmarkBounds32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]uint32, pageValues)
	for i := range vals {
		vals[i] = r.Uint32N(1 << 22)
	}
	for _, c := range []struct {
		name string
		f    func([]uint32) (uint32, uint32)
	}{{"bounds32", bounds32}, {"scalar", bounds32Go}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f(vals)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
		})
	}
}

// splitBounds32 (one AVX2 pass where the CPU has it) writes parquet-go's
// BYTE_STREAM_SPLIT bytes and the bounds of the scalar chains, for every
// length around its blocks of 32, extremes anywhere, values of all four
// bytes (unsigned comparison above 2^31), and no byte of the buffer
// beyond the four streams touched.
func TestSplitBounds32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= 300; n++ {
		for _, span := range []uint32{1 << 22, math.MaxUint32} {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = r.Uint32N(span)
			}
			vals[r.IntN(n)] = span
			vals[r.IntN(n)] = 0
			want := make([]byte, 4*n)
			for i, v := range vals {
				want[i], want[n+i], want[2*n+i], want[3*n+i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			got := make([]byte, 4*n+64)
			for i := range got {
				got[i] = 0xa5
			}
			lo, hi := splitBounds32(got, vals)
			wlo, whi := bounds32Go(vals)
			if lo != wlo || hi != whi {
				t.Fatalf("n %d span %d: bounds %d..%d, want %d..%d", n, span, lo, hi, wlo, whi)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n %d span %d: stream %d byte %d is %#x, want %#x", n, span, i/n, i%n, got[i], want[i])
				}
			}
			for i, b := range got[4*n:] {
				if b != 0xa5 {
					t.Fatalf("n %d: byte %d past the streams written", n, 4*n+i)
				}
			}
			g2 := make([]byte, 4*n)
			if lo2, hi2 := splitBounds32Go(g2, vals); lo2 != wlo || hi2 != whi || string(g2) != string(want) {
				t.Fatalf("n %d: the two-pass version differs", n)
			}
		}
	}
}

func BenchmarkSplitBounds32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]uint32, pageValues)
	for i := range vals {
		vals[i] = r.Uint32N(1 << 22)
	}
	s := make([]byte, 4*len(vals))
	for _, c := range []struct {
		name string
		f    func([]byte, []uint32) (uint32, uint32)
	}{{"fused", splitBounds32}, {"two-pass", splitBounds32Go}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f(s, vals)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
		})
	}
}
