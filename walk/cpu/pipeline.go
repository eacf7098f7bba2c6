package cpu

import "github.com/walkstage/walkstage/walk"

// The lockstep walkers (walkLockstep, Node2Vec's proposals) take
// a step in one loop over blocks of eight walks: it does the block's Philox
// arithmetic (philox8: one AVX2 pass where the processor has it, the same
// words philox gives one by one), issues the prefetches of the block's
// entries, and decides the steps whose entries were prefetched pipelineLag
// walks earlier. The arithmetic runs while those misses are in flight, and
// the prefetches retire at once, so the reorder window never fills with
// loads waiting on memory.

// pipelineLag is how many walks the pipelined loops (walkLockstep,
// Node2Vec's proposals) keep prefetched ahead of the one they decide: enough
// misses in flight to cover the memory latency, few enough that the lines
// are still in L1 when used. 16 was the fastest of the lags measured
// (docs/design/performance-notes.md).
const pipelineLag = 16

// draw8 computes draw d of step for up to eight walks (positions k of the
// unit whose first walk id is firstID): words[w][l] is word w of walks[l].
func (s *stepper) draw8(walks []int32, firstID uint64, step, d uint32, words *[4][8]uint32) {
	var idLo, idHi [8]uint32
	for l, k := range walks {
		id := firstID + uint64(k)
		idLo[l], idHi[l] = uint32(id), uint32(id>>32)
	}
	philox8(&idLo, &idHi, step, d, s.k0, s.k1, words)
}

// columnWords are lane l's words for a first-order step: the column and
// the alias coin, x0 and x1, or for PPR x1 and x2 after x0's stop test
// (stop: the walk ends here).
func (s *stepper) columnWords(words *[4][8]uint32, l int) (col, coin uint32, stop bool) {
	if s.alg.Kind != walk.PPR {
		return words[0][l], words[1][l], false
	}
	if uint64(words[0][l]) < s.stopT {
		return 0, 0, true
	}
	return words[1][l], words[2][l], false
}
