package ooc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// saveRMAT writes an R-MAT graph to a file and loads it back as the
// engines get it (mapped, with its path).
func saveRMAT(t testing.TB, o graph.RMATOptions) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	lg, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	return lg
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// collect runs the jobs and returns every walk by (tag, walk id), failing
// on a walk emitted twice or chunk ids out of order.
func collect(t *testing.T, e walk.Engine, jobs []walk.Job) map[[2]uint64][]uint32 {
	t.Helper()
	out := map[[2]uint64][]uint32{}
	err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
		for k := range c.Len() {
			if k > 0 && c.WalkIDs[k] <= c.WalkIDs[k-1] {
				return fmt.Errorf("chunk of job %d: walk ids %d then %d", c.Tag, c.WalkIDs[k-1], c.WalkIDs[k])
			}
			key := [2]uint64{uint64(c.Tag), c.WalkIDs[k]}
			if _, dup := out[key]; dup {
				return fmt.Errorf("walk %v emitted twice", key)
			}
			out[key] = slices.Clone(c.Walk(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func allStarts(g *graph.Graph, perVertex int) []uint32 {
	var s []uint32
	for v := range g.NumVertices() {
		for range perVertex {
			s = append(s, uint32(v))
		}
	}
	return s
}

// TestWalksMatchCPU: walks out of core, over many small partitions held a
// few at a time and more walks than walker slots, equal walk/cpu's walk by
// walk for every algorithm the engine runs.
func TestWalksMatchCPU(t *testing.T) {
	algs := []walk.Algorithm{
		{Kind: walk.DeepWalk, Length: 40},
		{Kind: walk.DeepWalk, Length: 40, Weighted: true},
		{Kind: walk.DeepWalk, Length: 40, Stepper: walk.StepperAlias, Weighted: true},
		{Kind: walk.PPR, Length: 40, StopProb: 0.15},
		{Kind: walk.PPR, Length: 40, StopProb: 0.1, Weighted: true},
		{Kind: walk.MetaPath, Length: 40, Schema: []uint8{0, 1, 2}},
		{Kind: walk.MetaPath, Length: 40, Schema: []uint8{2, 0}, Weighted: true},
		// Node2Vec's class tests park walkers at the previous vertex's
		// partition; q = 100 sends many steps to the exact scan.
		{Kind: walk.Node2Vec, Length: 40, P: 1, Q: 2},
		{Kind: walk.Node2Vec, Length: 40, P: 0.25, Q: 4, Weighted: true},
		{Kind: walk.Node2Vec, Length: 40, P: 1, Q: 100, Weighted: true},
	}
	graphs := []struct {
		name string
		o    graph.RMATOptions
	}{
		{"directed", graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 7, Weighted: true, Labels: 3}},
		{"undirected", graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 9, Undirected: true, Weighted: true, Labels: 3}},
	}
	for _, gc := range graphs {
		g := saveRMAT(t, gc.o)
		ref, err := cpu.New(g, cpu.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		for _, direct := range []bool{true, false} {
			// A budget of 1 MiB with partitions of at most 64 KiB: about
			// ten partitions, two or three held at once, and a few hundred
			// walkers in flight for 4,096 walks.
			e, err := New(context.Background(), g, g.File(), WithMemoryLimit(1<<20), WithPartitionBytes(64<<10),
				WithSlots(3), WithWorkers(2), WithChunkSize(100), WithDirectIO(direct), WithLogger(quiet()))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(e.Plan().Partitions); n < 6 {
				t.Fatalf("%d partitions, want several", n)
			}
			for i, a := range algs {
				t.Run(fmt.Sprintf("%s/direct=%v/%s", gc.name, direct, a.Describe(g)), func(t *testing.T) {
					starts := allStarts(g, 2)
					jobs := []walk.Job{
						{Tag: 0, Algorithm: a, Seed: 42 + uint64(i), Starts: starts},
						{Tag: 1, Algorithm: a, Seed: 1<<40 | 5, Starts: starts[:1000], FirstWalk: 1 << 33},
					}
					want := collect(t, ref, jobs)
					got := collect(t, e, jobs)
					if len(got) != len(want) {
						t.Fatalf("%d walks, want %d", len(got), len(want))
					}
					diff, steps := 0, 0
					for k, w := range want {
						steps += len(w) - 1
						if !slices.Equal(got[k], w) {
							if diff < 3 {
								t.Errorf("walk %v: got %v, want %v", k, got[k], w)
							}
							diff++
						}
					}
					if diff > 0 {
						t.Fatalf("%d of %d walks differ", diff, len(want))
					}
					// Partitions are read again and again (with their
					// alias tables from the table file after the first).
					if st := e.OutOfCoreStats(); st.Loads <= 2*int64(st.Partitions) {
						t.Fatalf("%d loads of %d partitions: the pool held too much for the test", st.Loads, st.Partitions)
					}
					t.Logf("%+v", e.OutOfCoreStats())
					if st := e.OutOfCoreStats(); a.Kind == walk.Node2Vec && a.Q == 100 && st.Scans == 0 {
						t.Fatal("q = 100 sent no step to the exact scan")
					}
					if rs := e.LastRunStats(); rs.Steps != int64(steps) || rs.Walks != int64(len(want)) {
						t.Fatalf("stats: %d walks %d steps, want %d and %d", rs.Walks, rs.Steps, len(want), steps)
					}
				})
			}
			e.Close()
		}
	}
}

// TestCheckRefusesWhatNeedsMore: the algorithms the engine cannot walk out
// of core are refused before a run, with ErrInvalidAlgorithm and the limit.
func TestCheckRefusesWhatNeedsMore(t *testing.T) {
	g := saveRMAT(t, graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 1, Weighted: true, Labels: 20, TimeSpan: 100})
	e, err := New(context.Background(), g, g.File(), WithMemoryLimit(1<<20), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cases := []struct {
		a    walk.Algorithm
		want string
	}{
		{walk.Algorithm{Kind: walk.Node2Vec, Length: 5, P: 1, Q: 1, Stepper: walk.StepperZPRS}, "rejection sampler"},
		{walk.Algorithm{Kind: walk.Temporal, Length: 5}, "edge times"},
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true, Stepper: walk.StepperZPRS}, "reservoir"},
		{walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{1}}, "label tables"}, // 20 labels > MaxTableLabels
	}
	for _, c := range cases {
		err := e.Check(c.a)
		if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "out of core") {
			t.Errorf("%s: %v, want ErrInvalidAlgorithm naming %q", c.a.Kind, err, c.want)
		}
		if err := e.Run(context.Background(), []walk.Job{{Algorithm: c.a, Starts: []uint32{0}}}, func(walk.Chunk) error { return nil }); !errors.Is(err, walk.ErrInvalidAlgorithm) {
			t.Errorf("%s: Run gave %v", c.a.Kind, err)
		}
	}
	if err := e.Check(walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true}); err != nil {
		t.Fatal(err)
	}
}
