package walk

import (
	"math"
	"math/rand/v2"
	"testing"
)

// DetExp must be e^x within two ulps of math.Exp (each is within about an
// ulp of e^x; amd64's math.Exp is assembly of its own) (it replaces math.Exp in the temporal
// bias) over the range the bias uses, x <= 0, and the special cases.
func TestDetExpNearMathExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	check := func(x float64) {
		t.Helper()
		got, want := DetExp(x), math.Exp(x)
		if got == want {
			return
		}
		if math.IsNaN(want) && math.IsNaN(got) {
			return
		}
		// Near zero the ulp is the smallest subnormal: arm64's math.Exp
		// underflows e^-745.1 (about 5.1e-324) to 0, DetExp rounds it to
		// 5e-324, one ulp apart.
		ulp := 2 * (math.Nextafter(want, math.Inf(1)) - want)
		if math.Abs(got-want) > ulp {
			t.Fatalf("DetExp(%v) = %v, math.Exp %v (more than two ulps apart)", x, got, want)
		}
	}
	for _, x := range []float64{0, -0.0, 1e-300, -1e-9, -0.5, -1, -2, -20, -700, -708.39, -709, -720, -744.4, -745.1, -745.2, -800,
		math.Inf(-1), 1, 2, 700, 709.7, 710, math.Inf(1), math.NaN()} {
		check(x)
	}
	for range 200000 {
		check(-rng.Float64() * 50)
		check(-rng.ExpFloat64() * 100)
		check((rng.Float64() - 0.5) * 1490)
	}
}
