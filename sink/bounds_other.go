//go:build !amd64 || purego

package sink

// bounds32 is the smallest and largest of vals (not empty).
func bounds32(vals []uint32) (lo, hi uint32) { return bounds32Go(vals) }
