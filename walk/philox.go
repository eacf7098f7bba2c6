package walk

import "math/bits"

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11) is the counter-based generator every engine draws from. A draw
// is a pure function of (seed, walk id, step, draw index), so the walks do not
// depend on thread scheduling and the GPU kernels (kernels/rng.cuh) produce
// the very same numbers.
//
// Key   = {seed low 32 bits, seed high 32 bits}
// Count = {walk id low 32, walk id high 32, step, draw}
//
// Each call yields four 32-bit words. Samplers consume the words of draw 0
// first and move to draw 1, 2, ... only when they need more (rejection
// sampling, reservoir sampling); see the sampler documentation for which word
// serves which purpose.
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// Philox4x32 computes the ten-round Philox bijection of counter c under key
// k: the reference form every stream in the project is defined by (walks
// here, C-SAW graph sampling in graphsample, the visit counts' draws), kept
// exported so that those packages draw the very words the GPU kernels do.
func Philox4x32(c [4]uint32, k [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := c[0], c[1], c[2], c[3]
	k0, k1 := k[0], k[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, c0)
		hi1, lo1 := bits.Mul32(philoxM1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}

// philox4x32 is Philox4x32 under the name the walk code uses.
func philox4x32(c [4]uint32, k [2]uint32) [4]uint32 { return Philox4x32(c, k) }

// Bounded maps a uniform 32-bit word to [0, n) by the multiply-high method:
// one multiplication, no division. Its bias is below n/2^32 (2.4e-4 relative
// at a degree of one million), far under what any walk statistic resolves;
// the GPU uses the identical formula (__umulhi). Exported so that graph
// sampling maps its words to edges exactly as the walks do.
func Bounded(x uint32, n uint32) uint32 { return uint32((uint64(x) * uint64(n)) >> 32) }

// index is Bounded under the name the walk code uses.
func index(x uint32, n uint32) uint32 { return Bounded(x, n) }

// Unit24 maps a word to a float32 in [0, 1) with 24 random bits, exactly
// representable, so CPU and GPU comparisons against float32 tables agree.
func Unit24(x uint32) float32 { return float32(x>>8) * (1.0 / (1 << 24)) }

// Threshold converts a probability in [0, 1] to a 32-bit integer threshold:
// an event of probability p happens when a word x satisfies uint64(x) < t.
// Integer comparisons keep the CPU and GPU decisions identical.
func Threshold(p float64) uint64 {
	switch {
	case !(p > 0):
		return 0
	case p >= 1:
		return 1 << 32
	}
	return uint64(p * (1 << 32))
}
