package stage

// Finishing a batch: commit, report, acknowledge, or retry, refuse or
// abandon it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// finish completes one batch after its engine run: commit the objects,
// publish the event, acknowledge. What fails splits in two classes. A
// request error found late (parameters the engine refuses, a batch id
// already used for another request) is refused like a bad message. Any
// other failure is a dependency's (engine, object store, broker), never the
// request's: the batch is retried alone, with capped back-off and for as
// long as it takes, while the stage reports not ready and fetches nothing
// new. At the shutdown deadline the batch is abandoned unacknowledged.
func (s *Stage) finish(ctx context.Context, b *batch, runErr error) {
	defer s.finishes.Done()
	defer s.releaseSlot(b)
	defer s.releaseTableSlot(b)
	defer s.leave(b.req.BatchID)
	defer b.unbind()
	defer s.health.Release(b.holder()) // ended without succeeding: abandoned, refused, broken engine
	defer b.span.End()                 // abandoned or broken: ended as it is (a second End does nothing)
	log := s.log.With("batch_id", b.req.BatchID, "algorithm", b.req.AlgorithmName())
	for {
		err := s.complete(ctx, b, runErr)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			if b.w != nil {
				b.w.Abort(context.WithoutCancel(ctx))
			}
			log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)")
			return
		}
		if re := requestError(b, err); re != nil {
			if b.w != nil {
				b.w.Abort(context.WithoutCancel(ctx))
			}
			if s.refuse(ctx, b.d, re, b) != nil {
				log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)")
			}
			return
		}
		if errors.Is(err, sink.ErrManifestUnresolvable) {
			b.unresolvable++
			if b.unresolvable >= manifestUnresolvableAttempts {
				// The store holds the batch's _SUCCESS key in a state no
				// write of ours clears: retrying would loop for good and
				// hold the partition's commit point. Set the batch aside.
				if b.w != nil {
					b.w.Abort(context.WithoutCancel(ctx))
				}
				re := &message.RejectError{Reason: reasonManifestUnresolvable, BatchID: b.req.BatchID,
					Msg: fmt.Sprintf("gave up after %d attempts: %v", b.unresolvable, err)}
				if s.giveUp(ctx, b.d, re, b) != nil {
					log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)")
				}
				return
			}
		}
		if errors.Is(err, walk.ErrEngineBroken) {
			s.health.BreakEngine(err)
			log.Error("engine unusable: replica not ready, batch left uncommitted for another replica", "err", err)
			return
		}
		s.health.Failed(b.failedDep, b.holder(), err)
		b.span.AddEvent("attempt failed", trace.WithAttributes(attribute.Int("walkstage.attempt", b.attempt),
			attribute.String("walkstage.dependency", b.failedDep), attribute.String("error", err.Error())))
		log.Warn("batch attempt failed; retrying", "attempt", b.attempt, "dependency", b.failedDep, "err", err)
		if s.draining.Load() {
			// Shutting down: leave the retry to the next owner.
			log.Info("batch abandoned at shutdown after a failed attempt (uncommitted)")
			return
		}
		if !s.health.RetryWait(ctx, b.failedDep, b.attempt) {
			continue // ctx is done: the next round abandons
		}
		runErr = s.walk(ctx, []*batch{b})
	}
}

// reasonManifestUnresolvable is the reason of a failed event and dead
// letter for a batch whose manifest key the object store kept unreadable,
// yet refusing creates, through manifestUnresolvableAttempts attempts, each
// with the sink's bounded recovery (sink.ErrManifestUnresolvable).
const reasonManifestUnresolvable message.Reason = "manifest_unresolvable"

// manifestUnresolvableAttempts bounds the attempts at a batch that end in
// sink.ErrManifestUnresolvable: each has already waited out a live writer,
// deleted the key and overwritten it, so a few are enough to rule out a
// passing store fault.
const manifestUnresolvableAttempts = 3

