package ooc

import (
	"context"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// TestSizeRun: a run takes the walker count and slots of fewest modelled
// bytes read, within the plan's walker and pool shares together.
func TestSizeRun(t *testing.T) {
	// 20 partitions of 1,000 vertices and 10,000 edges each: 128,008
	// bytes loaded uniform (offsets and targets), 208,008 weighted.
	parts := make([]Partition, 20)
	for i := range parts {
		parts[i] = Partition{Lo: uint32(i * 1000), Hi: uint32(i*1000 + 1000), EdgeLo: uint64(i * 10000), EdgeHi: uint64(i*10000 + 10000)}
	}
	const walkerBytes = 81*4 + walkerFixedBytes
	plan := func(budget int64) Plan {
		return Plan{Budget: budget, PoolBytes: int64(float64(budget) * poolShare), WalkerBytes: int64(float64(budget) * walkerShare),
			Slots: DefaultSlots, Partitions: parts}
	}
	cases := []struct {
		name        string
		budget      int64
		n           needs
		total       int
		choose      bool
		holdAll     bool // every partition held, each read once
		wantWalkers int  // 0: not checked
	}{
		{"the graph and every walker fit", 16 << 20, needs{}, 4000, true, true, 4000},
		{"weighted, the graph and every walker fit", 16 << 20, needs{alias: true}, 4000, true, true, 4000},
		{"the plan's division kept", 16 << 20, needs{}, 4000, false, false, 4000},
		// Every partition held and fewer walkers in flight: each read once.
		{"more walks than fit beside the graph", 16 << 20, needs{}, 100000, true, true, 0},
		// 1.2 MB for walkers and slots (the floor) against 2.56 MB of
		// partitions.
		{"a budget far below the graph", 4 << 20, needs{alias: true}, 100000, true, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plan(c.budget)
			got := sizeRun(p, c.n, 0, c.total, 80, walkerBytes, DefaultSlots, c.choose)
			fallback := sizeRun(p, c.n, 0, c.total, 80, walkerBytes, DefaultSlots, false)
			t.Logf("chosen %+v; the plan's %+v", got, fallback)
			if got.Slots < DefaultSlots || got.Walkers < min(minWalkers, c.total) || got.Walkers > c.total {
				t.Fatalf("%d slots, %d walkers", got.Slots, got.Walkers)
			}
			if got != fallback {
				if used := int64(got.Walkers)*walkerBytes + int64(got.Slots)*got.SlotBytes; used > runBytesOf(c.budget) {
					t.Fatalf("%d walkers and %d slots of %d bytes take %d, above the run's %d", got.Walkers, got.Slots, got.SlotBytes, used, runBytesOf(c.budget))
				}
			} else if got != fallback || got.Slots != DefaultSlots {
				t.Fatalf("kept the plan: got %+v, want %+v", got, fallback)
			}
			if got.ReadBytes > fallback.ReadBytes {
				t.Fatalf("modelled %.0f bytes read, above the plan's %.0f", got.ReadBytes, fallback.ReadBytes)
			}
			if hold := got.Slots >= len(parts); hold != c.holdAll {
				t.Fatalf("%d slots for %d partitions, want every one held: %v", got.Slots, len(parts), c.holdAll)
			}
			if c.holdAll && got.ReadBytes != float64(got.GraphBytes) {
				t.Fatalf("modelled %.0f bytes read holding all, want the graph's %d", got.ReadBytes, got.GraphBytes)
			}
			if c.wantWalkers > 0 && got.Walkers != c.wantWalkers {
				t.Fatalf("%d walkers, want %d", got.Walkers, c.wantWalkers)
			}
		})
	}
}

// TestRunHoldsWhatTheBudgetAllows: with walks whose rows take little of
// the walkers' share, a run spends the rest on slots. Under a budget where
// the plan's three slots read the graph many times over, it holds every
// partition and reads each once; walks equal walk/cpu's, as with the slots
// fixed at the plan's three.
func TestRunHoldsWhatTheBudgetAllows(t *testing.T) {
	g := saveRMAT(t, graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 7, Weighted: true})
	ref, err := cpu.New(g, cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []walk.Algorithm{{Kind: walk.DeepWalk, Length: 40}, {Kind: walk.DeepWalk, Length: 40, Weighted: true}} {
		t.Run(a.Describe(g), func(t *testing.T) {
			jobs := []walk.Job{{Algorithm: a, Seed: 3, Starts: allStarts(g, 1)}}
			want := collect(t, ref, jobs)
			loads := map[bool]int64{}
			for _, fixed := range []bool{true, false} {
				opts := []Option{WithMemoryLimit(6 << 20), WithPartitionBytes(48 << 10), WithWorkers(2), WithLogger(quiet())}
				if fixed {
					opts = append(opts, WithSlots(DefaultSlots))
				}
				e, err := New(context.Background(), g, g.File(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				got := collect(t, e, jobs)
				st := e.OutOfCoreStats()
				e.Close()
				if len(got) != len(want) {
					t.Fatalf("fixed slots %v: %d walks, want %d", fixed, len(got), len(want))
				}
				for k, w := range want {
					if !slices.Equal(got[k], w) {
						t.Fatalf("fixed slots %v: walk %v: got %v, want %v", fixed, k, got[k], w)
					}
				}
				if st.Partitions < 6 {
					t.Fatalf("%d partitions, want several", st.Partitions)
				}
				loads[fixed] = st.Loads
				if !fixed && st.Loads != int64(st.Partitions) {
					t.Fatalf("%d loads of %d partitions, want each read once", st.Loads, st.Partitions)
				}
			}
			if loads[true] <= 2*loads[false] {
				t.Fatalf("the plan's three slots loaded %d partitions, the run's own choice %d: the test does not tell them apart", loads[true], loads[false])
			}
		})
	}
}
