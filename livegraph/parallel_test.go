package livegraph

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Records large enough for Apply to spread them over goroutines leave the
// state the one-goroutine loop leaves: every vertex's delta, the counts, the
// added vertices and the compacted graph, over a base of several tree mids
// (so several goroutines write), for every variant a window does not use.
func TestApplyParallelEqualsSerial(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(len(v.name))))
			const n = midFan*leafFan + 3000 // two mids
			m, base := newModel(t, v, n, n, rng)
			par, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			ser, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			ser.serialApply = true
			for r := range 4 {
				var rec []Update
				for len(rec) < applyParallelMin+100 {
					rec = append(rec, m.randomRecord(rng)...)
				}
				for _, l := range []*Live{par, ser} {
					if err := l.Apply(0, int64(r), rec); err != nil {
						t.Fatal(err)
					}
				}
				if r%2 == 1 { // a publication between records: nodes copied on write again
					par.Publish()
					ser.Publish()
				}
			}
			ps, ss := par.Publish(), ser.Publish()
			if ps.NumVertices() != ss.NumVertices() || ps.Stats() != ss.Stats() {
				t.Fatalf("parallel: %d vertices, %+v; serial: %d vertices, %+v", ps.NumVertices(), ps.Stats(), ss.NumVertices(), ss.Stats())
			}
			if ps.Stats().Inserted < applyParallelMin {
				t.Fatalf("only %d inserts: the records did not exercise the parallel path", ps.Stats().Inserted)
			}
			for v := range uint32(ps.NumVertices()) {
				if a, b := ps.Vertex(v), ss.Vertex(v); !reflect.DeepEqual(a, b) {
					t.Fatalf("vertex %d: parallel %+v, serial %+v", v, a, b)
				}
			}
			gp, err := Compact(context.Background(), ps)
			if err != nil {
				t.Fatal(err)
			}
			gs, err := Compact(context.Background(), ss)
			if err != nil {
				t.Fatal(err)
			}
			if gp.Checksum() != gs.Checksum() || gp.Checksum() != m.build(t, "base").Checksum() {
				t.Fatal("the compactions differ from each other or from the model")
			}
		})
	}
}