// requestError is the rejection err amounts to, or nil when err is not the
// request's fault.
func requestError(b *batch, err error) *message.RejectError {
	var re *message.RejectError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, walk.ErrInvalidAlgorithm):
		return &message.RejectError{Reason: message.ReasonInvalidParameters, BatchID: b.req.BatchID, Msg: err.Error()}
	case sink.IsRequestError(err), errors.Is(err, icetable.ErrConflict):
		return &message.RejectError{Reason: message.ReasonBatchIDConflict, BatchID: b.req.BatchID, Msg: err.Error()}
	case errors.As(err, new(*gpu.MemoryPlanError)) && b.alone:
		// Walked alone, the request still needs more device memory than
		// there is: no retry helps. (In a micro-batch it is first retried
		// alone.)
		return &message.RejectError{Reason: message.ReasonTooLarge, BatchID: b.req.BatchID, Msg: err.Error()}
	}
	return nil
}

// complete is one attempt at finishing, once the batch's writer has
// drained: writer errors and engine errors come back plain (retryable);
// failing to publish is fatal.
func (s *Stage) complete(ctx context.Context, b *batch, runErr error) error {
	<-b.written
	written := time.Now()
	if b.lookupErr != nil {
		b.failedDep = health.Store
		return b.lookupErr
	}
	if b.existing != nil {
		if err := s.appendTable(ctx, b, b.existing); err != nil {
			b.failedDep = health.Store
			return err
		}
		return s.report(ctx, b, b.existing, s.manifestKey(b.existing), time.Now())
	}
	runErr = errors.Join(runErr, b.vErr)
	if runErr == nil && b.wErr == nil && b.gotW != int64(b.walks) {
		runErr = fmt.Errorf("engine emitted %d of %d walks", b.gotW, b.walks)
	}
	b.failedDep = health.Store
	if runErr != nil {
		b.failedDep = health.Engine
	} else {
		// The walk succeeded: an engine failure of an earlier attempt no
		// longer holds the stage not ready.
		s.health.Succeeded(health.Engine, b.holder())
	}
	if err := errors.Join(runErr, b.wErr); err != nil {
		if b.w != nil {
			b.w.Abort(context.WithoutCancel(ctx))
		}
		return err
	}
	s.phase(b.span, "walkstage.queue", b.queuedAt, b.launched)
	s.phase(b.span, "walkstage.walk", b.launched, b.launched.Add(b.walked),
		attribute.Int("walkstage.attempt", b.attempt), attribute.Int("walkstage.walks", b.walks),
		attribute.Int64("walkstage.steps", b.steps), attribute.String("walkstage.engine", b.v.e.Name()))
	s.phase(b.span, "walkstage.write", b.launched, written)
	wt := time.Now()
	man, err := b.w.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit objects: %w", err)
	}
	if err := s.appendTable(ctx, b, man); err != nil {
		return err // the objects are durable: a retry finds them and appends again
	}
	s.phase(b.span, "walkstage.commit", wt, time.Now())
	return s.report(ctx, b, man, b.w.Layout().SuccessKey(), wt)
}

