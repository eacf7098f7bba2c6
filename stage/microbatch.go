package stage

// The engine side: micro-batches formed from the queue, one engine run
// each, chunks routed to their batches' writers.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/hybrid"
)

// engineLoop forms micro-batches from the queue and walks them. A
// micro-batch of one request above the per-micro-batch budget goes to the
// heavy lane instead, which walks it in slices (runJobs) while this loop
// goes on forming and walking micro-batches of what is queued behind it:
// their runs take the engine between its slices (internal/turns).
func (s *Stage) engineLoop(ctx context.Context, drained chan<- struct{}) error {
	heavy := make(chan []*batch, s.o.QueueDepth)
	var lane sync.WaitGroup
	lane.Go(func() { s.heavyLane(ctx, heavy) })
	defer func() {
		close(heavy)
		lane.Wait()
		s.finishes.Wait()
		close(drained)
	}()
	var carry *batch
	for {
		var first *batch
		if carry != nil {
			first, carry = carry, nil
		} else {
			select {
			case b, ok := <-s.queue:
				if !ok {
					return nil
				}
				first = b
			case <-ctx.Done():
				s.abandonQueued()
				return nil
			}
		}
		var mb []*batch
		var closed bool
		mb, carry, closed = s.collect(ctx, first)
		if s.heavy(mb) {
			select {
			case heavy <- mb: // counted as queued until the lane takes it
			case <-ctx.Done():
				s.m.queued.Dec()
				s.abandon(mb)
				s.abandonQueued()
				return nil
			}
		} else {
			s.m.queued.Sub(float64(len(mb)))
			if err := s.launch(ctx, mb); err != nil {
				return err
			}
		}
		if closed && carry == nil {
			return nil
		}
	}
}

// heavy reports whether mb is one request above the per-micro-batch
// budget (collect never puts such a request beside others).
func (s *Stage) heavy(mb []*batch) bool {
	return len(mb) == 1 && mb[0].cost > s.o.MicroBatchMaxCost
}

// heavyLane launches the expensive requests, one after another, each in
// slices; it returns once heavy is closed and drained (abandoning what it
// holds at the shutdown deadline).
func (s *Stage) heavyLane(ctx context.Context, heavy <-chan []*batch) {
	for mb := range heavy {
		s.m.queued.Dec()
		if ctx.Err() != nil {
			s.abandon(mb)
			continue
		}
		s.launch(ctx, mb) // never fails: a batch's errors are its finisher's
	}
}

// abandon drops batches never started at the shutdown deadline: they stay
// uncommitted.
func (s *Stage) abandon(mb []*batch) {
	for _, b := range mb {
		s.walkers.drop(b)
		s.log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
		s.leave(b.req.BatchID)
	}
}

// collect forms one micro-batch from first and what the queue holds,
// waiting up to MicroBatchMaxWait for more (not at all when it is 0), up to
// MicroBatchMaxRequests, MicroBatchMaxWalks and MicroBatchMaxCost. A
// request above the cost budget is a micro-batch alone, at once. A batch
// that would exceed a limit comes back as carry, the next micro-batch's
// first; closed reports that the queue is closed.
func (s *Stage) collect(ctx context.Context, first *batch) (mb []*batch, carry *batch, closed bool) {
	mb = []*batch{first}
	if first.cost > s.o.MicroBatchMaxCost {
		return mb, nil, false
	}
	walks, cost := first.walks, first.cost
	var deadline <-chan time.Time // nil: never fires
	if s.o.MicroBatchMaxWait > 0 {
		timer := time.NewTimer(s.o.MicroBatchMaxWait)
		defer timer.Stop()
		deadline = timer.C
	}
	for len(mb) < s.o.MicroBatchMaxRequests && walks < s.o.MicroBatchMaxWalks && cost < s.o.MicroBatchMaxCost {
		var b *batch
		var ok bool
		select {
		case b, ok = <-s.queue: // take what is already queued first
		default:
			if deadline == nil {
				return mb, nil, false
			}
			select {
			case b, ok = <-s.queue:
			case <-deadline:
				return mb, nil, false
			case <-ctx.Done():
				return mb, nil, false
			}
		}
		if !ok {
			return mb, nil, true
		}
		if walks+b.walks > s.o.MicroBatchMaxWalks || cost+b.cost > s.o.MicroBatchMaxCost {
			return mb, b, false
		}
		mb, walks, cost = append(mb, b), walks+b.walks, cost+b.cost
	}
	return mb, nil, false
}

// abandonQueued drops queued batches at the shutdown deadline: they were
// never started and stay uncommitted.
func (s *Stage) abandonQueued() {
	for b := range s.queue {
		s.m.queued.Dec()
		s.abandon([]*batch{b})
	}
}

