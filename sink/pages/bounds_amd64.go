//go:build !purego

package pages

import "golang.org/x/sys/cpu"

// hasBounds32AVX2 says whether bounds32 runs the AVX2 version.
var hasBounds32AVX2 = cpu.X86.HasAVX2

// bounds32AVX2 is the smallest and largest of vals, whose length is a
// positive multiple of 32: eight lanes in each of four min and four max
// registers.
//
//go:noescape
func bounds32AVX2(vals []uint32) (lo, hi uint32)

// bounds32 is the smallest and largest of vals (not empty). The page
// bounds were 8% of the GPU stage's CPU with bounds32Go, four scalar
// chains (profile of a backlog on the 16-core H100 host).
func bounds32(vals []uint32) (lo, hi uint32) {
	if !hasBounds32AVX2 || len(vals) < 64 {
		return bounds32Go(vals)
	}
	n := len(vals) &^ 31
	lo, hi = bounds32AVX2(vals[:n])
	for _, v := range vals[n:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}
