package stage

// Output "visits" batches: counted on the engine (walk.CountVisits), one
// batch per counting call, and written by the batch's writer.

import (
	"context"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/walk"
)

// countVisits runs one visits batch on the engine and writes its rows. An
// engine error is the batch's vErr (retried like any engine failure), a
// write error its wErr; either way b.written is closed on return.
func (s *Stage) countVisits(ctx context.Context, b *batch) {
	defer close(b.written)
	b.vErr = nil
	v := b.req.Visits
	s.engineMu.Lock()
	t0 := time.Now()
	res, st, err := walk.CountVisits(ctx, s.o.Engine, s.o.Graph, v.Params, v.Queries)
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
	if err := b.w.WriteVisits(ctx, v.QueryIDs, res); err != nil {
		b.wErr = fmt.Errorf("write: %w", err)
	}
}
