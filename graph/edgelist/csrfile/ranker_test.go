package csrfile

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

func TestRankerTableAndIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for name, gen := range map[string]func() int64{
		"dense":  func() int64 { return rng.Int64N(3000) - 1000 },
		"hashed": func() int64 { return int64(rng.Uint64()) },
		"skewed": func() int64 { return rng.Int64N(100) + int64(rng.IntN(2))<<60 },
	} {
		var ids []int64
		for range 2000 {
			ids = append(ids, gen())
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		r := newRanker(ids)
		if (r.table != nil) != (name == "dense") {
			t.Fatalf("%s: table=%v", name, r.table != nil)
		}
		batch := make([]extsort.TRec, len(ids))
		for i, j := range rng.Perm(len(ids)) {
			batch[i].D = ids[j]
		}
		out := make([]uint32, len(batch))
		if err := r.all(batch, out); err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			if ids[out[i]] != batch[i].D {
				t.Fatalf("%s: rank of %d is %d (id %d)", name, batch[i].D, out[i], ids[out[i]])
			}
		}
		missing := []extsort.TRec{{Rec: extsort.Rec{D: ids[0] + 1}}}
		if ids[1] == ids[0]+1 {
			missing[0].D = ids[len(ids)-1] + 1
		}
		if err := r.all(missing, out); err == nil {
			t.Fatalf("%s: a missing id was ranked", name)
		}
	}
}
