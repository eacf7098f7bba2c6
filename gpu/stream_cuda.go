//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// streamParams mirrors ws::StreamParams (kernels/stream.cuh) field for
// field, every field 8 bytes.
type streamParams struct {
	offsets, bounds, base, tasks, seeds uint64
	result, lengths, wv, wstep, list    uint64
	listLen, counts                     uint64
	nparts, n, stride, length, mode     uint64
	stopThreshold                       uint64
	segEnds, numLabels, schemaLen       uint64
	schema                              [walk.MaxSchemaLen]uint8
	wprev, wphase, wcand                uint64
	accept                              [3]uint64
}

const streamParamsSize = 27*8 + walk.MaxSchemaLen

// The mirror's size is the kernel's (stream.cuh asserts 280): either
// array is negative, a compile error, when they part.
var (
	_ [unsafe.Sizeof(streamParams{}) - streamParamsSize]struct{}
	_ [streamParamsSize - unsafe.Sizeof(streamParams{})]struct{}
)

// Mode bits (kStreamEntries, kStreamAlias, kStreamPPR, kStreamMetaPath,
// kStreamNode2Vec).
const (
	streamEntries  = 1
	streamAlias    = 2
	streamPPR      = 4
	streamMetaPath = 8
	streamNode2Vec = 16
)

// n2vScanCap bounds the walkers one round of host scans takes (records of
// n2vScanWords words, 2 MiB); more wait for the next round.
const n2vScanCap = 1 << 16

// streamFmt is the format of a partition's entries: bytes an edge (4:
// targets, 12: alias entries) in the plain layout or the label layout
// (streamlabels.go). A buffer holding one format is of no use to a batch
// that walks another.
type streamFmt struct {
	bytes  int64
	labels bool
}

const streamBlock = 256 // kStreamBlock

// streamed is the engine's state under a stream plan (stream.go).
type streamed struct {
	plan *StreamPlan
	// hEntries: every edge's stream entry in pinned host memory, the
	// source of the partitions' copies.
	hEntries unsafe.Pointer
	// hTargets: a weighted graph's bare targets (pinned), which uniform
	// walks stream instead of the 12-byte entries; nil otherwise.
	hTargets       unsafe.Pointer
	dBounds, dBase cu.DevicePtr
	// dBaseMapped is dBase with the streamed partitions' bases pointing
	// into the mapped host entries: a batch too small to pay for the
	// copies reads them in place (streamCheaper). dEntriesMapped is the
	// entries' device address.
	dBaseMapped, dEntriesMapped cu.DevicePtr
	dResident                   cu.DevicePtr
	dBuf                        [2]cu.DevicePtr
	loaded                      [2]int       // partition in each buffer (copy issued), -1: none
	loadedFmt                   [2]streamFmt // its format
	copyStream                  cu.Stream
	copied                      [2]cu.Event
	fnInit, fnCount             cu.Function
	fnCollect, fnWalk           cu.Function
	occWalk                     int
	dWV, dWStep, dList          cu.DevicePtr
	// Node2Vec (streamn2v.go): its walk kernel, the walkers' previous
	// vertex, phase and candidate (allocated by the first Node2Vec
	// batch), and the scan records passed to the host and back.
	fnWalkN2V, fnScanList   cu.Function
	fnScanApply             cu.Function
	occWalkN2V              int
	dWPrev, dWPhase, dWCand cu.DevicePtr
	capN2V                  int64
	dScan                   cu.DevicePtr
	hScan                   []uint32
	dListLen, dCounts       cu.DevicePtr
	dParams                 cu.DevicePtr
	capWalkers              int64
	hCounts                 []uint32
	hParams                 *streamParams
	hPtrs                   []unsafe.Pointer
	stats                   StreamStats
	pilots                  stepsPilots // the cost model's walk lengths (streamCheaper)
	// disk is the plan's disk side (streamdisk_cuda.go), nil when the
	// partitions are copied from pinned host entries; base is its readers'
	// counters at the last run's end (reads, bytes, nanoseconds).
	disk *diskState
	base [3]int64
	// residentBase is dBase's host copy (the resident partitions' biased
	// device addresses), for the label layout's mapped bases and for
	// swapping the layout the resident partitions hold.
	residentBase []uint64
	// lab is the label layout (streamlabels.go), built at the first
	// MetaPath batch; residentLabels says the resident partitions hold it
	// (a MetaPath batch swaps it in, any other batch swaps it out).
	lab            *streamLabelLayout
	residentLabels bool
	residentTorn   bool // a swap failed halfway: neither layout is whole
}

// streamLabelLayout is the label layout's host side and device tables.
// From disk, the entries are a label entries file (diskState.labels) and
// hEntries is nil.
type streamLabelLayout struct {
	hEntries       unsafe.Pointer // pinned, mapped: every edge's label-layout entry
	dEntriesMapped cu.DevicePtr
	dBaseMapped    cu.DevicePtr // dBaseMapped's twin pointing into hEntries
	dSegEnds       cu.DevicePtr // the segment ends (streamLabelBytes)
}

