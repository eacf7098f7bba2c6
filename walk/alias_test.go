package walk

import (
	"math/rand/v2"
	"testing"
)

// aliasVertexRef is Vose's construction as written before AliasVertex lost
// its branches: appends and pops on the two LIFO lists. AliasVertex must
// give the same table bit for bit (the GPU's build, kernels/alias.cuh,
// follows this order too).
func aliasVertexRef(w []float32, prob []float32, alias []uint32) {
	var small, large []uint32
	scaled := make([]float64, 0, len(w))
	var sum float64
	for _, x := range w {
		sum += float64(x)
	}
	fd := float64(len(w))
	for i, x := range w {
		s := float64(x) * fd / sum
		scaled = append(scaled, s)
		if s < 1 {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		large = large[:len(large)-1]
		prob[s] = float32(scaled[s])
		alias[s] = l
		scaled[l] = (scaled[l] + scaled[s]) - 1
		if scaled[l] < 1 {
			small = append(small, l)
		} else {
			large = append(large, l)
		}
	}
	for _, i := range small {
		prob[i], alias[i] = 1, i
	}
	for _, i := range large {
		prob[i], alias[i] = 1, i
	}
}

func TestAliasVertexMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	weights := map[string]func(d int) []float32{
		"uniform in [1,5)": func(d int) []float32 {
			w := make([]float32, d)
			for i := range w {
				w[i] = 1 + 4*rng.Float32()
			}
			return w
		},
		"all equal": func(d int) []float32 {
			w := make([]float32, d)
			for i := range w {
				w[i] = 2.5
			}
			return w
		},
		"few values (ties)": func(d int) []float32 {
			w := make([]float32, d)
			for i := range w {
				w[i] = float32(1 + rng.IntN(3))
			}
			return w
		},
		"heavy tail": func(d int) []float32 {
			w := make([]float32, d)
			for i := range w {
				w[i] = float32(1e-6 + rng.ExpFloat64()*rng.ExpFloat64()*1e3)
			}
			return w
		},
	}
	var scaled []float64
	var small, large []uint32
	for name, gen := range weights {
		for _, d := range []int{1, 2, 3, 7, 64, 1000, 65536} {
			for rep := range 5 {
				w := gen(d)
				got, gotAlias := make([]float32, d), make([]uint32, d)
				want, wantAlias := make([]float32, d), make([]uint32, d)
				// Scratch carried between calls, as forAliasVertices does.
				scaled, small, large = AliasVertex(w, got, gotAlias, scaled, small, large)
				aliasVertexRef(w, want, wantAlias)
				for i := range want {
					if got[i] != want[i] || gotAlias[i] != wantAlias[i] {
						t.Fatalf("%s, degree %d, rep %d, entry %d: (%v, %d), reference (%v, %d)", name, d, rep, i, got[i], gotAlias[i], want[i], wantAlias[i])
					}
				}
			}
		}
	}
}
