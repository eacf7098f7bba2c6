package sink

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