// launch takes an in-flight slot per batch, walks them in one engine run
// and hands each to a finisher.
func (s *Stage) launch(ctx context.Context, mb []*batch) error {
	for i := range mb {
		select {
		case s.slots <- struct{}{}:
			s.m.inFlight.Inc()
		case <-ctx.Done():
			for _, b := range mb {
				s.walkers.drop(b)
			}
			for _, b := range mb[i:] {
				s.log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
				s.leave(b.req.BatchID)
			}
			for range mb[:i] {
				s.release()
			}
			return nil
		}
	}
	s.m.microBatchRequests.Observe(float64(len(mb)))
	runErr := s.walk(ctx, mb)
	for _, b := range mb {
		s.walkers.drop(b) // walked: the applier may have the cores again
		s.finishes.Add(1)
		go s.finish(ctx, b, runErr)
	}
	return nil
}

func (s *Stage) release() {
	<-s.slots
	s.m.inFlight.Dec()
}

// releaseSlot gives b's in-flight slot back, once.
func (s *Stage) releaseSlot(b *batch) {
	if !b.slotFreed {
		b.slotFreed = true
		s.release()
	}
}

// walk opens a writer per batch, runs the engine once for all of them and
// routes each chunk to its batch's writer. It returns the engine's error
// once the engine is done with the micro-batch; writer errors are recorded
// per batch, and each batch's b.written is closed when its writer has
// drained (complete waits for it). So the engine walks the next
// micro-batch while this one's last row groups are encoded and uploaded:
// waiting for the writers here left the engine idle for that long after
// every launch. The graph version stays referenced until every writer
// has finished.
func (s *Stage) walk(ctx context.Context, mb []*batch) error {
	// One graph version for the whole micro-batch (graphs.go).
	for _, b := range mb {
		b.unbind()
	}
	v := s.graphs.acquire(ctx)
	// One live graph snapshot for the whole micro-batch, as one graph
	// version, and of that version's base: it holds at least every
	// edge_offsets its requests waited for (liveVersion: the newest).
	var snap *livegraph.Snapshot
	if v != nil && s.o.Live != nil {
		v, snap = s.liveVersion(ctx, v)
	}
	if v == nil {
		for _, b := range mb {
			b.written = make(chan struct{})
			close(b.written)
		}
		return ctx.Err()
	}
	jobs := make([]walk.Job, 0, len(mb))
	live := make([]*batch, 0, len(mb))
	var visits, samples []*batch
	now := time.Now()
	s.lookup(ctx, mb)
	// The micro-batch's place in line for the engine is taken now, before
	// its writers open (no I/O): a heavy request's next slice, asked for
	// later, waits for it (internal/turns). Not before the lookup, which a
	// retry makes against the store: the engine would wait on it.
	turn := s.turns.Hold()
	defer turn.Release()
	// Each batch's writer opens here, one after another: with
	// sink.WithSweepWhileWriting an open does no I/O (tens of
	// microseconds). Opened in parallel goroutines, the launch waited for
	// the last of them to be scheduled on a busy host: a fifth of the GPU
	// stage's engine loop in an execution trace.
	sinkOpts := s.sinkOptions(v)
	for _, b := range mb {
		b.launched, b.attempt, b.alone = now, b.attempt+1, len(mb) == 1
		b.gotW, b.steps, b.wErr, b.vErr = 0, 0, nil, nil
		b.written = make(chan struct{})
		b.w = nil
		re := s.bind(b, v)
		if re == nil {
			bs := snap
			if snap != nil {
				bs = s.held.snapshotFor(b, snap, walk.HoldsSnapshot(v.e, b.req.Algorithm), s.o.Live.SnapshotHold, now)
			}
			re = s.bindLive(b, v, bs)
		}
		if re != nil {
			b.wErr = re
			close(b.written)
			continue
		}
		if b.existing != nil || b.lookupErr != nil {
			close(b.written)
			continue
		}
		// Walks on a snapshot may visit the vertices it added: the
		// writer names them through the snapshot's ids.
		names := v.g
		if b.snap != nil {
			names = b.snap.Naming()
		}
		w, err := sink.NewBatchWriter(ctx, s.o.Bucket, s.o.Prefix, s.batchMeta(b, v), names, sinkOpts...)
		if err != nil {
			b.wErr = fmt.Errorf("open writer: %w", err)
			close(b.written)
			continue
		}
		b.w = w
		if b.req.Visits != nil {
			visits = append(visits, b) // counted after the walk jobs' run
			continue
		}
		if b.req.Sample != nil {
			samples = append(samples, b) // sampled after the walk jobs' run
			continue
		}
		b.chunks = make(chan walk.Chunk, s.o.ChunkBuffer)
		go s.write(ctx, b, v)
		job := b.req.Job(len(jobs))
		if b.snap != nil {
			job.Overlay = b.snap
		}
		jobs = append(jobs, job)
		live = append(live, b)
	}
	var runErr error
	if len(jobs) > 0 {
		runErr = s.runJobs(ctx, v, jobs, live, turn)
	}
	s.countVisits(ctx, visits, v, turn)
	s.sampleBatches(ctx, samples, v, turn)
	end := time.Now()
	for _, b := range mb {
		b.emitted = end
	}
	go func() {
		for _, b := range mb {
			<-b.written
		}
		v.release()
	}()
	return runErr
}

