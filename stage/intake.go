package stage

// The intake: fetching, holding batch ids, refusing bad requests.

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/health"
)

// sourceLoop fetches until fetchCtx ends, then closes the queue. While a
// dependency is down it fetches nothing new (the work it holds retries); a
// failed fetch is the broker's trouble, retried with back-off.
func (s *Stage) sourceLoop(fetchCtx, workCtx context.Context) error {
	defer close(s.queue)
	defer s.waiting.Wait() // they may still queue their batches
	fetchFailures := 0
	for {
		if fetchFailures == 0 && !s.health.WaitUp(fetchCtx) {
			return nil
		}
		d, err := s.o.Source.Next(fetchCtx)
		if err != nil {
			if fetchCtx.Err() != nil {
				return nil
			}
			if errors.Is(err, source.ErrClosed) {
				return err
			}
			fetchFailures++
			s.health.Failed(health.Broker, "fetch", err)
			if ctxsleep.Sleep(fetchCtx, health.Backoff(fetchFailures, s.o.RetryBackoffMin, s.o.RetryBackoffMax)) != nil {
				return nil
			}
			continue
		}
		if fetchFailures > 0 {
			fetchFailures = 0
			s.health.Succeeded(health.Broker, "fetch")
		}
		if d.Reject != nil {
			if err := s.refuse(workCtx, d, d.Reject, nil); err != nil {
				return nil // shutdown deadline: left uncommitted, redelivered
			}
			continue
		}
		b := &batch{d: d, req: d.Request, walks: d.Request.NumWalks(), queuedAt: d.Received}
		b.span = s.startRequest(d, b.req.BatchID)
		// The estimate is the version serving now's; a request pinned to
		// another version is estimated on this one (the same graph, as a
		// rule, a few edges apart).
		v := s.graphs.serving()
		if b.cost = requestCost(b.req, v); b.cost > s.o.MaxRequestCost {
			if err := s.refuse(workCtx, d, s.overBudget(b.req, b.cost, v), nil); err != nil {
				return nil // shutdown deadline: left uncommitted, redelivered
			}
			continue
		}
		re := engineRefuses(b.req, v)
		if re == nil {
			re = s.checkLive(b)
		}
		if re != nil {
			if err := s.refuse(workCtx, d, re, nil); err != nil {
				return nil // shutdown deadline: left uncommitted, redelivered
			}
			continue
		}
		if !s.claim(workCtx, b.req.BatchID) {
			return nil
		}
		// The existence check runs while the batch waits in the queue:
		// on the engine loop it was a seventh of the time a GPU stage
		// spent per launch (an execution trace of a 1,000-request backlog).
		lookedUp := make(chan struct{})
		b.lookedUp = lookedUp
		go func() {
			defer close(lookedUp)
			s.lookupOne(workCtx, b)
		}()
		if len(b.req.EdgeOffsets) > 0 && !s.o.Live.Graph.Snapshot().Covers(b.req.EdgeOffsets) {
			s.waiting.Add(1)
			go s.awaitEdges(fetchCtx, workCtx, b)
			continue
		}
		s.walkers.hold(b)
		select {
		case s.queue <- b:
			s.m.queued.Inc()
		case <-workCtx.Done():
			s.walkers.drop(b)
			s.leave(b.req.BatchID)
			return nil
		}
	}
}

// claim registers id as held by this replica, first waiting for an
// earlier copy of it to leave. False means ctx ended while waiting.
func (s *Stage) claim(ctx context.Context, id string) bool {
	for {
		s.activeMu.Lock()
		ch, busy := s.active[id]
		if !busy {
			s.active[id] = make(chan struct{})
			s.activeMu.Unlock()
			return true
		}
		s.activeMu.Unlock()
		s.log.Info("batch redelivered while still in flight here; waiting for the first copy", "batch_id", id)
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// leave releases id (see claim).
func (s *Stage) leave(id string) {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if ch, ok := s.active[id]; ok {
		close(ch)
		delete(s.active, id)
	}
}

// refuse reports a request error: a "rejected" completion event, then the
// acknowledgement that dead-letters and commits the message. Broker
// trouble on the way is retried, never the request's fault; the error is
// ctx's, at the shutdown deadline (the message stays uncommitted). b, when
// set, is the batch found invalid after it was queued.
func (s *Stage) refuse(ctx context.Context, d *source.Delivery, re *message.RejectError, b *batch) error {
	return s.setAside(ctx, d, re, b, message.StatusRejected)
}

// giveUp is refuse for a valid request that cannot be completed (see
// reasonManifestUnresolvable): a failed event and a dead letter with the
// reason, then the acknowledgement.
func (s *Stage) giveUp(ctx context.Context, d *source.Delivery, re *message.RejectError, b *batch) error {
	return s.setAside(ctx, d, re, b, message.StatusFailed)
}

func (s *Stage) setAside(ctx context.Context, d *source.Delivery, re *message.RejectError, b *batch, status message.Status) error {
	// The batch id of a rejection may come from the message key, the error
	// may quote the message: both are bounded in the log.
	log := s.log.With("batch_id", message.LogValue(re.BatchID), "reason", string(re.Reason))
	var span trace.Span
	if b != nil && b.span != nil {
		span = b.span
	} else {
		span = s.startRequest(d, re.BatchID)
	}
	v := s.graphs.serving()
	if b != nil && b.v != nil {
		v = b.v
	}
	ev := message.Event{BatchID: re.BatchID, Status: status, Reason: string(re.Reason), Error: re.Msg,
		Graph: v.g.Name, GraphVersion: v.g.Version,
		Timings: message.Timings{Total: time.Since(d.Received).Seconds()}}
	if b != nil {
		ev.Algorithm, ev.Engine, ev.RNGSeed, ev.Seeds = b.req.DescribeAlgorithm(v.g), v.e.Name(), b.req.RNGSeed, b.req.NumSeeds()
		ev.Timings.Queued = b.launched.Sub(b.queuedAt).Seconds()
	}
	pctx, pspan := s.publishSpan(ctx, span, "walkstage.publish")
	err := s.health.Persist(pctx, health.Broker, "publish rejection", func(ctx context.Context) error { return s.o.Events.Publish(ctx, ev) })
	pspan.End()
	if err != nil {
		return err
	}
	dctx, dspan := s.publishSpan(ctx, span, "walkstage.dead_letter")
	err = s.health.Persist(dctx, health.Broker, "dead-letter", func(ctx context.Context) error { return d.Ack(ctx, re) })
	dspan.End()
	if err != nil {
		return err
	}
	endRequest(span, status, string(re.Reason))
	s.m.batches.WithLabelValues(string(status)).Inc()
	if status == message.StatusFailed {
		log.Error("batch failed and dead-lettered", "error", message.LogValue(re.Msg))
		return nil
	}
	s.m.rejections.WithLabelValues(string(re.Reason)).Inc()
	log.Info("request rejected", "error", message.LogValue(re.Msg))
	return nil
}
