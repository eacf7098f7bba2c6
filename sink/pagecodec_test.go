package sink

import (
	"math"
	"math/rand/v2"
	"testing"
)

// segmentKind's entropy from its table gives the classification that
// computing each term's logarithm gives, on segments from constant to
// uniform bytes and near the thresholds.
func TestSegmentKindTableMatchesLog2(t *testing.T) {
	ref := func(b []byte) int {
		if len(b) > 0 && allSame(b) {
			return segRLE
		}
		if len(b) < 16<<10 {
			return segZstd
		}
		var hist [256]int
		step := len(b) / segmentSamples
		for i := range segmentSamples {
			hist[b[i*step]]++
		}
		h := 0.0
		for _, n := range hist {
			if n > 0 {
				p := float64(n) / segmentSamples
				h -= p * math.Log2(p)
			}
		}
		switch {
		case h > 7.8:
			return segRaw
		case h >= 3:
			return segLiterals
		}
		return segZstd
	}
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := map[int]int{}
	for i := range 400 {
		b := make([]byte, 16<<10+rng.IntN(200<<10))
		symbols := 1 + i%256 // alphabets from 1 to 256 symbols, uniform
		for j := range b {
			b[j] = byte(rng.IntN(symbols))
		}
		if got, want := segmentKind(b), ref(b); got != want {
			t.Fatalf("segment of %d bytes over %d symbols: kind %d, want %d", len(b), symbols, got, want)
		}
		kinds[segmentKind(b)]++
	}
	if len(kinds) < 3 {
		t.Fatalf("kinds seen %v: the cases miss a class", kinds)
	}
}
