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
	// compiler's, 64, 40; 40 with the dead-edge bitmap], and occ their
	// resident blocks per multiprocessor.
	fn  [2][4]cu.Function
	occ [2][4]int
	// fnN2V is walk_overlay_node2vec (one register budget), occN2V its
	// resident blocks per multiprocessor.
	fnN2V  cu.Function
	occN2V int
	// fnSet is overlay_edge_set, which builds the edge set Node2Vec's
	// kernel looks appended edges up in: per patch buffer, its keys and
	// values (set), slots-1 (setMask), and whether the resident
	// snapshot's is built (setBuilt).
	fnSet    cu.Function
	set      [2][2]overlayBuf
	setMask  [2]uint64
	setBuilt [2]bool
	// MetaPath: walk_overlay_metapath (fnMP, occMP), the items' labels per
	// resident level (lab, on a labelled graph), and the label segments'
	// weight sums (sums, built once by label_weight_sums for a weighted
	// walk: the base does not change under an engine).
	fnMP, fnSums cu.Function
	occMP        int
	lab          [2]overlayBuf
	sums         overlayBuf
	// fnRecords is overlay_records, which builds the vertex records,
	// fnEdges overlay_dead_edges, the dead-edge bitmap.
	fnRecords, fnEdges cu.Function
	// snap is the snapshot whose delta the arrays hold (nil: none yet).
	snap   walk.Overlay
	layout deltaLayout
	res    [2][2]overlayBuf // per resident level: heads, items
	pat    [2][2]overlayBuf // per patch: words, heads
	// recs are the vertex records (gpu/overlay.go) per patch buffer (the
	// snapshot that wrote it) and weighting (uniform, weighted), built
	// when a launch first needs them: built says which are.
	recs  [2][2]overlayBuf
	built [2][2]bool
	// edges are the dead-edge bitmap (a bit a base edge) and after it,
	// from word edgeWords on, the dead-item bitmap (a bit an item of the
	// resident level) per patch buffer, built when a kernel that reads
	// them first walks the snapshot.
	edges      [2]overlayBuf
	edgeWords  [2]int64
	edgesBuilt [2]bool
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
	overlayEdgeNames = [2]string{"delta.edges0", "delta.edges1"}
	overlaySetNames  = [2][2]string{{"delta.set0.keys", "delta.set0.values"}, {"delta.set1.keys", "delta.set1.values"}}
	overlayLabNames  = [2]string{"delta.res0.labels", "delta.res1.labels"}
	overlayRecNames  = [2][2]string{{"delta.records0.uniform", "delta.records0.weighted"}, {"delta.records1.uniform", "delta.records1.weighted"}}
	overlayResNames  = [2][2]string{{"delta.res0.heads", "delta.res0.items"}, {"delta.res1.heads", "delta.res1.items"}}
	overlayPatNames  = [2][2]string{{"delta.patch0.words", "delta.patch0.heads"}, {"delta.patch1.words", "delta.patch1.heads"}}
)