// report publishes the succeeded event of a batch whose output is durable
// (written now, or found complete by a redelivery), then acknowledges it.
func (s *Stage) report(ctx context.Context, b *batch, man *output.Manifest, manifestKey string, wt time.Time) error {
	writing := time.Since(b.emitted)
	ev := message.Event{BatchID: b.req.BatchID, Status: message.StatusSucceeded,
		Graph: man.Graph, GraphVersion: man.GraphVersion, Algorithm: b.req.DescribeAlgorithm(b.v.g), Engine: man.Engine,
		RNGSeed: b.req.RNGSeed, Seeds: b.req.NumSeeds(), SkippedSeeds: b.req.Skipped, SkippedIDs: b.req.SkippedIDs,
		Walks: man.Walks + man.Instances, Steps: man.Steps + man.Edges, Queries: man.Queries, Candidates: man.Candidates,
		Manifest: store.ObjectURL(s.o.BucketURL, manifestKey), EdgeOffsets: man.EdgeOffsets,
		Timings: message.Timings{Queued: b.launched.Sub(b.queuedAt).Seconds(), Walking: b.walked.Seconds(),
			Writing: writing.Seconds(), Total: time.Since(b.queuedAt).Seconds()}}
	for _, f := range man.Files {
		ev.Objects = append(ev.Objects, store.ObjectURL(s.o.BucketURL, f.Key))
	}
	s.health.Succeeded(health.Store, b.holder())
	// The objects are durable: from here only the event is retried, never
	// the walk. Abandoned at the deadline, the redelivery finds the output
	// complete and publishes it then.
	pctx, pspan := s.publishSpan(ctx, b.span, "walkstage.publish")
	err := s.health.Persist(pctx, health.Broker, "publish", func(ctx context.Context) error { return s.o.Events.Publish(ctx, ev) })
	pspan.End()
	if err != nil {
		s.log.Info("batch abandoned at shutdown with its output written (uncommitted; the redelivery reports it)", "batch_id", b.req.BatchID)
		return nil
	}
	if b.w != nil {
		// This attempt's commit removes what earlier attempts left while
		// the event is published; the offset waits for it, so a crash
		// before the commit leaves the redelivery what it always did.
		<-b.w.Tidied()
	}
	if err := b.d.Ack(ctx, nil); err != nil {
		s.log.Warn("acknowledgement failed; the batch will be redelivered", "batch_id", b.req.BatchID, "err", err)
	}
	endRequest(b.span, message.StatusSucceeded, "")
	// The latency users see ends when the event is durable, not when it
	// was built.
	total := time.Since(b.queuedAt)
	s.m.batches.WithLabelValues(string(message.StatusSucceeded)).Inc()
	s.m.walks.Add(float64(ev.Walks))
	s.m.steps.Add(float64(ev.Steps))
	s.m.latency.Observe(total.Seconds())
	s.m.phase.WithLabelValues("queued").Observe(ev.Timings.Queued)
	s.m.phase.WithLabelValues("walking").Observe(ev.Timings.Walking)
	s.m.phase.WithLabelValues("writing").Observe(ev.Timings.Writing)
	s.log.Info("batch succeeded", "batch_id", b.req.BatchID, "algorithm", b.req.AlgorithmName(),
		"walks", ev.Walks, "steps", ev.Steps, "objects", len(man.Files), "duration_seconds", total.Seconds(),
		"commit_seconds", time.Since(wt).Seconds())
	return nil
}

// lookup finds, for each batch, whether its complete output already exists
// (a redelivery after the event or the commit was lost): such a batch is
// reported from its manifest instead of walked again, and a batch id whose
// output came from a different request is a conflict, never overwritten.
// A batch's first launch takes the answer of the lookup started at intake;
// later attempts look again, in parallel.
func (s *Stage) lookup(ctx context.Context, mb []*batch) {
	var wg sync.WaitGroup
	for _, b := range mb {
		if done := b.lookedUp; done != nil {
			b.lookedUp = nil
			<-done // bounded by the store's call timeout, like the lookups below
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.lookupOne(ctx, b)
		}()
	}
	wg.Wait()
}

// DefaultLookupDirsTTL is how long the lookups reuse a listing of the
// kind, graph and algorithm directories (Options.LookupDirsTTL,
// output.DirCache): three of the eight small store requests a batch made
// beside its part, listed about once a second instead. A directory made
// by another process is missed for at most this long, a span of the order
// of the time a batch waits between its lookup at intake and its commit
// under a backlog; see output.DirCache for what a miss costs.
const DefaultLookupDirsTTL = time.Second

// lookupOne sets b.existing and b.lookupErr.
func (s *Stage) lookupOne(ctx context.Context, b *batch) {
	b.existing, b.lookupErr = nil, nil
	m, err := sink.Lookup(ctx, s.o.Bucket, s.o.Prefix, b.req.BatchID, b.req.Fingerprint(),
		append(slices.Clip(s.o.SinkOptions), sink.WithDirCache(s.dirs))...)
	switch {
	case err != nil:
		b.lookupErr = fmt.Errorf("look for existing output: %w", err)
	case m != nil:
		b.existing = m
		s.log.Info("batch already complete (a redelivery): reporting its output without walking", "batch_id", b.req.BatchID,
			"graph_version", m.GraphVersion)
	}
}

// manifestKey is where a found manifest lives.
func (s *Stage) manifestKey(m *output.Manifest) string {
	l, err := m.Layout(s.o.Prefix)
	if err != nil {
		return ""
	}
	return l.SuccessKey()
}
