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
// each group's walks run in batches through the two slots.
func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return e.broken
	}
	if err := walk.ValidateJobs(e.g, jobs); err != nil {
		return err
	}
	t0 := time.Now()
	e.stats = walk.RunStats{TableBytes: e.tableBytes, TableBuild: e.tableBuild}
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
	e.lastMu.Unlock()
	return nil
}

func (e *Engine) runGroup(ctx context.Context, grp []*walk.Job, emit walk.EmitFunc) error {
	alg := grp[0].Algorithm
	stride := rowPitch(alg.Length)
	var total int64
	for _, j := range grp {
		total += int64(len(j.Starts))
	}
	if total == 0 {
		return nil
	}
	if e.useLabelTables(alg) {
		if err := e.dev.do(e.labelTables); err != nil {
			return err
		}
		e.stats.TableBytes, e.stats.TableBuild = e.tableBytes, e.tableBuild
	}
	per, err := e.batchWalks(stride, total)
	if err != nil {
		return err
	}
	if err := e.dev.do(func() error { return e.ensureSlots(per, per*stride, int64(len(grp))) }); err != nil {
		return err
	}
	// Grown slots may hold more than this group's sizing asked for (and
	// under a memory limit one may have grown where the other could not).
	per = min(total, e.slots[0].capWalks, e.slots[0].capWords/stride, e.slots[1].capWalks, e.slots[1].capWords/stride, 1<<31-1)
	if e.cfg.maxBatchWalks > 0 {
		per = min(per, int64(e.cfg.maxBatchWalks))
	}
	e.cfg.logger.Info("gpu run group", "algorithm", alg.String(), "sampler", e.SamplerName(alg), "walks", total, "batch_walks", per)
	batches := cutBatches(grp, per)
	var runErr error
	for i, b := range batches {
		s := e.slots[i%2]
		if s.pending != nil {
			if runErr = e.finish(s, stride, int64(alg.Length)+1, emit); runErr != nil {
				break
			}
		}
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		if runErr = e.enqueue(s, b, alg); runErr != nil {
			break
		}
	}
	// Drain: the older pending batch first.
	for k := 0; k < 2; k++ {
		s := e.slots[(len(batches)+k)%2]
		if s.pending == nil {
			continue
		}
		if runErr != nil {
			_ = e.dev.do(func() error { return s.stream.Synchronize() })
			s.pending = nil
			continue
		}
		runErr = e.finish(s, stride, int64(alg.Length)+1, emit)
	}
	return runErr
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
