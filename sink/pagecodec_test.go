package sink

import (
	"math"
	"math/rand/v2"
	"testing"
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
