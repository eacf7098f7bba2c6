//go:build !amd64 || purego

package sink

// bounds32 is the smallest and largest of vals (not empty).
func bounds32(vals []uint32) (lo, hi uint32) { return bounds32Go(vals) }

// splitBounds32 writes the BYTE_STREAM_SPLIT of vals (four streams of
// len(vals) bytes) to s and returns their smallest and largest.
func splitBounds32(s []byte, vals []uint32) (lo, hi uint32) { return splitBounds32Go(s, vals) }
