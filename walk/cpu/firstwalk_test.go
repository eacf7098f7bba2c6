package cpu

import (
	"context"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// TestFirstWalkSplitsAJob: a job cut into parts, each with the ids its
// walks have in the whole job (FirstWalk), gives the whole job's walks
// under those ids, for every algorithm and both table layouts: what a
// multi-GPU engine relies on when it spreads one job over devices.
func TestFirstWalkSplitsAJob(t *testing.T) {
	g := testGraph(t)
	for _, fused := range []int64{0, 1 << 30} {
		e, err := New(g, WithWorkers(3), WithChunkSize(97), WithFusedTableLimit(fused))
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range allAlgorithms() {
			starts := make([]uint32, 1000)
			for k := range starts {
				starts[k] = uint32(k*7) % 15
			}
			whole := walk.Job{Tag: 0, Algorithm: a, Seed: uint64(7 + i), Starts: starts}
			want := collect(t, e, []walk.Job{whole})
			got := map[uint64][]uint32{}
			var parts []walk.Job
			for _, cut := range [][2]int{{0, 1}, {1, 333}, {333, 1000}} {
				p := whole
				p.Starts, p.FirstWalk = starts[cut[0]:cut[1]], uint64(cut[0])
				parts = append(parts, p)
			}
			err := e.Run(context.Background(), parts, func(c walk.Chunk) error {
				for k := range c.Len() {
					got[c.WalkIDs[k]] = slices.Clone(c.Walk(k))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(starts) {
				t.Fatalf("%s: %d walks from the parts, want %d", a, len(got), len(starts))
			}
			for id, w := range want[0] {
				if !slices.Equal(got[uint64(id)], w) {
					t.Fatalf("%s (fused limit %d): walk %d of the parts %v, of the whole job %v", a, fused, id, got[uint64(id)], w)
				}
			}
		}
		_ = e.Close()
	}
}
