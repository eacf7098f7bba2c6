package stage

// Output "visits" batches: the micro-batch's visits requests counted on the
// engine together (visits.CountVisitCalls: the GPU engine fills its launches
// with the queries of many requests), each written by its batch's writer.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk/visits"
)

// countVisits counts the visits batches of a micro-batch on v's engine, in
// one call, and writes each batch's rows on a goroutine of its own, so the
// next micro-batch counts while these upload. The queries' seeds are
// resolved against v's graph (the version may have changed since the
// request was decoded); a seed it lacks rejects its batch. An engine
// error is every batch's vErr (retried like any engine failure), a
// parameter error its own batch's, a write error its wErr; either way each
// b.written is closed once the batch is done with.
func (s *Stage) countVisits(ctx context.Context, bs []*batch, v *served, turn *turns.Held) {
	var calls []visits.VisitCall
	var live []*batch
	for _, b := range bs {
		if q, ok := s.visitQueries(b, v); ok {
			calls = append(calls, visits.VisitCall{Params: b.req.Visits.Params, Queries: q})
			live = append(live, b)
		} else {
			close(b.written)
		}
	}
	if len(live) == 0 {
		return
	}
	turn.Lock()
	t0 := time.Now()
	res, st, errs, err := visits.CountVisitCalls(ctx, v.e, v.g, calls)
	d := time.Since(t0)
	s.turns.Done()
	s.m.engineSeconds.Add(d.Seconds())
	for i, b := range live {
		b.walked = d
		switch {
		case err != nil:
			b.vErr = fmt.Errorf("count visits: %w", err)
		case errs[i] != nil:
			b.vErr = fmt.Errorf("count visits: %w", errs[i])
		}
		if b.vErr != nil {
			close(b.written)
			continue
		}
		s.m.engineRuns.Add(float64(st[i].Runs))
		b.gotW, b.steps = int64(b.walks), st[i].Steps
		s.log.Debug("visits counted", "batch_id", b.req.BatchID, "queries", st[i].Queries, "walks", st[i].Walks, "steps", st[i].Steps,
			"walked_steps", st[i].WalkedSteps, "runs", st[i].Runs, "requests_together", len(live), "duration_seconds", d.Seconds())
		go func() {
			defer close(b.written)
			if err := b.w.WriteVisits(ctx, b.req.Visits.QueryIDs, res[i]); err != nil {
				b.wErr = fmt.Errorf("write: %w", err)
			}
		}()
	}
}

// visitQueries resolves b's queries against v's graph, or rejects b (its
// vErr) and returns false.
func (s *Stage) visitQueries(b *batch, v *served) ([]visits.VisitQuery, bool) {
	spec := b.req.Visits
	queries := make([]visits.VisitQuery, len(spec.Queries))
	for q := range spec.Queries {
		n := max(len(spec.QuerySeeds), len(spec.QueryStringSeeds))
		if q >= n {
			break
		}
		var ids []string
		if spec.QueryStringSeeds != nil {
			ids = spec.QueryStringSeeds[q]
		}
		var ints []int64
		if spec.QuerySeeds != nil {
			ints = spec.QuerySeeds[q]
		}
		queries[q] = visits.VisitQuery{Starts: make([]uint32, max(len(ids), len(ints))), Weights: spec.Queries[q].Weights}
		for i := range queries[q].Starts {
			var d uint32
			var ok bool
			var name string
			if ids != nil {
				name = ids[i]
				d, ok = v.g.DenseIDString(name)
			} else {
				name = strconv.FormatInt(ints[i], 10)
				if v.g.HasStringIDs() {
					d, ok = v.g.DenseIDString(name)
				} else {
					d, ok = v.g.DenseID(ints[i])
				}
			}
			if !ok {
				b.vErr = &message.RejectError{Reason: message.ReasonUnknownVertices, BatchID: b.req.BatchID,
					Msg: fmt.Sprintf("graph version %s has no vertex %s (query %q)", v.g.Version, name, spec.QueryIDs[q])}
				return nil, false
			}
			queries[q].Starts[i] = d
		}
	}
	return queries, true
}
