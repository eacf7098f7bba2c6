//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/directio"
	"github.com/walkstage/walkstage/walk"

	"gorgonia.org/cu"
)

// diskState is a stream plan's disk side (streamdisk.go): the readers of
// the graph's targets section and of the entries file, and the ring of
// pinned buffers partitions are read into and copied from.
type diskState struct {
	targets    *directio.File
	targetsOff int64 // the targets section's offset in the .wsg
	weightsOff int64 // the weights section's (Node2Vec's host scans)
	// graphF reads the .wsg buffered for Node2Vec's host scans (two
	// adjacencies a scan: too small for direct reads), opened at the first.
	graphF     *os.File
	entries    *directio.File // a weighted graph's alias entries; nil otherwise
	entriesF   *os.File
	entryBuild time.Duration
	entryRead  int64 // bytes the entries file's build read
	// labels reads the label layout's entries file (streamlabels.go),
	// built at the first MetaPath batch; nil before.
	labels  *directio.File
	labelsF *os.File
	ring    []ringBuf
}

// ringBuf is one pinned read buffer and what it holds: partition part in
// format fm, starting at, -1 when empty. done is
// recorded after the last copy out of it; busy says one may be in flight,
// so a read into it waits for done first.
type ringBuf struct {
	h    unsafe.Pointer
	size int64
	part int
	fm   streamFmt
	at   int64
	done cu.Event
	busy bool
}

// setupDisk opens the readers, builds the entries file of a weighted
// graph and pins the ring (device thread).
func (e *Engine) setupDisk(sm *streamed) error {
	d := sm.plan.Disk
	sec, err := graphSections(e.g)
	if err != nil {
		return err
	}
	ds := &diskState{targetsOff: sec.targets, weightsOff: sec.weights}
	sm.disk = ds
	if ds.targets, err = openDiskReader(d.File, true); err != nil {
		return err
	}
	if d.Entries && e.g.NumEdges() > 0 {
		t0 := time.Now()
		// Built once, before any walk: engines are built at start,
		// with no context to cancel (engines.New).
		if ds.entriesF, _, ds.entryRead, err = buildEntriesFile(context.Background(), e.g, entriesDir(d.File), 0); err != nil {
			return err
		}
		ds.entryBuild = time.Since(t0)
		// The file is unlinked: open its descriptor again, for O_DIRECT.
		if ds.entries, err = openDiskReader(fmt.Sprintf("/proc/self/fd/%d", ds.entriesF.Fd()), true); err != nil {
			return err
		}
		if err := ds.entriesF.Sync(); err != nil {
			return fmt.Errorf("gpu: stream entries file: %w", err)
		}
	}
	ds.ring = make([]ringBuf, d.RingBuffers)
	for i := range ds.ring {
		r := &ds.ring[i]
		r.part, r.size = -1, d.BufferBytes
		if r.h, err = e.hostAlloc(d.BufferBytes); err != nil {
			return fmt.Errorf("gpu: stream ring buffer %d of %d (%s each): %w", i, d.RingBuffers, sizeString(d.BufferBytes), err)
		}
		sm.hPtrs = append(sm.hPtrs, r.h)
		if r.done, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: event: %w", err)
		}
	}
	return nil
}

// source is the reader and file offset of edge lo's entry in format fm:
// the label entries file, the targets section (4 bytes an edge) or the
// entries file (12).
func (ds *diskState) source(fm streamFmt, lo int64) (*directio.File, int64) {
	switch {
	case fm.labels:
		return ds.labels, fm.bytes * lo
	case fm.bytes == 4:
		return ds.targets, ds.targetsOff + 4*lo
	}
	return ds.entries, entriesFileBytes * lo
}

// fill reads edges [lo, hi) in format fm into ring buffer i (which must
// hold them), after any copy out of it finished, and returns where they
// start.
func (ds *diskState) fill(i int, fm streamFmt, lo, hi int64) (unsafe.Pointer, error) {
	r := &ds.ring[i]
	if r.busy {
		if err := r.done.Synchronize(); err != nil {
			return nil, fmt.Errorf("gpu: wait for a ring buffer's copy: %w", err)
		}
		r.busy = false
	}
	rd, off := ds.source(fm, lo)
	// The batch's visits hold the device thread to their end, as its
	// kernels do; a read is not cancelled halfway.
	at, err := rd.ReadRange(context.Background(), unsafe.Slice((*byte)(r.h), r.size), off, (hi-lo)*fm.bytes)
	if err != nil {
		r.part = -1
		return nil, err
	}
	r.at = at
	return unsafe.Add(r.h, at), nil
}

