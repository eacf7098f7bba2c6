//go:build !amd64 || purego

package cpu

// philox64 computes Philox4x32-10 for the 64 counters (lo[i], hi[i], c2[i],
// c3) under key (k0, k1): out[w][i] is word w of counter i.
func philox64(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32) {
	philox64By8(lo, hi, c2, c3, k0, k1, out)
}
