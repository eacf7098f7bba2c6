//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// Run implements walk.Engine. Jobs with equal algorithms share launches;
// each group's walks run in batches through the batch slots, pipelined
// (pipeline.go): one batch crosses the bus while the last is cut into
// chunks and the one before it is emitted.
// Check says whether the engine walks a (walk.AlgorithmChecker).
func (e *Engine) Check(a walk.Algorithm) error {
	if e.streamed != nil {
		// With a placement plan beside the stream plan (setupBoth), what
		// the stream engine cannot walk walks under the placement plan.
		if err := streamSupported(a, e.streamed.plan); err == nil || e.placed == nil {
			return err
		}
	}
	return temporalSupported(a, e.placed == nil && e.cfg.stripes == nil)
}

func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return e.broken
	}
	if err := walk.ValidateOverlayJobs(e.g, jobs); err != nil {
		return err
	}
	for i := range jobs {
		j := &jobs[i]
		if err := e.Check(j.Algorithm); err != nil {
			return fmt.Errorf("gpu: job %d: %w", j.Tag, err)
		}
		if jobOverlay(j) != nil {
			if err := e.CheckOverlay(j.Algorithm); err != nil {
				return fmt.Errorf("gpu: job %d: %w", j.Tag, err)
			}
		}
	}
	t0 := time.Now()
	e.stats = walk.RunStats{TableBytes: e.tableBytes, TableBuild: e.tableBuild}
	if e.streamed != nil {
		e.streamed.stats = StreamStats{}
	}
	for _, grp := range groupJobs(jobs) {
		if err := e.runGroup(ctx, grp, emit); err != nil {
			return e.afterError(err)
		}
	}
	e.stats.Wall = time.Since(t0)
	for n, b := range e.allocs {
		if len(n) > 4 && n[:4] == "slot" {
			e.stats.MemoryBytes += b
		}
	}
	e.lastMu.Lock()
	e.last = e.stats
	if sm := e.streamed; sm != nil {
		sm.stats.Steps = e.stats.Steps
		sm.diskStats()
		e.lastStream = sm.stats
		args := []any{"walks", e.stats.Walks, "steps", e.stats.Steps, "batches", sm.stats.Batches,
			"in_place_batches", sm.stats.InPlaceBatches, "tails_in_place", sm.stats.Tails, "placement_batches", sm.stats.PlacedBatches, "last_choice", sm.stats.LastChoice, "visits", sm.stats.Visits, "walkers_per_visit", float64(sm.stats.Walkers) / float64(max(sm.stats.Visits, 1)),
			"copies", sm.stats.Copies, "bytes_copied", sm.stats.BytesCopied, "bytes_per_step", float64(sm.stats.BytesCopied) / float64(max(e.stats.Steps, 1)),
			"duration", e.stats.Wall}
		if sm.disk != nil {
			args = append(args, "disk_reads", sm.stats.Reads, "bytes_read", sm.stats.BytesRead, "read_seconds", sm.stats.ReadSeconds,
				"ring_hits", sm.stats.RingHits, "direct", sm.stats.Direct, "result_pieces", sm.stats.ResultPieces)
		}
		if sm.stats.Scans > 0 {
			args = append(args, "node2vec_host_scans", sm.stats.Scans)
		}
		e.cfg.logger.Info("gpu stream run done", args...)
	}
	e.lastMu.Unlock()
	return nil
}

