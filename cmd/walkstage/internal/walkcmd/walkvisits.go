package walkcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/visits"
)

// walkVisits is `walkstage walk --output visits`: every seed is one query,
// named by its external id, counted as the stage counts an output "visits"
// request listing the same seeds in the same order with rng_seed = --rng-seed
// (docs/reference/messages.md), and written as the stage writes it.
func walkVisits(ctx context.Context, eng walk.Engine, g *graph.Graph, p visits.VisitParams, seeds []uint32,
	bucketURL string, w *sink.BatchWriter, guard *outputGuard, asJSON bool, stdout, stderr io.Writer) error {
	qs := make([]visits.VisitQuery, len(seeds))
	ids := make([]string, len(seeds))
	for i, s := range seeds {
		qs[i] = visits.VisitQuery{Starts: []uint32{s}}
		ids[i] = g.ExternalString(s)
	}
	fmt.Fprintf(stderr, "counting visits of %d queries (%s, steps/query %d, walks/seed %d, top %d) with the %s engine into %s\n",
		len(qs), p.Algorithm, p.StepsPerQuery, p.WalksPerSeed, p.TopK, eng.Name(), store.ObjectURL(bucketURL, w.Layout().Dir))
	t0 := time.Now()
	res, st, err := visits.CountVisits(ctx, eng, g, p, qs)
	counted := time.Since(t0)
	var m *output.Manifest
	if err == nil {
		err = w.WriteVisits(ctx, ids, res)
	}
	if err == nil {
		err = guard.clear(ctx, stderr)
	}
	if err == nil {
		m, err = w.Commit(ctx)
	}
	if err != nil {
		if aerr := w.Abort(context.WithoutCancel(ctx)); aerr != nil {
			err = fmt.Errorf("%w (abort: %v)", err, aerr)
		}
		return err
	}
	total := time.Since(t0)
	if asJSON {
		return cli.PrintJSON(stdout, newWalkResult(bucketURL, w, m, total))
	}
	fmt.Fprintf(stdout, "wrote %d queries, %d candidates, %d steps counted in %d walks, in %d part(s), %s, to %s\n", m.Queries,
		m.Candidates, m.Steps, m.Walks, len(m.Files), cli.HumanBytes(m.Bytes), store.ObjectURL(bucketURL, w.Layout().SuccessKey()))
	fmt.Fprintf(stdout, "count %s, count+write %s: %.0f queries/s, %.1f M counted steps/s (%.1f M walked)\n",
		counted.Round(time.Millisecond), total.Round(time.Millisecond), float64(len(qs))/total.Seconds(),
		float64(st.Steps)/total.Seconds()/1e6, float64(st.WalkedSteps)/total.Seconds()/1e6)
	return nil
}