// batchMeta is the metadata of b's output, walked on v.
func (s *Stage) batchMeta(b *batch, v *served) sink.BatchMeta {
	meta := sink.BatchMeta{
		BatchID: b.req.BatchID, Algorithm: b.req.Algorithm, Seed: b.req.RNGSeed, Engine: v.e.Name(),
		WalkstageVersion: s.o.Version, Walks: int64(b.walks), Fingerprint: b.req.Fingerprint(), Times: b.req.WithTimes,
	}
	if b.snap != nil {
		meta.EdgeOffsets = b.snap.Watermark()
	}
	if b.req.Visits != nil {
		meta.Walks, meta.Queries = 0, int64(b.req.NumQueries())
	}
	if sp := b.req.Sample; sp != nil {
		p := sp.Params
		meta.Walks, meta.Sample, meta.Instances, meta.SampleEdgeWeight = 0, &p, int64(b.req.NumInstances()), sp.EdgeWeight
		meta.Engine = graphsample.SampleEngine(v.e, p)
	}
	return meta
}

// runJobs runs the walk jobs of a micro-batch on v's engine, handing job
// i's chunks to live[i]'s writer, and records the run. A single job above
// the per-micro-batch budget runs in slices of at most that cost, each in
// a turn of its own (the first is turn's): between them the micro-batches
// that asked for the engine meanwhile walk. The slices keep the walk ids
// of the whole job, so the walks are those of one run.
func (s *Stage) runJobs(ctx context.Context, v *served, jobs []walk.Job, live []*batch, turn *turns.Held) error {
	runs := [][]walk.Job{jobs}
	if len(jobs) == 1 {
		a := jobs[0].Algorithm
		if perWalk := float64(a.Length) * v.cost.StepCost(a); v.cost.WalkCost(a, int64(len(jobs[0].Starts))) > s.o.MicroBatchMaxCost {
			runs = runs[:0]
			for _, j := range sliceJob(jobs[0], perWalk, s.o.MicroBatchMaxCost) {
				runs = append(runs, []walk.Job{j})
			}
		}
	}
	emit := func(c walk.Chunk) error {
		b := live[c.Tag]
		b.gotW += int64(c.Len())
		b.steps += c.Steps()
		select {
		case b.chunks <- c:
			return nil
		case <-ctx.Done():
			// The engine takes an emitted chunk as kept: give it back
			// (a lent one holds a batch buffer).
			v.releaseChunk(c)
			return ctx.Err()
		}
	}
	var runErr error
	var d time.Duration
	for _, js := range runs {
		turn.Lock()
		t0 := time.Now()
		runErr = v.e.Run(ctx, js, emit)
		d += time.Since(t0)
		if runErr == nil {
			// A failed run leaves the last good run's figures.
			s.countStreamed(v.e)
		}
		s.turns.Done()
		if h, ok := v.e.(*hybrid.Engine); ok {
			sh := h.LastShare()
			s.m.hybridSteps.WithLabelValues("cpu").Add(float64(sh.CPUSteps))
			s.m.hybridSteps.WithLabelValues("gpu").Add(float64(sh.GPUSteps))
		}
		if len(runs) > 1 {
			s.m.engineSlices.Inc()
		}
		if runErr != nil {
			break
		}
	}
	s.m.engineRuns.Inc()
	var steps int64
	for _, b := range live {
		b.walked = d
		steps += b.steps
		close(b.chunks)
	}
	s.m.engineSeconds.Add(d.Seconds())
	if sr, ok := v.e.(walk.StatsReporter); ok {
		s.m.engineBytes.Set(float64(sr.LastRunStats().MemoryBytes))
	}
	if runErr == nil {
		s.log.Debug("engine run", "batches", len(live), "walks", len(jobs), "steps", steps, "duration_seconds", d.Seconds(), "slices", len(runs))
	}
	return runErr
}

// write feeds one batch's chunks to its writer. After a Write error it keeps
// draining, so the engine never blocks on a dead batch, and gives the
// drained chunks back to the engine (the writer gives back every chunk
// Write got, even on failure).
func (s *Stage) write(ctx context.Context, b *batch, v *served) {
	defer close(b.written)
	for c := range b.chunks {
		if b.wErr != nil {
			v.releaseChunk(c)
			continue
		}
		if err := b.w.Write(ctx, c); err != nil {
			b.wErr = fmt.Errorf("write: %w", err)
		}
	}
}

// sinkOptions are the writers' options for batches walked on v: the
// configured ones, and, when v's engine reuses chunk memory (the GPU
// engine's Release), the callback that gives the sink's chunks back to it
// once written. Each batch's writer returns chunks to the engine that made
// them, also across a graph swap.
func (s *Stage) sinkOptions(v *served) []sink.Option {
	// The event need not wait for the removal of earlier attempts'
	// leftovers; the offset commit does (report). Nor does the launch
	// wait for the removal of what killed attempts left: Commit does.
	opts := append(slices.Clip(s.o.SinkOptions), sink.WithTidyAfterCommit(), sink.WithSweepWhileWriting(), sink.WithBuffers(s.buffers), sink.WithDirCache(s.dirs))
	if f := v.chunkReleaser(); f != nil {
		opts = append(opts, sink.WithChunkRelease(f))
	}
	return opts
}
