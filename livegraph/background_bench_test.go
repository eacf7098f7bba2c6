package livegraph

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// compactionWorkload is BenchmarkOverlayWalk's graph and delta (R-MAT scale
// 16, weighted; inserts of 10% of its edges and deletes of 1%, skewed
// toward low ids) in records of 4,096 updates, and records of 1% more
// inserts that arrive while it is compacted.
func compactionWorkload(b *testing.B) (*graph.Graph, [][]Update, [][]Update) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Name: "overlay-bench"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	ups, skewed := skewedDelta(base, rng, weightedInsert)
	var during []Update
	for range base.NumEdges() / 100 {
		during = append(during, Update{Op: Insert, Src: skewed(), Dst: skewed(), Weight: float32(1 + rng.IntN(4)), Has: HasWeight})
	}
	split := func(u []Update) [][]Update {
		var out [][]Update
		for len(u) > 0 {
			n := min(len(u), 4096)
			out, u = append(out, u[:n]), u[n:]
		}
		return out
	}
	return base, split(ups), split(during)
}

// BenchmarkBackgroundCompaction measures a background compaction of a
// delta of 10% (BenchmarkOverlayWalk's) and the walk rate around it.
// "swap": the time from BeginCompaction to Rebase's return while 1% more
// updates are applied beside the compaction, split into the compaction
// (on its goroutine), the engine build for the new base (cpu.New and its
// tables, as the stage builds it before the swap) and the rebase (the 1%
// applied again); "walk/...": DeepWalk steps/s (80-step walks, one per
// vertex, weighted and not) on the snapshot before the compaction
// (base + 10%), right after the swap (compacted base + the 1%), and after
// a second compaction with nothing applied beside it (the compacted graph
// alone).
func BenchmarkBackgroundCompaction(b *testing.B) {
	base, delta, during := compactionWorkload(b)
	ctx := context.Background()
	fill := func() *Live {
		l, err := New(base)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range delta {
			if err := l.Apply(0, int64(i), r); err != nil {
				b.Fatal(err)
			}
		}
		return l
	}
	b.Run("swap", func(b *testing.B) {
		var compactT, buildT, rebaseT time.Duration
		var edges int64
		for b.Loop() {
			b.StopTimer()
			l := fill()
			b.StartTimer()
			from, err := l.BeginCompaction()
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan *graph.Graph)
			go func() {
				t0 := time.Now()
				g, err := Compact(ctx, from)
				if err != nil {
					b.Error(err)
				}
				compactT += time.Since(t0)
				t0 = time.Now()
				e, err := cpu.New(g, cpu.WithWorkers(2))
				if err != nil {
					b.Error(err)
				}
				e.PrepareTables()
				buildT += time.Since(t0)
				done <- g
			}()
			for i, r := range during {
				if err := l.Apply(0, int64(len(delta)+i), r); err != nil {
					b.Fatal(err)
				}
			}
			g := <-done
			t0 := time.Now()
			if _, _, err := l.Rebase(g); err != nil {
				b.Fatal(err)
			}
			rebaseT += time.Since(t0)
			edges += g.NumEdges()
		}
		n := float64(b.N)
		b.ReportMetric(compactT.Seconds()/n, "compact-s")
		b.ReportMetric(buildT.Seconds()/n, "engine-build-s")
		b.ReportMetric(rebaseT.Seconds()/n, "rebase-s")
		b.ReportMetric(float64(edges)/compactT.Seconds(), "compacted-edges/s")
	})

	l := fill()
	before := l.Publish()
	from, err := l.BeginCompaction()
	if err != nil {
		b.Fatal(err)
	}
	g, err := Compact(ctx, from)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range during {
		if err := l.Apply(0, int64(len(delta)+i), r); err != nil {
			b.Fatal(err)
		}
	}
	after, _, err := l.Rebase(g)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.BeginCompaction(); err != nil {
		b.Fatal(err)
	}
	g2, err := Compact(ctx, after)
	if err != nil {
		b.Fatal(err)
	}
	quiet, _, err := l.Rebase(g2)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("before: %d delta edges over %d; after the swap: %d over %d; quiet: %d over %d",
		before.Stats().DeltaEdges, base.NumEdges(), after.Stats().DeltaEdges, g.NumEdges(), quiet.Stats().DeltaEdges, g2.NumEdges())
	for _, weighted := range []bool{false, true} {
		alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: weighted}
		for _, c := range []struct {
			name string
			s    *Snapshot
		}{{"before", before}, {"after-swap", after}, {"quiet", quiet}} {
			b.Run("walk/"+c.name+map[bool]string{true: "/weighted", false: ""}[weighted], func(b *testing.B) {
				e, err := cpu.New(c.s.Base(), cpu.WithWorkers(2))
				if err != nil {
					b.Fatal(err)
				}
				e.PrepareTables()
				benchWalks(ctx, b, e, base, walk.Job{Algorithm: alg, Seed: 1, Overlay: c.s})
			})
		}
	}
}
