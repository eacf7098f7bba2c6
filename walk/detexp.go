package walk

import "math"

// DetExp is e^x computed with IEEE double additions, multiplications and
// divisions only, each rounded on its own (every product is converted
// with float64() so the compiler never fuses it into an FMA, which Go may
// do on arm64 or with GOAMD64=v3), so that kernels/temporal.cuh's
// det_exp, written with the _rn intrinsics, returns the same bits. math.Exp
// cannot be that twin: on amd64 it is assembly, elsewhere Go, and CUDA's
// exp() is neither. The algorithm is math's pure-Go exp (FreeBSD's
// e_exp.c): under 1 ulp from e^x, which is all the temporal bias needs;
// what matters is that both engines round the same way.
func DetExp(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		log2e = 1.44269504088896338700e+00

		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)

		p1 = 1.66666666666666657415e-01
		p2 = -2.77777777770155933842e-03
		p3 = 6.61375632143793436117e-05
		p4 = -1.65339022054652515390e-06
		p5 = 4.13813679705723846039e-08
	)
	switch {
	case x != x:
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int64
	if x < 0 {
		k = int64(float64(log2e*x) - 0.5)
	} else {
		k = int64(float64(log2e*x) + 0.5)
	}
	fk := float64(k)
	hi := x - float64(fk*ln2Hi)
	lo := float64(fk * ln2Lo)
	r := hi - lo
	t := float64(r * r)
	q := p4 + float64(t*p5)
	q = p3 + float64(t*q)
	q = p2 + float64(t*q)
	q = p1 + float64(t*q)
	c := r - float64(t*q)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return scale2(y, k)
}

// scale2 is y * 2^k for y in [0.5, 2] by exact power-of-two products (one
// rounding at most, where the result is subnormal): math.Ldexp's result,
// in operations the GPU has too.
func scale2(y float64, k int64) float64 {
	pow := func(e int64) float64 { return math.Float64frombits(uint64(e+1023) << 52) }
	switch {
	case k > 1023:
		return float64(float64(y*2) * pow(k-1))
	case k < -1021:
		return float64(float64(y*pow(k+64)) * pow(-64))
	}
	return float64(y * pow(k))
}
