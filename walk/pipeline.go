package walk

// pipelineLag is how many walks the pipelined loops (walkFused, walkLockstep,
// Node2Vec's proposals) keep prefetched ahead of the one they decide: enough
// misses in flight to cover the memory latency, few enough that the lines
// are still in L1 when used. Measured on scale 20: 8 and 32 to 256 were
// 2-12% slower than 16.
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
	if s.alg.Kind != PPR {
		return words[0][l], words[1][l], false
	}
	if uint64(words[0][l]) < s.stopT {
		return 0, 0, true
	}
	return words[1][l], words[2][l], false
}