// setupOverlay loads the overlay kernels (device thread).
func (e *Engine) setupOverlay() error {
	for ppr, name := range []string{"walk_overlay_static", "walk_overlay_ppr"} {
		for v, suffix := range []string{"", "_full", "_6", "_6e"} {
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
	var err error
	if e.ovl.fnN2V, err = e.mod.Function("walk_overlay_node2vec"); err != nil {
		return fmt.Errorf("gpu: kernel walk_overlay_node2vec: %w", err)
	}
	if e.ovl.occN2V, err = e.ovl.fnN2V.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
		return fmt.Errorf("gpu: occupancy of walk_overlay_node2vec: %w", err)
	}
	if e.ovl.fnMP, err = e.mod.Function("walk_overlay_metapath"); err != nil {
		return fmt.Errorf("gpu: kernel walk_overlay_metapath: %w", err)
	}
	if e.ovl.occMP, err = e.ovl.fnMP.MaxActiveBlocksPerMultiProcessor(threadBlock, 0); err != nil {
		return fmt.Errorf("gpu: occupancy of walk_overlay_metapath: %w", err)
	}
	if e.ovl.fnSums, err = e.mod.Function("label_weight_sums"); err != nil {
		return fmt.Errorf("gpu: kernel label_weight_sums: %w", err)
	}
	if e.ovl.fnSet, err = e.mod.Function("overlay_edge_set"); err != nil {
		return fmt.Errorf("gpu: kernel overlay_edge_set: %w", err)
	}
	if e.ovl.fnRecords, err = e.mod.Function("overlay_records"); err != nil {
		return fmt.Errorf("gpu: kernel overlay_records: %w", err)
	}
	if e.ovl.fnEdges, err = e.mod.Function("overlay_dead_edges"); err != nil {
		return fmt.Errorf("gpu: kernel overlay_dead_edges: %w", err)
	}
	return nil
}

// CheckOverlay implements walk.OverlayWalker: DeepWalk and PPR with the
// uniform and alias samplers, Node2Vec with its rejection sampler, MetaPath
// on its label tables and temporal walks (temporal Node2Vec included), as
// the CPU engine, on a graph wholly on the device (the overlay kernels read no
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
	switch a.Kind {
	case walk.DeepWalk, walk.PPR, walk.Node2Vec:
	case walk.Temporal:
		// On the snapshot's timed lists (overlaytemporal.go); temporal
		// Node2Vec also reads the delta and its edge set (ensureDelta).
		if err := temporalSupported(a, true); err != nil {
			return err
		}
	case walk.MetaPath:
		if !e.useLabelTables(a) {
			return fmt.Errorf("%w: the gpu engine walks metapath on a live graph's delta on its label tables only, which a graph of %d labels does not get (at most %d; the cpu engine walks it)",
				walk.ErrInvalidAlgorithm, e.g.NumLabels, walk.MaxTableLabels)
		}
	default:
		return fmt.Errorf("%w: the gpu engine walks deepwalk, ppr, node2vec, metapath and temporal walks on a live graph's delta, not %s yet (the cpu engine does)", walk.ErrInvalidAlgorithm, a.Kind)
	}
	return nil
}

