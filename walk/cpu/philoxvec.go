package cpu

import "github.com/walkstage/walkstage/walk"

// philox8Go is philox8 without vector instructions.
func philox8Go(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32) {
	for i := range lo {
		out[0][i], out[1][i], out[2][i], out[3][i] = walk.Philox(lo[i], hi[i], c2, c3, k0, k1)
	}
}

// philox8StepsGo is philox8Steps without vector instructions.
func philox8StepsGo(lo, hi, c2 *[8]uint32, c3, k0, k1 uint32, out *[4][8]uint32) {
	for i := range lo {
		out[0][i], out[1][i], out[2][i], out[3][i] = walk.Philox(lo[i], hi[i], c2[i], c3, k0, k1)
	}
}

// philox64By8 is philox64 as eight philox8Steps calls.
func philox64By8(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32) {
	var w [4][8]uint32
	for b := 0; b < 64; b += 8 {
		philox8Steps((*[8]uint32)(lo[b:]), (*[8]uint32)(hi[b:]), (*[8]uint32)(c2[b:]), c3, k0, k1, &w)
		for i := range w {
			copy(out[i][b:b+8], w[i][:])
		}
	}
}
