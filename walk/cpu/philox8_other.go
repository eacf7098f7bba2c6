//go:build !amd64 || purego

package cpu

// philox8 computes Philox4x32-10 for the eight counters (lo[i], hi[i], c2,
// c3) under key (k0, k1): out[w][i] is word w of counter i.
func philox8(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32) {
	philox8Go(lo, hi, c2, c3, k0, k1, out)
}

// philox8Steps is philox8 with counter word c2 set per lane (c2[i]).
func philox8Steps(lo, hi, c2 *[8]uint32, c3, k0, k1 uint32, out *[4][8]uint32) {
	philox8StepsGo(lo, hi, c2, c3, k0, k1, out)
}
