package stage

// Output "visits" batches: counted on the engine (walk.CountVisits), one
// batch per counting call, and written by the batch's writer.

import (
	"context"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/walk"
)

// countVisits runs one visits batch on v's engine and writes its rows. The
// queries' seeds are resolved against v's graph (the version may have
// changed since the request was decoded); a seed it lacks rejects the
// batch. An engine error is the batch's vErr (retried like any engine
// failure), a write error its wErr; either way b.written is closed on
// return.
func (s *Stage) countVisits(ctx context.Context, b *batch, v *served) {
	defer close(b.written)
	spec := b.req.Visits
	queries := make([]walk.VisitQuery, len(spec.Queries))
	for q, seeds := range spec.QuerySeeds {
		queries[q] = walk.VisitQuery{Starts: make([]uint32, len(seeds)), Weights: spec.Queries[q].Weights}
		for i, ext := range seeds {
			d, ok := v.g.DenseID(ext)
			if !ok {
				b.vErr = &source.RejectError{Reason: source.ReasonUnknownVertices, BatchID: b.req.BatchID,
					Msg: fmt.Sprintf("graph version %s has no vertex %d (query %q)", v.g.Version, ext, spec.QueryIDs[q])}
				return
			}
			queries[q].Starts[i] = d
		}
	}
	s.engineMu.Lock()
	t0 := time.Now()
	res, st, err := walk.CountVisits(ctx, v.e, v.g, spec.Params, queries)
	d := time.Since(t0)
	s.engineMu.Unlock()
	b.walked = d
	s.m.engineRuns.Add(float64(st.Runs))
	s.m.engineSeconds.Add(d.Seconds())
	if err != nil {
		b.vErr = fmt.Errorf("count visits: %w", err)
		return
	}
	b.gotW, b.steps = int64(b.walks), st.Steps
	s.log.Debug("visits counted", "batch_id", b.req.BatchID, "queries", st.Queries, "walks", st.Walks, "steps", st.Steps,
		"walked_steps", st.WalkedSteps, "runs", st.Runs, "duration", d)
	if err := b.w.WriteVisits(ctx, spec.QueryIDs, res); err != nil {
		b.wErr = fmt.Errorf("write: %w", err)
	}
}