// setupStreamed plans the partitions for budget bytes of device memory,
// fills the pinned host entries, uploads the offsets and the resident
// partitions and allocates the two buffers (device thread).
func (e *Engine) setupStreamed(budget int64) (err error) {
	t0 := time.Now()
	g := e.g
	s := shapeOf(g)
	plan, err := planStream(s, g.Offsets, budget, e.cfg.streamPartBytes)
	if err != nil {
		return err
	}
	hostBudget := e.cfg.hostMemoryLimit
	if hostBudget <= 0 {
		hostBudget = hostAvailable()
	}
	if e.cfg.streamDisk || (plan.Streamed() > 0 && g.File() != "" && streamFromDisk(plan.HostBytes, hostBudget)) {
		// The pinned host copy would not fit the host budget: the
		// partitions are read from the graph's file (streamdisk.go).
		if plan, err = planStreamDisk(s, g.Offsets, g.File(), budget, hostBudget, e.cfg.streamPartBytes); err != nil {
			return err
		}
	} else if host := plan.HostBytes; host > hostAvailable() {
		return fmt.Errorf("gpu: stream plan of graph %s: its pinned host entries need %s, the host has %s available, and it was not loaded from a file to stream from", s.name, sizeString(host), sizeString(hostAvailable()))
	}
	eb := plan.EntryBytes
	sm := &streamed{plan: plan, loaded: [2]int{-1, -1}}
	e.streamed = sm
	for _, k := range []struct {
		fn   *cu.Function
		name string
	}{{&sm.fnInit, "stream_init"}, {&sm.fnCount, "stream_count"}, {&sm.fnCollect, "stream_collect"}, {&sm.fnWalk, "stream_walk"},
		{&sm.fnWalkN2V, "stream_walk_node2vec"}, {&sm.fnScanList, "stream_scan_list"}, {&sm.fnScanApply, "stream_scan_apply"}} {
		if *k.fn, err = e.mod.Function(k.name); err != nil {
			return fmt.Errorf("gpu: kernel %s: %w", k.name, err)
		}
	}
	if sm.occWalk, err = sm.fnWalk.MaxActiveBlocksPerMultiProcessor(streamBlock, 0); err != nil {
		return fmt.Errorf("gpu: occupancy of stream_walk: %w", err)
	}
	if sm.occWalkN2V, err = sm.fnWalkN2V.MaxActiveBlocksPerMultiProcessor(streamBlock, 0); err != nil {
		return fmt.Errorf("gpu: occupancy of stream_walk_node2vec: %w", err)
	}
	host := func(n int64) (unsafe.Pointer, error) {
		p, err := e.hostAlloc(n)
		if err == nil {
			sm.hPtrs = append(sm.hPtrs, p)
		}
		return p, err
	}
	if plan.Disk != nil {
		if err := e.setupDisk(sm); err != nil {
			return err
		}
	} else {
		// Mapped, so small batches can read the streamed share in place;
		// copies from mapped pinned memory run as fast as from plain pinned.
		if sm.hEntries, sm.dEntriesMapped, err = e.hostAllocMapped(s.edges * eb); err != nil {
			return fmt.Errorf("gpu: stream entries: %w", err)
		}
		sm.hPtrs = append(sm.hPtrs, sm.hEntries)
		fillStreamEntries(e, sm.hEntries)
	}
	if s.weighted && s.edges > 0 && plan.Disk == nil {
		if sm.hTargets, err = host(s.edges * 4); err != nil {
			return err
		}
		t := unsafe.Slice((*uint32)(sm.hTargets), s.edges)
		walk.ForVertexRanges(g, func(lo, hi int) {
			copy(t[g.Offsets[lo]:g.Offsets[hi]], g.Targets[g.Offsets[lo]:g.Offsets[hi]])
		})
	}
	if e.dOffsets, err = upload(e, "graph.offsets", g.Offsets); err != nil {
		return err
	}
	np := len(plan.Parts)
	bounds := make([]uint32, np+1)
	for i, x := range plan.Parts {
		bounds[i] = uint32(x.VLo)
	}
	bounds[np] = uint32(s.vertices)
	if sm.dBounds, err = upload(e, "stream.bounds", bounds); err != nil {
		return err
	}
	// Resident partitions side by side in one allocation.
	if r := plan.ResidentEdges(); r > 0 {
		if sm.dResident, err = e.alloc("stream.resident", r*eb); err != nil {
			return err
		}
	}
	base := make([]uint64, np)
	var at int64
	for i, x := range plan.Parts {
		if !x.Resident {
			continue
		}
		if x.EHi == x.ELo {
			// Never read (its vertices are dead ends), but not 0, which
			// says "not on the device": its walkers must be collected to
			// finish.
			base[i] = 1
			continue
		}
		n := (x.EHi - x.ELo) * eb
		dst := sm.dResident + cu.DevicePtr(at)
		if plan.Disk != nil {
			err = e.uploadFromDisk(dst, streamFmt{bytes: eb}, x.ELo, x.EHi)
		} else {
			err = e.copyHtoD(dst, unsafe.Add(sm.hEntries, x.ELo*eb), n)
		}
		if err != nil {
			return fmt.Errorf("gpu: upload resident partition %d: %w", i, err)
		}
		base[i] = uint64(dst) - uint64(x.ELo*eb)
		at += n
	}
	if sm.dBase, err = upload(e, "stream.base", base); err != nil {
		return err
	}
	sm.residentBase = append([]uint64(nil), base...)
	if plan.Disk == nil {
		for i, x := range plan.Parts {
			if !x.Resident {
				base[i] = uint64(sm.dEntriesMapped)
			}
		}
		if sm.dBaseMapped, err = upload(e, "stream.base.mapped", base); err != nil {
			return err
		}
	}
	if plan.Streamed() > 0 {
		for b := range sm.dBuf {
			if sm.dBuf[b], err = e.alloc(fmt.Sprintf("stream.buffer%d", b), plan.BufferEdges*eb); err != nil {
				return err
			}
		}
	}
	if sm.copyStream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("gpu: stream: %w", err)
	}
	for b := range sm.copied {
		if sm.copied[b], err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: event: %w", err)
		}
	}
	// One count a partition, one of the walkers waiting for the host's
	// Node2Vec scan, and at countRemaining the 8-byte sum of the steps
	// the walkers have left (streamTail).
	if sm.dCounts, err = e.alloc("stream.counts", (countRemaining+2)*4); err != nil {
		return err
	}
	if sm.dListLen, err = e.alloc("stream.listlen", 8); err != nil {
		return err
	}
	if sm.dParams, err = e.alloc("stream.params", streamParamsSize); err != nil {
		return err
	}
	p, err := host((countRemaining + 2) * 4)
	if err != nil {
		return err
	}
	sm.hCounts = unsafe.Slice((*uint32)(p), countRemaining+2)
	if p, err = host(streamParamsSize); err != nil {
		return err
	}
	sm.hParams = (*streamParams)(p)
	// Every batch streams the partitions again: batches as large as the
	// device allows (WithHostBufferBytes still caps them when larger), in
	// one slot unless WithBatchSlots asked for more: a batch's visits hold
	// the device thread from start to end, so a second slot would not
	// overlap them with anything and only take memory.
	// From disk the host budget sets the pinned result share
	// (DiskStream.ResultBytes), and the rows come back through its
	// window in pieces, so the device's memory sizes the batch; lent
	// chunks are the rows themselves, so with them the share bounds the
	// batch.
	if d := plan.Disk; d != nil {
		e.cfg.hostBufferBytes = d.ResultBytes
		if !e.cfg.lendChunks {
			e.cfg.resultWindowBytes = d.WindowBytes
		}
	} else {
		e.cfg.hostBufferBytes = max(e.cfg.hostBufferBytes, streamHostBufferBytes)
		// The rows come back through a window here too: pinning a whole
		// batch's rows took 10.9 s for 16.8 M 80-step walks (5.7 GB, H200
		// host) against a walk of 1.0 s; so chunks are copied out of the
		// window rather than lent.
		if e.cfg.resultWindowBytes == 0 {
			e.cfg.resultWindowBytes = maxResultWindow
			e.cfg.lendChunks = false
		}
	}
	if !e.cfg.batchSlotsSet {
		e.slots = e.slots[:1]
	}
	e.graphBytes = plan.DeviceBytes()
	e.tableBuild += time.Since(t0)
	e.cfg.logger.Info("gpu stream plan: the graph's arrays exceed the device budget (or streaming was asked for); partitions are streamed to the walkers",
		"plan", plan.String(), "partitions", np, "resident", np-plan.Streamed(), "device_share", plan.DeviceShare(),
		"device_bytes", plan.DeviceBytes(), "host_bytes", plan.HostBytes, "build", time.Since(t0))
	if d := plan.Disk; d != nil {
		e.cfg.logger.Info("gpu stream from disk: the pinned host arrays exceed half the host memory budget; partitions are read from the graph file into a ring of pinned buffers",
			"graph_file", d.File, "host_budget_bytes", d.HostBudget, "ring_buffers", d.RingBuffers, "ring_bytes", d.RingBytes(),
			"result_bytes", d.ResultBytes, "result_window_bytes", e.cfg.resultWindowBytes,
			"direct", sm.disk.targets.Direct(), "entries_file", d.Entries, "entries_build", sm.disk.entryBuild,
			"entries_bytes_read", sm.disk.entryRead)
	}
	return nil
}

