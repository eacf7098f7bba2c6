package walk

import (
	"testing"
)

// Known-answer vectors from the Random123 distribution (kat_vectors,
// philox4x32_10).
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

func TestPhiloxUnrolledMatches(t *testing.T) {
	for i := uint32(0); i < 1000; i++ {
		c := [4]uint32{i * 7919, i ^ 0xdeadbeef, i * 31, i >> 3}
		k := [2]uint32{i * 104729, ^i}
		a, b, cc, d := Philox(c[0], c[1], c[2], c[3], k[0], k[1])
		if want := philox4x32(c, k); [4]uint32{a, b, cc, d} != want {
			t.Fatalf("Philox(%v,%v) = %08x, want %08x", c, k, [4]uint32{a, b, cc, d}, want)
		}
	}
}
