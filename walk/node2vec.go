package walk

// Node2VecFactors are Node2Vec's bias factors by class of the proposed
// target against the previous vertex (1/p back to it, 1 to a neighbour of
// it, 1/q otherwise) and the rejection step's acceptance thresholds,
// Threshold(f/fmax): word z accepts a proposal of class c when z <
// accept[c] (draws.go). Every engine takes them from here.
func Node2VecFactors(a Algorithm) (f [3]float64, accept [3]uint64) {
	f = [3]float64{1 / a.P, 1, 1 / a.Q}
	fmax := max(f[0], f[1], f[2])
	for i := range f {
		accept[i] = Threshold(f[i] / fmax)
	}
	return f, accept
}

// Adjacency gives v's targets (sorted, as the CSR stores them) and, for a
// weighted walk, its weights (nil for an unweighted one).
type Adjacency func(v uint32) ([]uint32, []float32, error)

// Node2VecScan is the exact step Node2Vec falls back to after
// MaxRejections rejected proposals (walk/cpu's scan, the GPU's
// node2vec_scan): a one-lane reservoir over v's edges with bias w(e)
// f(class(e)) in float64, element i on word i%4 of draw FallbackDraw +
// i/4, so the same additions, products and comparisons pick the same edge
// on every engine. u is the previous vertex. v without edges gives 0.
func Node2VecScan(adj Adjacency, f [3]float64, seed, walkID uint64, step, v, u uint32) (uint32, error) {
	tg, w, err := adj(v)
	if err != nil {
		return 0, err
	}
	ptg, _, err := adj(u)
	if err != nil {
		return 0, err
	}
	k0, k1 := uint32(seed), uint32(seed>>32)
	var run float64
	pick := 0
	var words [4]uint32
	for i, x := range tg {
		if i&3 == 0 {
			words[0], words[1], words[2], words[3] = Philox(uint32(walkID), uint32(walkID>>32), step, FallbackDraw+uint32(i>>2), k0, k1)
		}
		base := 1.0
		if w != nil {
			base = float64(w[i])
		}
		c := 2
		switch {
		case x == u:
			c = 0
		case SortedHas(ptg, x):
			c = 1
		}
		b := base * f[c]
		if b <= 0 {
			continue
		}
		run += b
		// Two roundings, as the device's __dmul_rn pair: Go does not
		// fuse an explicit float64 conversion.
		if float64(float64(words[i&3])*0x1p-32)*run < b {
			pick = i
		}
	}
	if len(tg) == 0 {
		return 0, nil
	}
	return tg[pick], nil
}

// SortedHas says whether the sorted adjacency a holds x.
func SortedHas(a []uint32, x uint32) bool {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(a) && a[lo] == x
}
