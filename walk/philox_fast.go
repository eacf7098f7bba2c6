package walk

// Philox is Philox4x32 unrolled for the hot loops (philox4x32 is the
// readable form; a test keeps the two equal).
func Philox(c0, c1, c2, c3, k0, k1 uint32) (uint32, uint32, uint32, uint32) {
	var p0, p1 uint64
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0 += philoxW0
	k1 += philoxW1
	p0 = uint64(philoxM0) * uint64(c0)
	p1 = uint64(philoxM1) * uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	return c0, c1, c2, c3
}
