//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// hasPhilox8 says whether philox8 runs the AVX2 version.
var hasPhilox8 = cpu.X86.HasAVX2

//go:noescape
func philox8AVX2(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32)

// philox8 computes Philox4x32-10 for the eight counters (lo[i], hi[i], c2,
// c3) under key (k0, k1): out[w][i] is word w of counter i. The words are
// exactly philox's.
func philox8(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32) {
	if hasPhilox8 {
		philox8AVX2(lo, hi, c2, c3, k0, k1, out)
		return
	}
	philox8Go(lo, hi, c2, c3, k0, k1, out)
}

//go:noescape
func philox8StepsAVX2(lo, hi, c2 *[8]uint32, c3, k0, k1 uint32, out *[4][8]uint32)

// philox8Steps is philox8 with counter word c2 set per lane (c2[i]).
func philox8Steps(lo, hi, c2 *[8]uint32, c3, k0, k1 uint32, out *[4][8]uint32) {
	if hasPhilox8 {
		philox8StepsAVX2(lo, hi, c2, c3, k0, k1, out)
		return
	}
	philox8StepsGo(lo, hi, c2, c3, k0, k1, out)
}
