//go:build !amd64 || purego

package pages

const hasDBPAVX2 = false

func dbpPlanAVX2(x *uint32) (mn, mx0, mx1, mx2, mx3 int32) { panic("pages: no AVX2") }

func dbpPackAVX2(dst *byte, x *uint32, base int32, widths uint32, tabs *[33]dbpTab) {
	panic("pages: no AVX2")
}