// runGroup walks one group's jobs (one algorithm) through the slots.
func (e *Engine) runGroup(ctx context.Context, grp []*walk.Job, emit walk.EmitFunc) error {
	alg := grp[0].Algorithm
	withTimes := false
	if alg.Kind == walk.Temporal {
		if err := e.prepareTemporal(grp); err != nil {
			return err
		}
		withTimes = wantsTimes(grp)
	}
	// A group walks one snapshot (groupJobs): its delta goes to the
	// device first, so that the batch slots are sized beside it.
	ov := jobOverlay(grp[0])
	switch {
	case ov != nil && alg.Kind == walk.Temporal:
		if err := e.ensureTimedLists(ov, alg); err != nil {
			return err
		}
		if alg.P != 0 {
			// Temporal Node2Vec's classes in the snapshot: its delta
			// and edge set beside the lists.
			if err := e.ensureDelta(ov, alg); err != nil {
				return err
			}
		}
	case ov != nil:
		if err := e.ensureDelta(ov, alg); err != nil {
			return err
		}
	}
	batches, err := e.groupBatches(ctx, grp)
	if err != nil || len(batches) == 0 {
		return err
	}
	if withTimes {
		if err := e.dev.do(e.ensureTimes); err != nil {
			return err
		}
	}
	maxVertices := int64(alg.Length) + 1
	var walks, steps int64
	var ms float64
	p := &pipeline{
		slots: len(e.slots),
		issue: func(s, b int) error { return e.enqueue(e.slots[s], batches[b], alg, withTimes, ov != nil) },
		fetch: func(s, _ int) error {
			kernelMs, err := e.copyBack(e.slots[s])
			if err != nil {
				e.slots[s].pending = nil
			}
			ms += kernelMs
			return err
		},
		unpack: func(s, _ int, send func([]walk.Chunk) bool) ([]walk.Chunk, error) {
			return e.finish(e.slots[s], maxVertices, send)
		},
		abandon: func(s int) { e.abandon(e.slots[s]) },
		// Slots lend their chunks only with WithLentChunks; otherwise
		// none is ever lent and reclaim returns at once.
		reclaim: func(ctx context.Context, s int, stop <-chan struct{}) error {
			return e.awaitLent(ctx, e.slots[s], stop)
		},
		drop: func(c walk.Chunk) {
			if c.Lent {
				e.releaseLent(c)
			}
		},
		emit: func(c walk.Chunk) error {
			walks += int64(c.Len())
			steps += c.Steps()
			return emit(c)
		},
	}
	err = p.run(ctx, len(batches))
	// Each counter was written by one stage, all of which have stopped.
	e.stats.Walks += walks
	e.stats.Steps += steps
	e.stats.Compute += time.Duration(ms * float64(time.Millisecond))
	// Where the group's time went, stage by stage (pipeline.go): the
	// stage that waited least is the bound.
	e.cfg.logger.Debug("gpu run group done", "algorithm", alg.String(), "walks", walks, "steps", steps, "batches", len(batches),
		"issue_wait", p.issueWait, "issue", p.issueTime, "fetch", p.fetchTime, "unpack", p.unpackTime,
		"emit_wait", p.emitWait, "emit", p.emitTime)
	return err
}

// groupBatches prepares the tables and slots that group grp needs and cuts
// its walks into batches that fit the slots.
func (e *Engine) groupBatches(ctx context.Context, grp []*walk.Job) ([]*batch, error) {
	alg := grp[0].Algorithm
	stride := rowPitch(alg.Length)
	var total int64
	for _, j := range grp {
		total += int64(len(j.Starts))
	}
	if total == 0 {
		return nil, nil
	}
	if e.useLabelTables(alg) && (e.streamed == nil || e.placedTablesWanted(alg, total)) {
		// (Under streaming the label layout is built at the first
		// MetaPath batch: walkStreamed. With both plans the placement
		// plan's tables are built when the group's batch would walk
		// under it.)
		if !e.segBuilt {
			// A placed graph's tables may take the slots' memory.
			if err := e.awaitAllLent(ctx); err != nil {
				return nil, err
			}
		}
		if err := e.dev.do(e.labelTables); err != nil {
			return nil, err
		}
		e.stats.TableBytes, e.stats.TableBuild = e.tableBytes, e.tableBuild
	}
	// Slots that already hold the largest batch the pinned buffers allow
	// are used as they are: sizing against free device memory and checking
	// the slots are two round trips to the device thread, which a stage's
	// engine loop spent 1.9 ms a launch waiting for (an execution trace of
	// a GPU backlog); slots only grow, so the answer would be the same.
	hb := e.hostBatch(stride, total)
	if per := hb.walks; per >= 1 && e.slotsHold(per, per*stride, hb.rowsFor(per, stride), int64(len(grp))) {
		if e.streamed == nil {
			per = pipelinedBatchWalks(per, total)
		}
		e.cfg.logger.Debug("gpu run group", "algorithm", alg.String(), "sampler", e.StepperName(alg), "walks", total, "batch_walks", per)
		return cutBatches(grp, per), nil
	}
	per, err := e.batchWalks(stride, total)
	if err != nil {
		return nil, err
	}
	// Growing a slot frees its buffers: none may still be lent.
	if err := e.awaitAllLent(ctx); err != nil {
		return nil, err
	}
	if err := e.dev.do(func() error { return e.ensureSlots(per, per*stride, hb.rowsFor(per, stride), int64(len(grp))) }); err != nil {
		return nil, err
	}
	// Grown slots may hold more than this group's sizing asked for (and
	// under a memory limit one may have grown where the other could not).
	per = min(total, 1<<31-1)
	for _, s := range e.slots {
		per = min(per, s.capWalks, s.capWords/stride)
		if !hb.windowed {
			per = min(per, s.capHostWords/stride)
		}
	}
	if e.cfg.maxBatchWalks > 0 {
		per = min(per, int64(e.cfg.maxBatchWalks))
	}
	if e.streamed == nil {
		// Under streaming every batch walks the partitions again: one
		// batch for the group when it fits, not four to pipeline.
		per = pipelinedBatchWalks(per, total)
	}
	e.cfg.logger.Info("gpu run group", "algorithm", alg.String(), "sampler", e.StepperName(alg), "walks", total, "batch_walks", per,
		"batches", (total+per-1)/per, "result_window_bytes", 4*hb.rowsFor(per, stride), "rows_in_pieces", hb.rowsFor(per, stride) < per*stride)
	return cutBatches(grp, per), nil
}

