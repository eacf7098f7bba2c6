package graph

import (
	"hash/crc64"
	"runtime"
	"sync"
)

// checksumParallel equals Graph.Checksum (CRC-64/ECMA over the parts
// concatenated) but spreads the work over GOMAXPROCS goroutines: each chunk
// gets its own CRC, and the CRCs are joined with crc64Combine. A 1 GiB
// graph is checksummed in a fraction of a second on a many-core server
// instead of about a second on one core.
func checksumParallel(parts ...[]byte) uint64 {
	const chunk = 8 << 20
	type piece struct {
		b   []byte
		crc uint64
	}
	var pieces []piece
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), chunk)
			pieces = append(pieces, piece{b: p[:n]})
			p = p[n:]
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(pieces))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(pieces); i += workers {
				pieces[i].crc = crc64.Update(0, crcTable, pieces[i].b)
			}
		}()
	}
	wg.Wait()
	var c uint64
	for _, p := range pieces {
		c = crc64Combine(c, p.crc, int64(len(p.b)))
	}
	return c
}

// graphChecksum is Graph.Checksum computed in parallel.
func graphChecksum(g *Graph) uint64 {
	return checksumParallel(bytesOf(g.Offsets), bytesOf(g.Targets), bytesOf(g.Weights), bytesOf(g.Labels), bytesOf(g.IDs),
		bytesOf(g.Times), bytesOf(g.ByTime), bytesOf(g.StrOffsets), g.StrBytes)
}

// crc64Combine returns the CRC of A||B from crc1 = CRC(A), crc2 = CRC(B)
// and len2 = len(B), for Go's reflected CRC-64 with inverted initial value
// and output (zlib's crc32_combine, carried over to 64 bits): crc1 is
// multiplied by x^(8 len2) modulo the polynomial, by repeated squaring of
// the "shift by one zero bit" operator, then xored with crc2.
func crc64Combine(crc1, crc2 uint64, len2 int64) uint64 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [64]uint64
	odd[0] = crc64.ECMA // the operator for one zero bit
	row := uint64(1)
	for n := 1; n < 64; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four zero bits
	for {
		gf2Square(&even, &odd) // first pass: one zero byte
		if len2&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
		gf2Square(&odd, &even)
		if len2&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[64]uint64, vec uint64) uint64 {
	var sum uint64
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[64]uint64) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
