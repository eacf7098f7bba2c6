//go:build !amd64 || purego

package walk

// philox8 computes Philox4x32-10 for the eight counters (lo[i], hi[i], c2,
// c3) under key (k0, k1): out[w][i] is word w of counter i.
func philox8(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32) {
	philox8Go(lo, hi, c2, c3, k0, k1, out)
}
