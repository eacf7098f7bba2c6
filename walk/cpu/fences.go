package cpu

import "github.com/walkstage/walkstage/internal/hugemem"

// fenceStride is the edges per fence: 16 targets are one 64-byte cache line
// (edge arrays start on 64-byte boundaries).
const fenceStride = 16

// fenceIndex is Node2Vec's index for the neighbour test: f1 holds every
// fenceStride-th target of the graph (E/16 words), f2 every fenceStride-th
// entry of f1 (E/256 words, small enough to stay in L2). The test searches
// f2, then one cache line of f1, then reads one line of targets: for a hub
// of 64K neighbours that is two lines from outside L2, where a binary
// search of f1 alone touches about eight lines and one of the targets about
// twelve (docs/design/performance-notes.md has what it gained).
type fenceIndex struct {
	f1, f2 []uint32
}

func (f *fenceIndex) bytes() int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.f1)+len(f.f2)) * 4
}

// buildFences builds the fence index of the targets.
func buildFences(targets []uint32) *fenceIndex {
	f1 := everyStride(targets)
	return &fenceIndex{f1: f1, f2: everyStride(f1)}
}

// everyStride returns every fenceStride-th element of s.
func everyStride(s []uint32) []uint32 {
	f := make([]uint32, (len(s)+fenceStride-1)/fenceStride)
	hugemem.Advise(f)
	for i := range f {
		f[i] = s[i*fenceStride]
	}
	return f
}

// fenceSearch runs the binary searches of the walks in todo over f, one
// probe per walk per pass, for the last entry <= cand[k] in [base[k],
// base[k]+width[k]), leaving its index in base[k] (base[k] itself when there
// is none); width[k] is the part of the range left to search. The select is
// written as a conditional move: a mispredicted branch would throw away the
// other walks' loads in flight. todo is used as scratch.
func fenceSearch(f []uint32, todo []int32, base, width []uint64, cand []uint32) {
	j := 0
	for _, k := range todo {
		if width[k] > 1 {
			todo[j] = k
			j++
		}
	}
	todo = todo[:j]
	for len(todo) > 0 {
		j := 0
		for _, k := range todo {
			b, w := base[k], width[k]
			half := w / 2
			move := uint64(0)
			if f[b+half] <= cand[k] {
				move = half
			}
			base[k], width[k] = b+move, w-half
			todo[j] = k
			if w-half > 1 {
				j++
			}
		}
		todo = todo[:j]
	}
}