// fillStreamEntries writes every edge's stream entry into dst: the target,
// or for a weighted graph {prob, keep, alt} of its alias column, built as
// walk.BuildAlias builds it, on all cores.
func fillStreamEntries(e *Engine, dst unsafe.Pointer) {
	g := e.g
	E := g.NumEdges()
	if E == 0 {
		return
	}
	if !g.Weighted() {
		t := unsafe.Slice((*uint32)(dst), E)
		walk.ForVertexRanges(g, func(lo, hi int) {
			copy(t[g.Offsets[lo]:g.Offsets[hi]], g.Targets[g.Offsets[lo]:g.Offsets[hi]])
		})
		return
	}
	ent := unsafe.Slice((*uint32)(dst), 3*E)
	walk.ForAliasVertices(g, func(_ int, first uint64, adj []uint32, prob []float32, col []uint32) {
		putStreamEntries(ent[3*first:3*(first+uint64(len(adj)))], adj, prob, col)
	})
}

// ensureWalkers sizes the walker arrays for n walkers (device thread). One
// set serves every slot: a batch's visits run start to end inside one
// device-thread call.
func (sm *streamed) ensureWalkers(e *Engine, n int64, n2v bool) error {
	if n2v && sm.capN2V < n {
		sm.freeN2V(e)
		for _, a := range []struct {
			p    *cu.DevicePtr
			name string
		}{{&sm.dWPrev, "stream.wprev"}, {&sm.dWPhase, "stream.wphase"}, {&sm.dWCand, "stream.wcand"}} {
			var err error
			if *a.p, err = e.alloc(a.name, n*4); err != nil {
				sm.freeN2V(e)
				return err
			}
		}
		sm.capN2V = n
	}
	if n2v && sm.dScan == 0 {
		var err error
		if sm.dScan, err = e.alloc("stream.scan", n2vScanCap*n2vScanWords*4); err != nil {
			return err
		}
		p, err := e.hostAlloc(n2vScanCap * n2vScanWords * 4)
		if err != nil {
			return err
		}
		sm.hPtrs = append(sm.hPtrs, p)
		sm.hScan = unsafe.Slice((*uint32)(p), n2vScanCap*n2vScanWords)
	}
	if sm.capWalkers >= n {
		return nil
	}
	sm.freeWalkers(e)
	var err error
	for _, a := range []struct {
		p    *cu.DevicePtr
		name string
	}{{&sm.dWV, "stream.wv"}, {&sm.dWStep, "stream.wstep"}, {&sm.dList, "stream.list"}} {
		if *a.p, err = e.alloc(a.name, n*4); err != nil {
			sm.freeWalkers(e)
			return err
		}
	}
	sm.capWalkers = n
	return nil
}

