//go:build cuda

package gpu

import (
	"fmt"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

var _ walk.OverlayWalker = (*Engine)(nil)

// overlayState is the snapshot delta resident on the device (device
// thread, under e.mu): the snapshot it was copied from and its arrays,
// which only grow, so a later snapshot reuses them.
type overlayState struct {
	// fn are the walk_overlay kernels: [ppr][register budget: the
	// compiler's, 64, 40], and occ their resident blocks per
	// multiprocessor.
	fn  [2][3]cu.Function
	occ [2][3]int
	// snap is the snapshot whose delta the arrays hold (nil: none yet).
	snap   walk.Overlay
	layout deltaLayout
	bufs   [3]overlayBuf // words, heads, items
}

type overlayBuf struct {
	p   cu.DevicePtr
	cap int64
}

var overlayBufNames = [3]string{"delta.words", "delta.heads", "delta.items"}

// setupOverlay loads the overlay kernels (device thread).
func (e *Engine) setupOverlay() error {
	for ppr, name := range []string{"walk_overlay_static", "walk_overlay_ppr"} {
		for v, suffix := range []string{"", "_full", "_6"} {
			fn, err := e.mod.Function(name + suffix)
			if err != nil {
				return fmt.Errorf("gpu: kernel %s: %w", name+suffix, err)
			}
			e.ovl.fn[ppr][v] = fn
			if e.ovl.occ[ppr][v], err = fn.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
				return fmt.Errorf("gpu: occupancy of %s: %w", name+suffix, err)
			}
		}
	}
	return nil
}

// CheckOverlay implements walk.OverlayWalker: DeepWalk and PPR with the
// uniform and alias samplers, as the CPU engine (which walks Node2Vec and
// MetaPath on a delta too), on a graph wholly on the device (the overlay kernels read no
// placement plan, stream or stripes).
func (e *Engine) CheckOverlay(a walk.Algorithm) error {
	switch {
	case e.placed != nil:
		return fmt.Errorf("%w: the gpu engine walks a live graph's delta only with the whole graph on the device, not under a placement plan (a graph larger than the device or WALKSTAGE_GPU_MEMORY_LIMIT, or a device fraction below 1)", walk.ErrInvalidAlgorithm)
	case e.streamed != nil:
		return fmt.Errorf("%w: the gpu engine walks a live graph's delta only with the whole graph on the device, not streamed in partitions", walk.ErrInvalidAlgorithm)
	case e.cfg.stripes != nil:
		return fmt.Errorf("%w: the gpu engine walks a live graph's delta only with the whole graph on each device, not partitioned in stripes", walk.ErrInvalidAlgorithm)
	}
	if err := walk.OverlaySupported(a); err != nil {
		return err
	}
	if a.Kind != walk.DeepWalk && a.Kind != walk.PPR {
		return fmt.Errorf("%w: the gpu engine walks deepwalk and ppr on a live graph's delta, not %s yet (the cpu engine does)", walk.ErrInvalidAlgorithm, a.Kind)
	}
	return nil
}

// ensureDelta makes ov's delta the one resident on the device, copying it
// when ov is not the snapshot copied last, and adds what it cost to the
// run's stats. A snapshot is immutable, so one copied stays valid; a new
// one is laid out whole (gpu/overlay.go) and copied into the arrays the
// last left, grown when short.
func (e *Engine) ensureDelta(ov walk.Overlay) error {
	st := &e.ovl
	if sameOverlay(st.snap, ov) {
		return nil
	}
	t0 := time.Now()
	idx := walk.IndexOf(ov)
	t1 := time.Now()
	if err := layoutDelta(idx, ov.NumVertices(), &st.layout); err != nil {
		return err
	}
	t2 := time.Now()
	l := &st.layout
	err := e.dev.do(func() error {
		// The arrays may still be read by nothing: Run holds e.mu and
		// every batch of an earlier group has been fetched.
		st.snap = nil
		arrays := [3]struct {
			p unsafe.Pointer
			n int64
		}{
			{sliceData(l.words), int64(len(l.words)) * 16},
			{sliceData(l.heads), int64(len(l.heads)) * deltaHeadSize},
			{sliceData(l.items), int64(len(l.items)) * 8},
		}
		for i, a := range arrays {
			b := &st.bufs[i]
			if a.n > b.cap {
				e.free(overlayBufNames[i], &b.p)
				b.cap = 0
				want := a.n + a.n/4 // room for the next snapshots' growth
				p, err := e.alloc(overlayBufNames[i], want)
				if err != nil {
					return fmt.Errorf("gpu: live graph delta: %w", err)
				}
				b.p, b.cap = p, want
			}
			if a.n > 0 {
				if err := e.copyHtoD(b.p, a.p, a.n); err != nil {
					return fmt.Errorf("gpu: copy the live graph's delta (%s, %d bytes): %w", overlayBufNames[i], a.n, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.snap = ov
	t3 := time.Now()
	bytes := l.bytes()
	e.stats.DeltaBytes += bytes
	e.stats.DeltaUpload += t3.Sub(t0)
	e.cfg.logger.Debug("gpu live graph delta copied", "graph", e.g.Name, "vertices_with_delta", len(l.heads),
		"edges_and_tombstones", len(l.items), "bytes", bytes,
		"index", t1.Sub(t0), "layout", t2.Sub(t1), "copy", t3.Sub(t2))
	return nil
}

// sliceData is the address of s's first element, nil when s is empty.
func sliceData[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// overlayArgs are the overlay kernels' arguments after the launch
// parameters: the resident delta (kernels/walk.cu, WALK_OVERLAY_ARGS).
func (e *Engine) overlayArgs() []uint64 {
	st := &e.ovl
	return []uint64{uint64(st.bufs[0].p), uint64(st.bufs[1].p), uint64(st.bufs[2].p), uint64(e.g.NumVertices()), uint64(len(st.layout.words))}
}

// overlayKernel picks the overlay kernel for alg and sizes its launch
// over n tasks: for DeepWalk the 40-register one (at scale 22 on the H200
// it walked a 10% delta 8% faster than the 64-register one uniform and 13%
// weighted: docs/benchmarks/live-graph.md), for PPR the 64-register one
// (not compared), unless cfg.threadVariant (benchmarks) asks for the
// compiler's (0), 64 (1) or 40 registers (2).
func (e *Engine) overlayKernel(alg walk.Algorithm, n int64) (fn cu.Function, block, grid int) {
	ppr, variant := 0, 2
	if alg.Kind == walk.PPR {
		ppr, variant = 1, 1
	}
	if v := e.cfg.threadVariant; v >= 0 && v < len(e.ovl.fn[ppr]) {
		variant = v
	}
	occ := e.ovl.occ[ppr][variant]
	return e.ovl.fn[ppr][variant], threadBlock, int(min(int64(e.numSM*max(occ, 1)), (n+threadBlock-1)/threadBlock))
}

// releaseOverlay frees the delta's device arrays (device thread).
func (e *Engine) releaseOverlay() {
	for i := range e.ovl.bufs {
		e.free(overlayBufNames[i], &e.ovl.bufs[i].p)
		e.ovl.bufs[i].cap = 0
	}
	e.ovl.snap = nil
}