// partition is partition p's entries in format fm in a ring buffer: the
// buffer that holds them already (a hit), else one read now into the
// victim (ringVictim by the waiting walkers in counts).
func (sm *streamed) partition(p int, fm streamFmt, counts []uint32) (int, unsafe.Pointer, error) {
	ds := sm.disk
	held := make([]int, len(ds.ring))
	for i, r := range ds.ring {
		held[i] = r.part
		if r.fm != fm {
			held[i] = -1 // another format: of no use, free to take
		}
		if r.part == p && r.fm == fm {
			sm.stats.RingHits++
			return i, unsafe.Add(r.h, r.at), nil
		}
	}
	i := ringVictim(held, counts)
	x := sm.plan.Parts[p]
	ptr, err := ds.fill(i, fm, x.ELo, x.EHi)
	if err != nil {
		return 0, nil, fmt.Errorf("gpu: read partition %d: %w", p, err)
	}
	ds.ring[i].part, ds.ring[i].fm = p, fm
	return i, ptr, nil
}

// uploadFromDisk copies edges [lo, hi) in format fm to the device at dst
// through ring buffer 0, in pieces the buffer holds (the resident
// partitions: at setup, and when their layout is swapped).
func (e *Engine) uploadFromDisk(dst cu.DevicePtr, fm streamFmt, lo, hi int64) error {
	ds := e.streamed.disk
	eb := fm.bytes
	per := max((ds.ring[0].size-2*directio.Align)/eb, 1)
	for a := lo; a < hi; a += per {
		b := min(a+per, hi)
		ptr, err := ds.fill(0, fm, a, b)
		if err != nil {
			return err
		}
		if err := e.copyHtoD(dst+cu.DevicePtr((a-lo)*eb), ptr, (b-a)*eb); err != nil {
			return err
		}
	}
	ds.ring[0].part = -1
	return nil
}

// releaseDisk closes the readers and the entries file and destroys the
// ring's events; the ring's pinned memory is in hPtrs (device thread).
func (sm *streamed) releaseDisk() {
	ds := sm.disk
	if ds == nil {
		return
	}
	for i := range ds.ring {
		if ds.ring[i].done != (cu.Event{}) {
			_ = ds.ring[i].done.Synchronize()
			_ = cu.DestroyEvent(&ds.ring[i].done)
		}
	}
	for _, r := range []*directio.File{ds.targets, ds.entries, ds.labels} {
		if r != nil {
			_ = r.Close()
		}
	}
	for _, f := range []*os.File{ds.entriesF, ds.labelsF, ds.graphF} {
		if f != nil {
			_ = f.Close()
		}
	}
	sm.disk = nil
}

// n2vAdjacency is where Node2Vec's host scans read a vertex's targets and
// weights (weighted: the walk is) under a disk plan: preads of the graph
// file's sections, never its mapping (device thread, before the scans).
func (ds *diskState) n2vAdjacency(g *graph.Graph, weighted bool) (walk.Adjacency, error) {
	if ds.graphF == nil {
		f, err := os.Open(g.File())
		if err != nil {
			return nil, fmt.Errorf("gpu: node2vec scans from disk: %w", err)
		}
		ds.graphF = f
	}
	f := ds.graphF
	return func(v uint32) ([]uint32, []float32, error) {
		a, b := int64(g.Offsets[v]), int64(g.Offsets[v+1])
		tg := make([]uint32, b-a)
		if _, err := f.ReadAt(bytesOf(tg), ds.targetsOff+4*a); err != nil {
			return nil, nil, fmt.Errorf("read the targets of vertex %d from %s: %w", v, f.Name(), err)
		}
		if !weighted {
			return tg, nil, nil
		}
		w := make([]float32, b-a)
		if _, err := f.ReadAt(bytesOf(w), ds.weightsOff+4*a); err != nil {
			return nil, nil, fmt.Errorf("read the weights of vertex %d from %s: %w", v, f.Name(), err)
		}
		return tg, w, nil
	}, nil
}

// diskStats adds the readers' counters to the run's stats (they count
// from the engine's start: the difference since the last run).
func (sm *streamed) diskStats() {
	ds := sm.disk
	if ds == nil {
		return
	}
	var reads, bytes, nanos int64
	for _, r := range []*directio.File{ds.targets, ds.entries, ds.labels} {
		if r != nil {
			reads += r.Reads()
			bytes += r.Bytes()
			nanos += r.Nanos()
		}
	}
	sm.stats.Reads, sm.stats.BytesRead = reads-sm.base[0], bytes-sm.base[1]
	sm.stats.ReadSeconds = float64(nanos-sm.base[2]) / 1e9
	sm.base = [3]int64{reads, bytes, nanos}
	sm.stats.Direct = ds.targets.Direct() && (ds.entries == nil || ds.entries.Direct()) && (ds.labels == nil || ds.labels.Direct())
}
