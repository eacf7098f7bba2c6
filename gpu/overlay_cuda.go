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
// thread, under e.mu): the snapshot copied last, the host image of its
// layout (gpu/overlay.go) and the device arrays of both buffers of each
// level, which only grow, so later snapshots reuse them.
type overlayState struct {
	// fn are the walk_overlay kernels: [ppr][register budget: the
	// compiler's, 64, 40], and occ their resident blocks per
	// multiprocessor.
	fn  [2][3]cu.Function
	occ [2][3]int
	// snap is the snapshot whose delta the arrays hold (nil: none yet).
	snap   walk.Overlay
	layout deltaLayout
	res    [2][2]overlayBuf // per resident level: heads, items
	pat    [2][2]overlayBuf // per patch: words, heads
	// sum adds up the copies since it was last logged (logCopies).
	sum struct {
		since                        time.Time
		copies, whole                int
		bytes                        int64
		index, layout, copy, longest time.Duration
	}
}

type overlayBuf struct {
	p   cu.DevicePtr
	cap int64
}

var (
	overlayResNames = [2][2]string{{"delta.res0.heads", "delta.res0.items"}, {"delta.res1.heads", "delta.res1.items"}}
	overlayPatNames = [2][2]string{{"delta.patch0.words", "delta.patch0.heads"}, {"delta.patch1.words", "delta.patch1.heads"}}
)

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
// one is laid out over it (gpu/overlay.go: a patch of what changed, or
// whole) into the buffers it does not use, copied, and only then made
// current: on an error the last snapshot stays resident.
func (e *Engine) ensureDelta(ov walk.Overlay) error {
	st := &e.ovl
	if sameOverlay(st.snap, ov) {
		return nil
	}
	t0 := time.Now()
	idx := walk.IndexOf(ov)
	t1 := time.Now()
	pl, err := st.layout.prepare(idx, ov.NumVertices())
	if err != nil {
		return err
	}
	t2 := time.Now()
	if err := e.dev.do(func() error { return e.copyDelta(pl) }); err != nil {
		return err
	}
	st.layout.commit(pl)
	st.snap = ov
	t3 := time.Now()
	bytes := st.layout.bytes(pl)
	e.stats.DeltaBytes += bytes
	e.stats.DeltaUpload += t3.Sub(t0)
	e.cfg.logger.Debug("gpu live graph delta copied", "graph", e.g.Name, "whole", pl.whole,
		"patch_vertices", len(st.layout.pheads()), "items", pl.to-pl.from, "bytes", bytes,
		"index", t1.Sub(t0), "layout", t2.Sub(t1), "copy", t3.Sub(t2))
	e.logCopies(pl.whole, bytes, t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	return nil
}

// logCopiesEvery is how often ensureDelta logs what the copies since cost,
// at info level: a stage walking a live graph copies a snapshot per
// micro-batch, too many to log one by one.
const logCopiesEvery = 10 * time.Second

// logCopies adds a copy to the running sums and logs them when due.
func (e *Engine) logCopies(whole bool, bytes int64, index, layout, cp time.Duration) {
	s := &e.ovl.sum
	if s.since.IsZero() {
		s.since = time.Now()
	}
	s.copies++
	if whole {
		s.whole++
	}
	s.bytes += bytes
	s.index += index
	s.layout += layout
	s.copy += cp
	s.longest = max(s.longest, index+layout+cp)
	if time.Since(s.since) < logCopiesEvery {
		return
	}
	e.cfg.logger.Info("gpu live graph deltas copied", "graph", e.g.Name, "copies", s.copies, "whole", s.whole,
		"bytes", s.bytes, "index", s.index, "layout", s.layout, "copy", s.copy, "longest", s.longest,
		"duration", time.Since(s.since))
	*s = struct {
		since                        time.Time
		copies, whole                int
		bytes                        int64
		index, layout, copy, longest time.Duration
	}{since: time.Now()}
}

// copyDelta copies plan pl's arrays to the device buffers it names
// (device thread), growing those, which the snapshot copied last does not
// use: its patch's words and heads, and for a whole plan its resident
// level's heads and items; a patch's items go after the items the last
// snapshot reads, in the resident level it shares.
func (e *Engine) copyDelta(pl deltaPlan) error {
	l := &e.ovl.layout
	res, pat := &l.res[pl.r], &l.pat[pl.p]
	type array struct {
		buf      *overlayBuf
		name     string
		src      unsafe.Pointer
		n, at    int64
		room     int64 // the buffer's size wanted, when it must grow
		resident bool  // the buffer the last snapshot reads: never regrown
	}
	arrays := []array{
		{buf: &e.ovl.pat[pl.p][0], name: overlayPatNames[pl.p][0], src: sliceData(pat.words), n: int64(len(pat.words)) * deltaWordSize},
		{buf: &e.ovl.pat[pl.p][1], name: overlayPatNames[pl.p][1], src: sliceData(pat.heads), n: int64(len(pat.heads)) * deltaHeadSize},
	}
	items := res.items[:pl.to]
	if pl.whole {
		arrays = append(arrays, array{buf: &e.ovl.res[pl.r][0], name: overlayResNames[pl.r][0], src: sliceData(res.heads), n: int64(len(res.heads)) * deltaHeadSize})
	}
	arrays = append(arrays, array{buf: &e.ovl.res[pl.r][1], name: overlayResNames[pl.r][1], n: int64(pl.to-pl.from) * 8, at: int64(pl.from) * 8,
		room: int64(cap(res.items)) * 8, resident: !pl.whole})
	if pl.to > pl.from {
		arrays[len(arrays)-1].src = unsafe.Pointer(&items[pl.from])
	}
	for _, a := range arrays {
		b := a.buf
		want := max(a.room, a.at+a.n)
		if want > b.cap {
			if a.resident {
				return fmt.Errorf("gpu: live graph delta: %s holds %d bytes, the patch needs %d (a bug: a whole copy sizes it)", a.name, b.cap, want)
			}
			e.free(a.name, &b.p)
			b.cap = 0
			if a.room == 0 {
				want += want / 4 // room for the next snapshots' growth
			}
			p, err := e.alloc(a.name, want)
			if err != nil {
				return fmt.Errorf("gpu: live graph delta: %w", err)
			}
			b.p, b.cap = p, want
		}
		if a.n > 0 {
			if err := e.copyHtoD(b.p+cu.DevicePtr(a.at), a.src, a.n); err != nil {
				return fmt.Errorf("gpu: copy the live graph's delta (%s, %d bytes): %w", a.name, a.n, err)
			}
		}
	}
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
	l := &st.layout
	return []uint64{uint64(st.pat[l.p][0].p), uint64(st.res[l.r][0].p), uint64(st.pat[l.p][1].p), uint64(st.res[l.r][1].p),
		uint64(e.g.NumVertices()), uint64(len(l.words()))}
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
	for i := range 2 {
		for j := range 2 {
			e.free(overlayResNames[i][j], &e.ovl.res[i][j].p)
			e.ovl.res[i][j].cap = 0
			e.free(overlayPatNames[i][j], &e.ovl.pat[i][j].p)
			e.ovl.pat[i][j].cap = 0
		}
	}
	e.ovl.snap = nil
	e.ovl.layout = deltaLayout{}
}
