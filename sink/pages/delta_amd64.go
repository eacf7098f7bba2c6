//go:build !purego

package pages

// hasDBPAVX2 says whether appendDeltaUint32 packs full blocks with AVX2.
var hasDBPAVX2 = hasBounds32AVX2

// dbpPlanAVX2 returns the smallest of the 128 deltas of the 129 values
// at x (all below 2^31) and the largest of each miniblock's 32.
//
//go:noescape
func dbpPlanAVX2(x *uint32) (mn, mx0, mx1, mx2, mx3 int32)

// dbpPackAVX2 packs the 128 deltas of the 129 values at x, less base, at
// the widths of widths' four bytes (miniblock m's in byte m), from dst
// on; it writes up to 32 bytes past the last miniblock.
//
//go:noescape
func dbpPackAVX2(dst *byte, x *uint32, base int32, widths uint32, tabs *[33]dbpTab)
