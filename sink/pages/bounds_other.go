//go:build !amd64 || purego

package pages

// bounds32 is the smallest and largest of vals (not empty).
func bounds32(vals []uint32) (lo, hi uint32) { return bounds32Go(vals) }

// splitBounds32 writes the BYTE_STREAM_SPLIT of vals (four streams of
// len(vals) bytes) to s and returns their smallest and largest.
func splitBounds32(s []byte, vals []uint32) (lo, hi uint32) { return splitBounds32Go(s, vals) }

// split4 writes byte k of vals[i] to d[k][i] and returns the values'
// bounds (vals not empty).
func split4(d *[4][]byte, vals []uint32) (lo, hi uint32) {
	lo, hi = vals[0], vals[0]
	for i, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
		d[0][i], d[1][i], d[2][i], d[3][i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return lo, hi
}
