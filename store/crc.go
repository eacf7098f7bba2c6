package store

import "hash/crc32"

// castagnoliReflected is the CRC32C polynomial, bit-reversed, as
// hash/crc32 and the combination below use it.
const castagnoliReflected = 0x82f63b78

// CRC32CCombine returns the CRC32C of a‖b from crcA, that of a, crcB, that
// of b, and b's length: crcA times x^(8·lenB), modulo the polynomial, plus
// crcB (the construction zlib's crc32_combine uses). It costs some 32
// carry-less steps per set bit of lenB, not a pass over b.
func CRC32CCombine(crcA, crcB uint32, lenB int64) uint32 {
	return multModP(x8nModP(lenB), crcA) ^ crcB
}

// multModP multiplies a and b, polynomials over GF(2) in the reflected
// representation, modulo the CRC32C polynomial; a must not be zero.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
}

// x2nModP[k] is x^(2^k) modulo the CRC32C polynomial. Read only.
var x2nModP = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// x8nModP is x^(8n) modulo the CRC32C polynomial: n zero bytes' effect.
func x8nModP(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = multModP(x2nModP[k&31], p)
		}
		n >>= 1
	}
	return p
}

// CRC32CUpdate adds b to a running CRC32C.
func CRC32CUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
