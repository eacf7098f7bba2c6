package benchcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/visits"
)

// visitsBench is the bench's visits case: Pixie-style queries of one seed
// each, counted and cut to the top k (visits.CountVisits), the results
// discarded.
type visitsBench struct {
	queries int
	steps   int64
	topK    int
	restart float64
}

// benchVisits runs the visits case and prints queries/s and counted steps/s
// (the best of repeat runs). Seeds are drawn with splitmix64 from the vertices
// that have out-edges, so every query spends its whole budget.
func benchVisits(ctx context.Context, eng walk.Engine, g *graph.Graph, vb visitsBench, length int, seed uint64, repeat int, stdout io.Writer) (benchRow, error) {
	alg := walk.Algorithm{Kind: walk.PPR, Length: length, StopProb: vb.restart}
	qs := make([]visits.VisitQuery, vb.queries)
	n := uint64(g.NumVertices())
	x := seed
	for i := range qs {
		for {
			x += 0x9E3779B97F4A7C15 // splitmix64
			z := (x ^ x>>30) * 0xBF58476D1CE4E5B9
			z = (z ^ z>>27) * 0x94D049BB133111EB
			v := uint32((z ^ z>>31) % n)
			if g.Degree(v) > 0 {
				qs[i] = visits.VisitQuery{Starts: []uint32{v}}
				break
			}
		}
	}
	p := visits.VisitParams{Algorithm: alg, Seed: seed, StepsPerQuery: vb.steps, TopK: vb.topK}
	var best time.Duration
	var st visits.VisitStats
	for r := 0; r < max(repeat, 1); r++ {
		t := time.Now()
		_, s, err := visits.CountVisits(ctx, eng, g, p, qs)
		if err != nil {
			return benchRow{}, fmt.Errorf("visits: %w", err)
		}
		if d := time.Since(t); r == 0 || d < best {
			best, st = d, s
		}
	}
	fmt.Fprintf(stdout, "visits: %d queries of one seed, ppr restart %g (length %d), %d steps/query, top %d: %s, %.0f queries/s, %.1f M counted steps/s (%.1f M walked), %d engine runs, %d candidates, peak RSS %.0f MiB\n",
		vb.queries, vb.restart, length, vb.steps, vb.topK, best.Round(time.Millisecond), float64(vb.queries)/best.Seconds(),
		float64(st.Steps)/best.Seconds()/1e6, float64(st.WalkedSteps)/best.Seconds()/1e6, st.Runs, st.Candidates, peakRSSMiB())
	return benchRow{Case: "visits", Queries: int64(vb.queries), Steps: int64(st.Steps), Candidates: int64(st.Candidates),
		EngineRuns: int64(st.Runs), DurationSeconds: best.Seconds(), QueriesPerSecond: perSecond(int64(vb.queries), best),
		StepsPerSecond: perSecond(int64(st.Steps), best), WalkedStepsPerSecond: perSecond(int64(st.WalkedSteps), best),
		PeakRSSBytes: int64(peakRSSMiB() * (1 << 20))}, nil
}