// abandon waits for slot s's batch after the run failed: nothing queued
// may still use the slot's buffers when Run returns (the next Run reuses
// them).
func (e *Engine) abandon(s *batchSlot) {
	_ = e.dev.do(func() error { return s.stream.Synchronize() })
	s.pending = nil
}

// afterError decides, after Run met err, whether the engine can run again.
// A sticky CUDA error has destroyed the context: the engine is broken. Any
// other error (an emit error, a cancelled context, a failed allocation or
// copy) is followed by a probe of the context; if the probe fails the
// engine is broken too. A broken engine's Run returns an error wrapping
// walk.ErrEngineBroken, now and from then on; otherwise err is returned as
// it is and the next Run may retry.
func (e *Engine) afterError(err error) error {
	if isSticky(err) {
		e.broken = fmt.Errorf("gpu: %w: %w", walk.ErrEngineBroken, err)
	} else if perr := e.dev.do(probe); perr != nil {
		e.broken = fmt.Errorf("gpu: %w: %w (device probe after it: %w)", walk.ErrEngineBroken, err, perr)
	}
	if e.broken != nil {
		e.cfg.logger.Error("gpu engine unusable", "graph", e.g.Name, "error", e.broken.Error())
		return e.broken
	}
	return err
}

// stickyErrors are the CUDA errors after which a context can no longer be
// used: every later call in it fails the same way until the process ends
// (or the context is reset, which would invalidate every allocation).
var stickyErrors = []error{cu.IllegalAddress, cu.LaunchFailed, cu.MisalignedAddress, cu.InvalidAddressSpace,
	cu.InvalidPc, cu.IllegalInstruction, cu.HardwareStackError, cu.Assert, cu.LaunchTimeout,
	cu.EccUncorrectable, cu.NvlinkUncorrectable, cu.ContextIsDestroyed, cu.Deinitialized}

func isSticky(err error) bool {
	for _, s := range stickyErrors {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// probe checks that the current context still works: it waits for all its
// work, then round-trips a word through a fresh allocation. It bypasses
// the failure injection and the engine's allocation records (device
// thread).
func probe() error {
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("synchronize: %w", err)
	}
	p, err := cu.MemAlloc(64)
	if err != nil {
		return fmt.Errorf("allocate: %w", err)
	}
	defer func() { _ = cu.MemFree(p) }()
	const want = 0x5eed5eed
	if err := cu.MemsetD32(p, want, 16); err != nil {
		return fmt.Errorf("memset: %w", err)
	}
	var got uint32
	if err := cu.MemcpyDtoH(unsafe.Pointer(&got), p, 4); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if got != want {
		return fmt.Errorf("read back %#x, wrote %#x", got, want)
	}
	return nil
}

// drained waits for stream st after err stopped the issue of its work, so
// that nothing queued still uses the buffers, and returns err (with the
// synchronisation's error, if any, which may be the sticky one).
func drained(st cu.Stream, err error) error {
	if serr := st.Synchronize(); serr != nil {
		return fmt.Errorf("%w; then synchronising its stream: %w", err, serr)
	}
	return err
}
