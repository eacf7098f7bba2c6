//go:build !purego

package sink

import "unsafe"

// split4AVX2 writes byte k of each of src's values to dst[k*stride+i] and
// returns their smallest and largest; len(src) is a positive multiple of
// 32 and dst holds 3*stride+len(src) bytes.
//
//go:noescape
func split4AVX2(dst *byte, stride int, src []uint32) (lo, hi uint32)

// splitBounds32 writes the BYTE_STREAM_SPLIT of vals (four streams of
// len(vals) bytes) to s and returns their smallest and largest (vals not
// empty). One AVX2 pass over the values: the bounds and parquet-go's
// splitter were two, 0.48 and 0.79 core-s of a scale-22 one-shot's 7.7
// on the 16-core host.
func splitBounds32(s []byte, vals []uint32) (lo, hi uint32) {
	n := len(vals)
	if !hasBounds32AVX2 || n < 64 {
		return splitBounds32Go(s, vals)
	}
	_ = s[4*n-1]
	m := n &^ 31
	lo, hi = split4AVX2(unsafe.SliceData(s), n, vals[:m])
	for i := m; i < n; i++ {
		v := vals[i]
		lo, hi = min(lo, v), max(hi, v)
		s[i], s[n+i], s[2*n+i], s[3*n+i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return lo, hi
}
