//go:build !purego

package pages

// split4AVX2 writes byte k of each of src's values to dk[i] and returns
// their smallest and largest; len(src) is a positive multiple of 32 and
// each dk has room for len(src) bytes.
//
//go:noescape
func split4AVX2(d0, d1, d2, d3 *byte, src []uint32) (lo, hi uint32)

// split4 is split4AVX2 wherever the CPU has AVX2, else scalar: byte k of
// vals[i] to d[k][i]; it returns the values' bounds (vals not empty).
func split4(d *[4][]byte, vals []uint32) (lo, hi uint32) {
	n := len(vals)
	_, _, _, _ = d[0][n-1], d[1][n-1], d[2][n-1], d[3][n-1]
	m := 0
	if hasBounds32AVX2 && n >= 32 {
		m = n &^ 31
		lo, hi = split4AVX2(&d[0][0], &d[1][0], &d[2][0], &d[3][0], vals[:m])
	} else {
		lo, hi = vals[0], vals[0]
	}
	for i := m; i < n; i++ {
		v := vals[i]
		lo, hi = min(lo, v), max(hi, v)
		d[0][i], d[1][i], d[2][i], d[3][i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return lo, hi
}

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
	return split4(&[4][]byte{s[:n], s[n : 2*n], s[2*n : 3*n], s[3*n : 4*n]}, vals)
}
