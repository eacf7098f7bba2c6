package store

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The combination of two sections' CRC32Cs is the CRC32C of the two
// together, for empty, short and long sections at any cut, and differs
// when either sum is wrong.
func TestCRC32CCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 1<<20+77)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	cuts := []int{0, 1, 7, 8, 63, 4096, 1 << 19, len(data) - 1, len(data)}
	for range 40 {
		cuts = append(cuts, r.IntN(len(data)+1))
	}
	for _, cut := range cuts {
		a, b := data[:cut], data[cut:]
		want := crc32.Checksum(data, castagnoli)
		got := CRC32CCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if got != want {
			t.Fatalf("cut at %d: combined %08x, want %08x", cut, got, want)
		}
		if bad := CRC32CCombine(crc32.Checksum(a, castagnoli)^1, crc32.Checksum(b, castagnoli), int64(len(b))); bad == want {
			t.Fatalf("cut at %d: a wrong first sum combined to the right one", cut)
		}
		// As a running sum: the first part updated, then the second combined.
		if run := CRC32CCombine(CRC32CUpdate(0, a), CRC32CUpdate(0, b), int64(len(b))); run != want {
			t.Fatalf("cut at %d: running sums combined to %08x, want %08x", cut, run, want)
		}
	}
}

func BenchmarkCRC32CCombine(b *testing.B) {
	for i := range b.N {
		_ = CRC32CCombine(uint32(i), 0x12345678, 3<<20+int64(i&1023))
	}
}
