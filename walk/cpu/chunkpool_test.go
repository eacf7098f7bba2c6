package cpu

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// Chunks given back are written again by later units, and the walks in
// them are the walks of an engine that never reuses memory: every walk id,
// offset and vertex of a reused chunk is rewritten, whatever it held.
func TestReleasedChunksAreReusedWithTheSameWalks(t *testing.T) {
	g := testGraph(t)
	starts := make([]uint32, 5000)
	for k := range starts {
		starts[k] = uint32(k % 15)
	}
	cases := []walk.Algorithm{
		{Kind: walk.PPR, Length: 12, StopProb: 0.2},
		{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true},
		{Kind: walk.DeepWalk, Length: 12, Weighted: true},
	}
	for _, a := range cases {
		t.Run(a.String(), func(t *testing.T) {
			// The jobs alternate between walks of different lengths, so
			// that a chunk's memory is reused for a chunk of another size.
			jobs := []walk.Job{{Tag: 0, Algorithm: a, Seed: 7, Starts: starts}}
			short := a
			short.Length = 3
			other := []walk.Job{{Tag: 0, Algorithm: short, Seed: 8, Starts: starts[:1200]}}
			fresh, _ := New(g, WithWorkers(3), WithChunkSize(64))
			want := collect(t, fresh, jobs)
			wantShort := collect(t, fresh, other)

			e, _ := New(g, WithWorkers(3), WithChunkSize(64))
			var cr walk.ChunkReleaser = e
			seen := map[*uint32]bool{}
			reused := 0
			for round := range 4 {
				j, w := jobs, want
				if round%2 == 1 {
					j, w = other, wantShort
				}
				got := make([][]uint32, len(j[0].Starts))
				err := e.Run(context.Background(), j, func(c walk.Chunk) error {
					if len(c.Offsets) != c.Len()+1 || c.Offsets[0] != 0 || int(c.Offsets[c.Len()]) != len(c.Vertices) {
						t.Fatalf("malformed chunk: %d walks, offsets %v, %d vertices", c.Len(), c.Offsets, len(c.Vertices))
					}
					for k := range c.Len() {
						got[c.WalkIDs[k]] = slices.Clone(c.Walk(k))
					}
					p := &c.Offsets[:1][0]
					if seen[p] {
						reused++
					}
					seen[p] = true
					cr.Release(c)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for id := range got {
					if !slices.Equal(got[id], w[0][id]) {
						t.Fatalf("round %d walk %d: %v, want %v", round, id, got[id], w[0][id])
					}
				}
			}
			if reused == 0 {
				t.Errorf("no chunk's memory was reused over four runs")
			}
		})
	}
}

// A run whose chunks are given back allocates a small part of what the
// same run allocates without: the chunks' memory is the bulk of it. What
// is left is the run's own bookkeeping: the workers' rows (2 x 81 KiB here)
// come from the run before.
func TestReleasedChunksCutAllocations(t *testing.T) {
	g := testGraph(t)
	starts := make([]uint32, 20000)
	for k := range starts {
		starts[k] = uint32(k % 15)
	}
	jobs := []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, Seed: 3, Starts: starts}}
	allocated := func(release bool) uint64 {
		e, _ := New(g, WithWorkers(2), WithChunkSize(256))
		run := func() {
			err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
				if release {
					e.Release(c)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		run() // tables, pool
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 3 {
			run()
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	kept, given := allocated(false), allocated(true)
	t.Logf("three runs allocated %d bytes with chunks given back, %d without", given, kept)
	if given*4 > kept {
		t.Errorf("three runs allocated %d bytes with chunks given back, %d without: want under a quarter", given, kept)
	}
	// Without the rows reused a run allocated 129 KiB; with them 14-46 KiB,
	// the spread being the runtime's own allocations on a loaded machine
	// (a 32 KiB bound failed there).
	if given/3 > 96<<10 {
		t.Errorf("a run with chunks given back allocated %d bytes: want under 96 KiB, the workers' rows reused", given/3)
	}
}