func (sm *streamed) freeWalkers(e *Engine) {
	e.free("stream.wv", &sm.dWV)
	e.free("stream.wstep", &sm.dWStep)
	e.free("stream.list", &sm.dList)
	sm.capWalkers = 0
}

func (sm *streamed) freeN2V(e *Engine) {
	e.free("stream.wprev", &sm.dWPrev)
	e.free("stream.wphase", &sm.dWPhase)
	e.free("stream.wcand", &sm.dWCand)
	sm.capN2V = 0
}

// walkStreamed walks slot s's batch of n tasks (already copied in, lengths
// zeroed) under the stream plan, visit by visit, on s's stream; the
// partitions go in on the copy stream. Each visit: count the waiting
// walkers per partition (the one synchronisation), pick the streamed
// partition with the most (chooseStreamed), have it copied in unless a
// buffer holds it, start copying the next busiest into the other buffer,
// then list the walkers the visit can move and walk them (device thread).
func (e *Engine) walkStreamed(s *batchSlot, alg walk.Algorithm, wp *walkParams, n int64, inPlace bool) error {
	sm := e.streamed
	n2v := alg.Kind == walk.Node2Vec
	if err := sm.ensureWalkers(e, n, n2v); err != nil {
		return err
	}
	pl := sm.plan
	parts := pl.Parts
	np := len(parts)
	eb := pl.EntryBytes
	mode := uint64(0)
	if e.g.Weighted() {
		mode |= streamEntries
	}
	if alg.ResolvedStepper() == walk.StepperAlias {
		mode |= streamAlias
	}
	if alg.Kind == walk.PPR {
		mode |= streamPPR
	}
	if n2v && alg.Weighted {
		// Proposals from the static bias: the alias entries.
		mode |= streamAlias
	}
	meta := alg.Kind == walk.MetaPath
	// es: the bytes per edge this batch would stream, from src.
	es, src := eb, sm.hEntries
	switch {
	case meta:
		// The label layout, alias entries whenever the graph is weighted
		// (a uniform MetaPath walk reads their keep word, the segment's
		// target, as the label tables' unweighted walk reads it).
		if err := e.ensureStreamLabels(); err != nil {
			return err
		}
		mode |= streamMetaPath
		if alg.Weighted {
			mode |= streamAlias
		}
		src = sm.lab.hEntries // nil from disk: the label entries file
	case e.g.Weighted() && mode&streamAlias == 0:
		es, src = 4, sm.hTargets // nil from disk: the targets section
	}
	if err := e.streamResident(meta); err != nil {
		return err
	}
	format := streamFmt{bytes: es, labels: meta}
	// From disk there is nothing on the host to read in place.
	inPlace = inPlace && pl.Streamed() > 0 && sm.disk == nil
	base, mapped := sm.dBase, sm.dBaseMapped
	if meta {
		mapped = sm.lab.dBaseMapped
	}
	// tail: a copying batch may read its last walkers' steps in place
	// (streamTail), when the host holds the partitions (not from disk).
	tail := !inPlace && pl.Streamed() > 0 && sm.disk == nil && mapped != 0 && e.cfg.streamBatch != streamCopy
	forceTail := tail && e.cfg.streamBatch == streamCopyTail
	copiesBefore := sm.stats.Copies
	reads := hostReads(alg)
	if inPlace {
		// One visit: every partition is on a side (resident, or mapped
		// host memory read in place), so every walker runs to its end.
		base = mapped
		sm.stats.InPlaceBatches++
	} else {
		sm.stats.Batches++
	}
	*sm.hParams = streamParams{offsets: uint64(e.dOffsets), bounds: uint64(sm.dBounds), base: uint64(base),
		tasks: uint64(s.dTasks), seeds: uint64(s.dSeeds), result: uint64(s.dResult), lengths: uint64(s.dLengths),
		wv: uint64(sm.dWV), wstep: uint64(sm.dWStep), list: uint64(sm.dList), listLen: uint64(sm.dListLen),
		counts: uint64(sm.dCounts), nparts: uint64(np), n: uint64(n), stride: wp.stride, length: wp.length,
		mode: mode, stopThreshold: wp.stopThreshold}
	if meta {
		sm.hParams.segEnds, sm.hParams.numLabels = uint64(sm.lab.dSegEnds), uint64(pl.Labels)
		sm.hParams.schemaLen, sm.hParams.schema = wp.schemaLen, wp.schema
	}
	fnWalk, occ := sm.fnWalk, sm.occWalk
	if n2v {
		sm.hParams.mode |= streamNode2Vec
		sm.hParams.wprev, sm.hParams.wphase, sm.hParams.wcand = uint64(sm.dWPrev), uint64(sm.dWPhase), uint64(sm.dWCand)
		sm.hParams.accept = wp.accept
		fnWalk, occ = sm.fnWalkN2V, sm.occWalkN2V
	}
	st := s.stream
	// The parameters are copied synchronously: the pinned block is
	// rewritten by the next batch.
	if err := e.copyHtoD(sm.dParams, unsafe.Pointer(sm.hParams), streamParamsSize); err != nil {
		return fmt.Errorf("gpu: copy stream params: %w", err)
	}
	args := []uint64{uint64(sm.dParams)}
	countArgs := []uint64{uint64(sm.dParams), 0}
	if tail {
		countArgs[1] = uint64(sm.dCounts) + countRemaining*4
	}
	hRemaining := (*uint64)(unsafe.Pointer(&sm.hCounts[countRemaining]))
	scan := int(min(int64(e.numSM*8), (n+streamBlock-1)/streamBlock))
	if err := launch(sm.fnInit, scan, streamBlock, st, args); err != nil {
		return fmt.Errorf("gpu: stream_init: %w", err)
	}
	for b := range sm.loaded {
		if sm.loadedFmt[b] != format {
			sm.loaded[b] = -1 // another format: of no use to this batch
		}
	}
	counts := sm.hCounts[:np]
	load := func(p, b int) error {
		x := parts[p]
		from, ring := unsafe.Pointer(nil), -1
		if sm.disk != nil {
			var err error
			if ring, from, err = sm.partition(p, format, counts); err != nil {
				return err
			}
		} else {
			from = unsafe.Add(src, x.ELo*es)
		}
		if err := e.copyHtoDAsync(sm.dBuf[b], from, (x.EHi-x.ELo)*es, sm.copyStream); err != nil {
			return fmt.Errorf("gpu: copy partition %d: %w", p, err)
		}
		if err := sm.copied[b].Record(sm.copyStream); err != nil {
			return fmt.Errorf("gpu: record partition copy: %w", err)
		}
		if ring >= 0 {
			// The ring buffer is read into again only after this copy.
			if err := sm.disk.ring[ring].done.Record(sm.copyStream); err != nil {
				return fmt.Errorf("gpu: record partition copy: %w", err)
			}
			sm.disk.ring[ring].busy = true
		}
		sm.loaded[b], sm.loadedFmt[b] = p, format
		sm.stats.Copies++
		sm.stats.BytesCopied += (x.EHi - x.ELo) * es
		return nil
	}
	for {
		if err := cu.MemsetD32Async(sm.dCounts, 0, int64(np)+1, st); err != nil {
			return fmt.Errorf("gpu: clear counts: %w", err)
		}
		if tail {
			if err := cu.MemsetD32Async(cu.DevicePtr(countArgs[1]), 0, 2, st); err != nil {
				return fmt.Errorf("gpu: clear counts: %w", err)
			}
		}
		if err := launch(sm.fnCount, scan, streamBlock, st, countArgs); err != nil {
			return fmt.Errorf("gpu: stream_count: %w", err)
		}
		if err := e.copyDtoHAsync(unsafe.Pointer(&counts[0]), sm.dCounts, int64(np+1)*4, st); err != nil {
			return fmt.Errorf("gpu: copy counts: %w", err)
		}
		if tail {
			if err := e.copyDtoHAsync(unsafe.Pointer(hRemaining), cu.DevicePtr(countArgs[1]), 8, st); err != nil {
				return fmt.Errorf("gpu: copy counts: %w", err)
			}
		}
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("gpu: stream visit: %w", err)
		}
		if sm.hCounts[np] > 0 {
			// Node2Vec walkers past MaxRejections: the host scans them,
			// then the walkers are counted again where they moved.
			if err := e.streamScans(s, wp, n); err != nil {
				return err
			}
			continue
		}
		var waiting uint64
		for _, c := range counts {
			waiting += uint64(c)
		}
		if waiting == 0 {
			break
		}
		if tail && (forceTail && sm.stats.Copies > copiesBefore || !forceTail && streamTail(pl, counts, sm.loaded, *hRemaining, es, eb, reads)) {
			// The rest in place: one more visit moves every walker to
			// its end. s's stream was synchronised above, so no kernel
			// reads the parameters.
			sm.hParams.base = uint64(mapped)
			if err := e.copyHtoD(sm.dParams, unsafe.Pointer(sm.hParams), streamParamsSize); err != nil {
				return fmt.Errorf("gpu: copy stream params: %w", err)
			}
			inPlace, tail = true, false
			countArgs[1] = 0
			sm.stats.Tails++
		}
		cur, curBase := uint64(noPart), uint64(0)
		next, nextBuf := -1, -1
		// p < 0: every waiting walker is in a resident partition (or
		// the batch reads the streamed ones in place).
		if p := chooseStreamed(parts, counts, sm.loaded, -1); p >= 0 && !inPlace {
			b := -1
			for k, q := range sm.loaded {
				if q == p {
					b = k
				}
			}
			if b < 0 {
				b = streamVictim(counts, sm.loaded)
				if err := load(p, b); err != nil {
					return err
				}
			}
			if err := st.Wait(sm.copied[b], 0); err != nil {
				return fmt.Errorf("gpu: wait for partition copy: %w", err)
			}
			cur, curBase = uint64(p), uint64(sm.dBuf[b])-uint64(parts[p].ELo*es)
			// Overlap: the next busiest partition goes into the other
			// buffer while this one is walked, unless that buffer holds
			// a busier one already. s's stream was synchronised above,
			// so no kernel reads it. It is loaded after the walk's
			// launch, so a read from disk runs while the kernel walks.
			o := 1 - b
			if q := chooseStreamed(parts, counts, sm.loaded, p); q >= 0 && q != sm.loaded[o] &&
				(sm.loaded[o] < 0 || counts[sm.loaded[o]] < counts[q]) {
				next, nextBuf = q, o
			}
		}
		if err := cu.MemsetD32Async(sm.dListLen, 0, 2, st); err != nil {
			return fmt.Errorf("gpu: clear list: %w", err)
		}
		if err := launch(sm.fnCollect, scan, streamBlock, st, []uint64{uint64(sm.dParams), cur}); err != nil {
			return fmt.Errorf("gpu: stream_collect: %w", err)
		}
		if err := launch(fnWalk, e.numSM*max(occ, 1), streamBlock, st, []uint64{uint64(sm.dParams), cur, curBase, uint64(es)}); err != nil {
			return fmt.Errorf("gpu: stream_walk: %w", err)
		}
		sm.stats.Visits++
		sm.stats.Walkers += int64(visitWalkers(parts, counts, cur))
		if next >= 0 {
			if err := load(next, nextBuf); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamScans runs the host's exact scan (walk.Node2VecScan) for the
// Node2Vec walkers that rejected walk.MaxRejections proposals, at most
// n2vScanCap of them (the others wait for the next round), and takes
// their steps on the device (device thread, on s's stream).
func (e *Engine) streamScans(s *batchSlot, wp *walkParams, n int64) error {
	sm := e.streamed
	st := s.stream
	np := len(sm.plan.Parts)
	if err := cu.MemsetD32Async(sm.dListLen, 0, 1, st); err != nil {
		return fmt.Errorf("gpu: clear scan count: %w", err)
	}
	grid := int(min(int64(e.numSM*8), (n+streamBlock-1)/streamBlock))
	if err := launch(sm.fnScanList, grid, streamBlock, st, []uint64{uint64(sm.dParams), uint64(sm.dScan), n2vScanCap, uint64(sm.dListLen)}); err != nil {
		return fmt.Errorf("gpu: stream_scan_list: %w", err)
	}
	if err := e.copyDtoHAsync(unsafe.Pointer(&sm.hCounts[np]), sm.dListLen, 4, st); err != nil {
		return fmt.Errorf("gpu: copy scan count: %w", err)
	}
	if err := st.Synchronize(); err != nil {
		return fmt.Errorf("gpu: node2vec scans: %w", err)
	}
	m := int64(min(sm.hCounts[np], n2vScanCap))
	if m == 0 {
		return fmt.Errorf("gpu: node2vec scans: %d walkers counted waiting for the host's scan, none listed", sm.hCounts[np])
	}
	recs := sm.hScan[:m*n2vScanWords]
	if err := e.copyDtoHAsync(unsafe.Pointer(&recs[0]), sm.dScan, m*n2vScanWords*4, st); err != nil {
		return fmt.Errorf("gpu: copy scan records: %w", err)
	}
	if err := st.Synchronize(); err != nil {
		return fmt.Errorf("gpu: node2vec scans: %w", err)
	}
	adj := e.n2vAdjacency(wp.weighted != 0)
	if sm.disk != nil {
		var err error
		if adj, err = sm.disk.n2vAdjacency(e.g, wp.weighted != 0); err != nil {
			return err
		}
	}
	// The records are cut among the cores; a vertex's scan costs its
	// degree (and a search of u's adjacency per edge).
	workers := int64(max(runtime.GOMAXPROCS(0), 1))
	per := (m + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := int64(0); w*per < m; w++ {
		lo, hi := w*per, min((w+1)*per, m)
		wg.Go(func() {
			for k := lo; k < hi; k++ {
				r := recs[k*n2vScanWords : (k+1)*n2vScanWords]
				id := uint64(r[4]) | uint64(r[5])<<32
				x, err := walk.Node2VecScan(adj, wp.bias, s.hSeeds[r[6]], id, r[3], r[1], r[2])
				if err != nil {
					errs[w] = err
					return
				}
				r[7] = x
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("gpu: node2vec scan on the host: %w", err)
		}
	}
	if err := e.copyHtoDAsync(sm.dScan, unsafe.Pointer(&recs[0]), m*n2vScanWords*4, st); err != nil {
		return fmt.Errorf("gpu: copy scan records back: %w", err)
	}
	if err := launch(sm.fnScanApply, int(min(int64(e.numSM*8), (m+streamBlock-1)/streamBlock)), streamBlock, st,
		[]uint64{uint64(sm.dParams), uint64(sm.dScan), uint64(m)}); err != nil {
		return fmt.Errorf("gpu: stream_scan_apply: %w", err)
	}
	sm.stats.Scans += m
	return nil
}

// n2vAdjacency is where the host's scans read a vertex's targets and
// weights (weighted: the walk is): the graph in memory (a disk plan reads
// its file instead: diskState.n2vAdjacency).
func (e *Engine) n2vAdjacency(weighted bool) walk.Adjacency {
	g := e.g
	return func(v uint32) ([]uint32, []float32, error) {
		a, b := g.Offsets[v], g.Offsets[v+1]
		if !weighted {
			return g.Targets[a:b], nil, nil
		}
		return g.Targets[a:b], g.Weights[a:b], nil
	}
}

// ensureStreamLabels builds the label layout at the first MetaPath batch
// (device thread): pinned and mapped entries filled from the graph in
// memory, or from disk a label entries file built from the graph file's
// sections; then the segment ends go to the device, into the share the
// plan kept for them.
func (e *Engine) ensureStreamLabels() error {
	sm := e.streamed
	if sm.lab != nil {
		return nil
	}
	t0 := time.Now()
	g, pl := e.g, sm.plan
	nl, eb, E := pl.Labels, pl.EntryBytes, g.NumEdges()
	lab := &streamLabelLayout{}
	var ends []uint32
	var read int64
	if ds := sm.disk; ds != nil {
		f, fe, n, err := buildEntriesFile(context.Background(), g, entriesDir(pl.Disk.File), nl)
		if err != nil {
			return err
		}
		ds.labelsF, ends, read = f, fe, n
		if err := f.Sync(); err != nil {
			return fmt.Errorf("gpu: stream label entries file: %w", err)
		}
		// The file is unlinked: open its descriptor again, for O_DIRECT.
		if ds.labels, err = openDiskReader(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), true); err != nil {
			return err
		}
	} else {
		if n := E * eb; n > hostAvailable() {
			return fmt.Errorf("gpu: stream plan of graph %s: metapath's label layout needs %s of pinned host memory, the host has %s available", g.Name, sizeString(n), sizeString(hostAvailable()))
		}
		var err error
		if lab.hEntries, lab.dEntriesMapped, err = e.hostAllocMapped(E * eb); err != nil {
			return fmt.Errorf("gpu: stream label entries: %w", err)
		}
		sm.hPtrs = append(sm.hPtrs, lab.hEntries)
		ends = make([]uint32, int64(g.NumVertices())*int64(max(nl-1, 0)))
		fillLabelEntries(g, nl, unsafe.Slice((*uint32)(lab.hEntries), E*eb/4), ends)
		base := append([]uint64(nil), sm.residentBase...)
		for i, x := range pl.Parts {
			if !x.Resident {
				base[i] = uint64(lab.dEntriesMapped)
			}
		}
		if lab.dBaseMapped, err = upload(e, "stream.base.labels", base); err != nil {
			return err
		}
	}
	if len(ends) > 0 {
		var err error
		if lab.dSegEnds, err = upload(e, "stream.labels", ends); err != nil {
			return err
		}
	}
	sm.lab = lab
	e.cfg.logger.Info("gpu stream label layout built: metapath walks the partitions regrouped by label",
		"graph", g.Name, "labels", nl, "from_disk", sm.disk != nil, "bytes_read", read, "duration", time.Since(t0))
	return nil
}

// streamResident has the resident partitions hold the label layout
// (labels) or the plain one, copying them again from the host (or the
// disk) when they hold the other: a run of MetaPath batches after other
// batches pays one copy of the resident share, not one a batch (device
// thread; no kernel reads them now: every batch's visits end before the
// next batch's start).
func (e *Engine) streamResident(labels bool) error {
	sm := e.streamed
	if sm.residentLabels == labels && !sm.residentTorn {
		return nil
	}
	pl := sm.plan
	eb := pl.EntryBytes
	src := sm.hEntries
	if labels {
		src = sm.lab.hEntries
	}
	for i, x := range pl.Parts {
		if !x.Resident || x.EHi == x.ELo {
			continue
		}
		dst := cu.DevicePtr(sm.residentBase[i] + uint64(x.ELo*eb))
		var err error
		if sm.disk != nil {
			err = e.uploadFromDisk(dst, streamFmt{bytes: eb, labels: labels}, x.ELo, x.EHi)
		} else {
			err = e.copyHtoD(dst, unsafe.Add(src, x.ELo*eb), (x.EHi-x.ELo)*eb)
		}
		if err != nil {
			sm.residentTorn = true
			return fmt.Errorf("gpu: copy resident partition %d in the other layout (label layout: %v): %w", i, labels, err)
		}
		sm.stats.BytesCopied += (x.EHi - x.ELo) * eb
	}
	sm.residentLabels, sm.residentTorn = labels, false
	sm.stats.ResidentSwaps++
	return nil
}

// releaseStreamed frees the stream plan's memory (device thread).
func (e *Engine) releaseStreamed() {
	sm := e.streamed
	if sm == nil {
		return
	}
	if sm.copyStream != (cu.Stream{}) {
		_ = sm.copyStream.Synchronize()
		_ = sm.copyStream.Destroy()
		sm.copyStream = cu.Stream{}
	}
	for b := range sm.copied {
		if sm.copied[b] != (cu.Event{}) {
			_ = cu.DestroyEvent(&sm.copied[b])
		}
		e.free(fmt.Sprintf("stream.buffer%d", b), &sm.dBuf[b])
	}
	sm.freeWalkers(e)
	sm.freeN2V(e)
	e.free("stream.scan", &sm.dScan)
	if sm.lab != nil {
		e.free("stream.labels", &sm.lab.dSegEnds)
		e.free("stream.base.labels", &sm.lab.dBaseMapped)
	}
	for name, p := range map[string]*cu.DevicePtr{"stream.bounds": &sm.dBounds, "stream.base": &sm.dBase, "stream.base.mapped": &sm.dBaseMapped,
		"stream.resident": &sm.dResident, "stream.counts": &sm.dCounts, "stream.listlen": &sm.dListLen, "stream.params": &sm.dParams} {
		e.free(name, p)
	}
	sm.releaseDisk()
	for _, p := range sm.hPtrs {
		e.hostFree(p)
	}
	sm.hPtrs = nil
}

var _ Streamer = (*Engine)(nil)

// StreamPlan implements Streamer: the engine's stream plan, nil when it
// does not stream.
func (e *Engine) StreamPlan() *StreamPlan {
	if e.streamed == nil {
		return nil
	}
	p := *e.streamed.plan
	return &p
}

// StreamStats implements Streamer: what streaming did in the last Run.
func (e *Engine) StreamStats() StreamStats {
	e.lastMu.Lock()
	defer e.lastMu.Unlock()
	return e.lastStream
}
