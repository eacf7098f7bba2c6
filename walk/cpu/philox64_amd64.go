//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// hasPhilox64 says whether philox64 runs the AVX-512 version.
var hasPhilox64 = cpu.X86.HasAVX512F

//go:noescape
func philox64AVX512(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32)

// philox64 computes Philox4x32-10 for the 64 counters (lo[i], hi[i], c2[i],
// c3) under key (k0, k1): out[w][i] is word w of counter i, exactly
// philox's.
func philox64(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32) {
	if hasPhilox64 {
		philox64AVX512(lo, hi, c2, c3, k0, k1, out)
		return
	}
	philox64By8(lo, hi, c2, c3, k0, k1, out)
}