// ensureDelta makes ov's delta the one resident on the device, copying it
// when ov is not the snapshot copied last, with its vertex records for a
// walk weighted or not, and adds what it cost to the run's stats. A
// snapshot is immutable, so one copied stays valid; a new one is laid out
// over it (gpu/overlay.go: a patch of what changed, or whole) into the
// buffers it does not use, copied, and only then made current: on an
// error the last snapshot stays resident. Its records go to the buffer of
// its patch, which the last snapshot does not read either.
func (e *Engine) ensureDelta(ov walk.Overlay, alg walk.Algorithm) error {
	st := &e.ovl
	if sameOverlay(st.snap, ov) {
		return e.ensureRecords(alg)
	}
	t0 := time.Now()
	st.layout.labelled = e.g.NumLabels > 0
	idx := walk.IndexOf(ov)
	t1 := time.Now()
	pl, err := st.layout.prepare(idx, ov.NumVertices())
	if err != nil {
		return err
	}
	t2 := time.Now()
	if err := e.dev.do(func() error {
		st.built[pl.p], st.edgesBuilt[pl.p], st.setBuilt[pl.p] = [2]bool{}, false, false
		return e.copyDelta(pl)
	}); err != nil {
		return err
	}
	st.layout.commit(pl)
	st.snap = ov
	if err := e.ensureRecords(alg); err != nil {
		return err
	}
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

// ensureRecords builds the resident snapshot's vertex records for alg's
// weighting when they are not built yet (one launch of overlay_records
// over every vertex), and its dead-edge bitmap when alg's kernel reads it.
func (e *Engine) ensureRecords(alg walk.Algorithm) error {
	st := &e.ovl
	p, w := st.layout.p, 0
	if alg.Weighted {
		w = 1
	}
	if _, v := e.overlayVariant(alg); v == 3 && !st.edgesBuilt[p] {
		if err := e.dev.do(e.buildDeadEdges); err != nil {
			return err
		}
	}
	if n2vSnapshot(alg) && !st.setBuilt[p] {
		if err := e.dev.do(e.buildEdgeSet); err != nil {
			return err
		}
	}
	if alg.Kind == walk.MetaPath && alg.Weighted && st.sums.p == 0 {
		if err := e.dev.do(e.buildLabelSums); err != nil {
			return err
		}
	}
	if st.built[p][w] {
		return nil
	}
	if uint64(e.g.NumEdges()) >= recMaxEdges {
		return fmt.Errorf("gpu: live graph delta: the base holds %d edges, more than the %d the vertex records address", e.g.NumEdges(), uint64(recMaxEdges))
	}
	return e.dev.do(func() error {
		n := recordCount(len(st.layout.words()), e.g.NumVertices())
		b := &st.recs[p][w]
		if want := int64(n+1) * 8; want > b.cap {
			e.free(overlayRecNames[p][w], &b.p)
			b.cap = 0
			want += want / 8 // room for the vertices later snapshots add
			ptr, err := e.alloc(overlayRecNames[p][w], want)
			if err != nil {
				return fmt.Errorf("gpu: live graph delta: %w", err)
			}
			b.p, b.cap = ptr, want
		}
		l := &st.layout
		args := []uint64{uint64(e.dOffsets), uint64(n), uint64(st.pat[l.p][0].p), uint64(st.res[l.r][0].p), uint64(st.pat[l.p][1].p),
			uint64(st.res[l.r][1].p), uint64(e.g.NumVertices()), uint64(len(l.words())), uint64(w), uint64(b.p)}
		blocks := int(min((uint64(n)+tableThreads)/tableThreads, uint64(e.numSM*16)))
		if err := launch(st.fnRecords, blocks, tableThreads, cu.Stream{}, args); err != nil {
			return fmt.Errorf("gpu: overlay_records: %w", err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("gpu: overlay_records: %w", err)
		}
		st.built[p][w] = true
		return nil
	})
}

// buildDeadEdges builds the resident snapshot's dead-edge and dead-item
// bitmaps: cleared, then overlay_dead_edges, a warp a vertex (device
// thread).
func (e *Engine) buildDeadEdges() error {
	st := &e.ovl
	l := &st.layout
	b := &st.edges[l.p]
	edgeWords := (e.g.NumEdges() + 31) / 32
	words := edgeWords + (int64(len(l.items()))+31)/32
	if want := max(words, 1) * 4; want > b.cap {
		e.free(overlayEdgeNames[l.p], &b.p)
		b.cap = 0
		want += want / 8 // room for the items later snapshots append
		ptr, err := e.alloc(overlayEdgeNames[l.p], want)
		if err != nil {
			return fmt.Errorf("gpu: live graph delta: %w", err)
		}
		b.p, b.cap = ptr, want
	}
	if err := cu.MemsetD32(b.p, 0, max(words, 1)); err != nil {
		return fmt.Errorf("gpu: clear the dead-edge bitmap: %w", err)
	}
	st.edgeWords[l.p] = edgeWords
	n := recordCount(len(l.words()), e.g.NumVertices())
	args := []uint64{uint64(e.dOffsets), uint64(e.dTargets), uint64(n), uint64(st.pat[l.p][0].p), uint64(st.res[l.r][0].p),
		uint64(st.pat[l.p][1].p), uint64(st.res[l.r][1].p), uint64(e.g.NumVertices()), uint64(len(l.words())), uint64(b.p),
		uint64(b.p + cu.DevicePtr(edgeWords*4))}
	if err := launch(st.fnEdges, e.numSM*16, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: overlay_dead_edges: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: overlay_dead_edges: %w", err)
	}
	st.edgesBuilt[l.p] = true
	return nil
}

// buildEdgeSet builds the resident snapshot's edge set (kernels/overlay.cuh,
// EdgeSet): twice as many slots as the level's items (appended edges and
// tombstones) rounded up to a power of two, cleared, then
// overlay_edge_set, a warp a vertex (device thread). 12 bytes a slot:
// about 400 MiB beside a scale-22 graph's 10% delta (11.5 M appended
// edges), built once a snapshot that Node2Vec walks.
func (e *Engine) buildEdgeSet() error {
	st := &e.ovl
	l := &st.layout
	p := l.p
	slots := int64(1024)
	for slots < 2*int64(len(l.items())) {
		slots *= 2
	}
	for i, size := range []int64{8, 4} {
		b := &st.set[p][i]
		if want := slots * size; want > b.cap {
			e.free(overlaySetNames[p][i], &b.p)
			b.cap = 0
			ptr, err := e.alloc(overlaySetNames[p][i], want)
			if err != nil {
				return fmt.Errorf("gpu: live graph delta: %w", err)
			}
			b.p, b.cap = ptr, want
		}
	}
	if err := cu.MemsetD32(st.set[p][0].p, ^uint32(0), slots*2); err != nil {
		return fmt.Errorf("gpu: clear the edge set: %w", err)
	}
	if err := cu.MemsetD32(st.set[p][1].p, 0, slots); err != nil {
		return fmt.Errorf("gpu: clear the edge set: %w", err)
	}
	n := recordCount(len(l.words()), e.g.NumVertices())
	args := []uint64{uint64(st.pat[p][0].p), uint64(st.res[l.r][0].p), uint64(st.pat[p][1].p), uint64(st.res[l.r][1].p),
		uint64(n), uint64(e.g.NumVertices()), uint64(len(l.words())), uint64(st.set[p][0].p), uint64(st.set[p][1].p), uint64(slots - 1)}
	if err := launch(st.fnSet, e.numSM*16, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: overlay_edge_set: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: overlay_edge_set: %w", err)
	}
	st.setMask[p], st.setBuilt[p] = uint64(slots-1), true
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
	if l.labelled {
		labs := res.labels[:pl.to]
		a := array{buf: &e.ovl.lab[pl.r], name: overlayLabNames[pl.r], n: int64(pl.to - pl.from), at: int64(pl.from),
			room: int64(cap(res.labels)), resident: !pl.whole}
		if pl.to > pl.from {
			a.src = unsafe.Pointer(&labs[pl.from])
		}
		arrays = append(arrays, a)
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
// parameters: the resident delta and its records for a walk weighted or
// not (kernels/walk.cu, WALK_OVERLAY_ARGS).
func (e *Engine) overlayArgs(weighted bool) []uint64 {
	st := &e.ovl
	l := &st.layout
	w := 0
	if weighted {
		w = 1
	}
	edges := st.edges[l.p].p
	items := edges + cu.DevicePtr(st.edgeWords[l.p]*4)
	if edges == 0 {
		items = 0
	}
	return []uint64{uint64(st.recs[l.p][w].p), uint64(recordCount(len(l.words()), e.g.NumVertices())), uint64(edges), uint64(items),
		uint64(st.pat[l.p][0].p), uint64(st.res[l.r][0].p), uint64(st.pat[l.p][1].p), uint64(st.res[l.r][1].p),
		uint64(e.g.NumVertices()), uint64(len(l.words()))}
}

// buildLabelSums builds the label segments' weight sums (8 bytes a vertex
// and label) for MetaPath's weighted overlay step (device thread).
func (e *Engine) buildLabelSums() error {
	st := &e.ovl
	nv, nl := int64(e.g.NumVertices()), int64(e.g.NumLabels)
	ptr, err := e.alloc("delta.labels.sums", max(nv*nl, 1)*8)
	if err != nil {
		return fmt.Errorf("gpu: live graph delta: %w", err)
	}
	st.sums = overlayBuf{p: ptr, cap: max(nv*nl, 1) * 8}
	args := []uint64{uint64(e.dOffsets), uint64(e.dWeights), uint64(e.dLabels), uint64(nv), uint64(nl), uint64(ptr)}
	if err := launch(st.fnSums, e.numSM*16, tableThreads, cu.Stream{}, args); err != nil {
		return fmt.Errorf("gpu: label_weight_sums: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: label_weight_sums: %w", err)
	}
	return nil
}

// metaPathArgs are walk_overlay_metapath's arguments after overlayArgs':
// the resident level's item labels and, for a weighted walk, the segment
// sums.
func (e *Engine) metaPathArgs(weighted bool) []uint64 {
	st := &e.ovl
	var sums uint64
	if weighted {
		sums = uint64(st.sums.p)
	}
	return []uint64{uint64(st.lab[st.layout.r].p), sums}
}

// n2vSnapshot says alg's walks on a snapshot test Node2Vec's classes there
// (overlay_has_edge): Node2Vec and temporal Node2Vec, which read the edge
// set.
func n2vSnapshot(alg walk.Algorithm) bool {
	return alg.Kind == walk.Node2Vec || alg.Kind == walk.Temporal && alg.P != 0
}

// edgeSetArgs are walk_overlay_node2vec's arguments after overlayArgs': the
// resident snapshot's edge set.
func (e *Engine) edgeSetArgs() []uint64 {
	st := &e.ovl
	p := st.layout.p
	return []uint64{uint64(st.set[p][0].p), uint64(st.set[p][1].p), st.setMask[p]}
}

// overlayVariant picks the overlay kernel for alg (Node2Vec has one
// kernel, walk_overlay_node2vec, which reads no bitmaps: 0): the
// 40-register one with the dead-edge and dead-item bitmaps (3) for
// DeepWalk and PPR (at
// scale 22 on the H200 the 40-register one with the dead-edge bitmap
// walked a 10% delta 20% faster uniform and 14% weighted than without it:
// docs/benchmarks/live-graph.md; PPR had 64 registers without bitmaps
// before), unless cfg.threadVariant (benchmarks) asks for the compiler's
// (0), 64 (1) or 40 registers (2) without the bitmaps, or 3.
func (e *Engine) overlayVariant(alg walk.Algorithm) (ppr, variant int) {
	ppr, variant = 0, 3
	switch alg.Kind {
	case walk.PPR:
		ppr = 1
	case walk.Node2Vec, walk.MetaPath, walk.Temporal:
		return 0, 0 // walk_overlay_node2vec, _metapath and _temporal_n2v_*: no bitmaps
	}
	if v := e.cfg.threadVariant; v >= 0 && v < len(e.ovl.fn[ppr]) {
		variant = v
	}
	return ppr, variant
}

// overlayKernel is alg's overlay kernel (overlayVariant) and its launch
// over n tasks.
func (e *Engine) overlayKernel(alg walk.Algorithm, n int64) (fn cu.Function, block, grid int) {
	switch alg.Kind {
	case walk.Node2Vec:
		return e.ovl.fnN2V, threadBlock, int(min(int64(e.numSM*max(e.ovl.occN2V, 1)), (n+threadBlock-1)/threadBlock))
	case walk.MetaPath:
		return e.ovl.fnMP, threadBlock, int(min(int64(e.numSM*max(e.ovl.occMP, 1)), (n+threadBlock-1)/threadBlock))
	}
	ppr, variant := e.overlayVariant(alg)
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
			e.free(overlayRecNames[i][j], &e.ovl.recs[i][j].p)
			e.ovl.recs[i][j].cap = 0
			e.ovl.built[i][j] = false
		}
		e.free(overlayEdgeNames[i], &e.ovl.edges[i].p)
		e.ovl.edges[i].cap = 0
		for j := range 2 {
			e.free(overlaySetNames[i][j], &e.ovl.set[i][j].p)
			e.ovl.set[i][j].cap = 0
		}
		e.ovl.setBuilt[i] = false
		e.free(overlayLabNames[i], &e.ovl.lab[i].p)
		e.ovl.lab[i].cap = 0
		e.ovl.edgeWords[i] = 0
		e.ovl.edgesBuilt[i] = false
	}
	e.free("delta.labels.sums", &e.ovl.sums.p)
	e.ovl.sums.cap = 0
	e.ovl.snap = nil
	e.ovl.layout = deltaLayout{}
}
