//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// The device side of the partition split (walk/hybrid's PartSplit, issue
// 35): the alias entries of the device's partitions, and nothing of the
// CPU's, stay on the device, with the job's rows. A batch of walkers handed
// over by the CPU side is copied in (16 bytes a walker), each walker
// stepped on the device while its vertex is the device's
// (kernels/partsplit.cuh), writing the vertices it reaches into the
// device rows, and the walkers copied back (16 bytes each) to be handed
// on. At the job's end the device rows come back in one copy and the host
// merges them with the CPU's (walk.HandoverRows.Device). Draws are
// walk/draws.go's, so the walks are the CPU engine's.

// maxPartSplitParts bounds the partitions (kMaxPartSplitParts: their
// bounds and bases are copied to shared memory).
const maxPartSplitParts = 1024

// partCallWalkers bounds the walkers of one kernel call, so the pinned
// walker buffer stays bounded (16 bytes a walker) however many are queued.
const partCallWalkers = 1 << 22

// partHostBase is the base of a partition the CPU walks (kPartHost): a
// device partition's base is its first entry less its first global edge,
// often negative.
const partHostBase = math.MinInt64

// partEntry mirrors ws::PartEntry.
type partEntry struct {
	prob      float32
	keep, alt uint32
}

// PartDevice holds a graph's device partitions for the partition split.
type PartDevice struct {
	g        *graph.Graph
	dev      *device
	mod      cu.Module
	fn       cu.Function
	numSM    int
	set      walk.VertexSet
	nparts   int
	edges    int64 // device edges
	dOffsets cu.DevicePtr
	dBounds  cu.DevicePtr
	dBase    cu.DevicePtr
	dEntries cu.DevicePtr
	// Per-call buffers (device and pinned host), grown to the largest
	// call; one call at a time (mu).
	mu       sync.Mutex
	capW     int
	dWalkers cu.DevicePtr
	hWalkers unsafe.Pointer
	// The job's rows on the device and their pinned host copy, grown to
	// the largest job (capRows uint32 each).
	capRows int64
	dRows   cu.DevicePtr
	hRows   unsafe.Pointer
	// Host workers that sort the walkers a call returns.
	scatter int
	stats   PartDeviceStats
}

// PartDeviceStats is what the device side did since it was built.
type PartDeviceStats struct {
	Calls, Walkers, Steps int64
	Kernel, Copy, Host    time.Duration
	BytesIn, BytesOut     int64
	// Rows is the time of the jobs' row copies back (Finish), bytes in
	// RowBytes.
	Rows     time.Duration
	RowBytes int64
}

// NewPartDevice puts the alias entries of g's partitions [bounds[i],
// bounds[i+1]) with device[i] set on device ordinal, with g's offsets.
// scatter is the host goroutines that sort the walkers a call returns
// (0: 4).
func NewPartDevice(g *graph.Graph, bounds []uint32, device []bool, ordinal, scatter int) (*PartDevice, error) {
	np := len(device)
	if np < 1 || np > maxPartSplitParts || len(bounds) != np+1 {
		return nil, fmt.Errorf("gpu: partition split of %d partitions (%d bounds): want 1 to %d", np, len(bounds), maxPartSplitParts)
	}
	if scatter <= 0 {
		scatter = 4
	}
	p := &PartDevice{g: g, nparts: np, set: walk.NewVertexSet(g.NumVertices()), scatter: scatter}
	base := make([]int64, np)
	var n int64
	for i, d := range device {
		base[i] = partHostBase
		if d {
			lo := int64(g.Offsets[bounds[i]])
			base[i] = n - lo
			n += int64(g.Offsets[bounds[i+1]]) - lo
			p.set.AddRange(bounds[i], bounds[i+1])
		}
	}
	p.edges = n
	// The device partitions' entries, as the CPU engine's packed table
	// holds them (walk.BuildAlias: the same tables).
	ent := make([]partEntry, max(n, 1))
	var prob []float32
	var alias []uint32
	if g.Weighted() {
		prob, alias = walk.BuildAlias(g)
	}
	for i, d := range device {
		if !d {
			continue
		}
		for v := bounds[i]; v < bounds[i+1]; v++ {
			a, b := g.Offsets[v], g.Offsets[v+1]
			for e := a; e < b; e++ {
				x := &ent[int64(e)+base[i]]
				x.keep = g.Targets[e]
				x.alt, x.prob = x.keep, 1
				if prob != nil {
					x.prob, x.alt = prob[e], g.Targets[a+uint64(alias[e])]
				}
			}
		}
	}
	dev, err := openDevice(ordinal)
	if err != nil {
		return nil, err
	}
	p.dev = dev
	err = dev.do(func() error {
		var err error
		if p.mod, err = cu.LoadData(kernelImage); err != nil {
			return fmt.Errorf("%w: load kernels: %v", ErrUnavailable, err)
		}
		if p.fn, err = p.mod.Function("part_walk"); err != nil {
			return fmt.Errorf("gpu: kernel part_walk: %w", err)
		}
		if p.numSM, err = dev.dev.Attribute(cu.MultiprocessorCount); err != nil {
			return fmt.Errorf("gpu: multiprocessor count: %w", err)
		}
		for _, u := range []struct {
			dst *cu.DevicePtr
			src unsafe.Pointer
			n   int64
		}{
			{&p.dOffsets, unsafe.Pointer(&g.Offsets[0]), int64(len(g.Offsets)) * 8},
			{&p.dBounds, unsafe.Pointer(&bounds[0]), int64(len(bounds)) * 4},
			{&p.dBase, unsafe.Pointer(&base[0]), int64(np) * 8},
			{&p.dEntries, unsafe.Pointer(&ent[0]), int64(len(ent)) * 12},
		} {
			if *u.dst, err = cu.MemAlloc(u.n); err != nil {
				return fmt.Errorf("gpu: partition split: allocate %d bytes: %w", u.n, err)
			}
			if err = cu.MemcpyHtoD(*u.dst, u.src, u.n); err != nil {
				return fmt.Errorf("gpu: partition split: upload %d bytes: %w", u.n, err)
			}
		}
		return nil
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// DeviceBytes is the device memory of the graph's part: offsets and the
// device partitions' entries.
func (p *PartDevice) DeviceBytes() int64 { return int64(len(p.g.Offsets))*8 + p.edges*12 }

// Set is the vertices the device walks.
func (p *PartDevice) Set() walk.VertexSet { return p.set }

// Stats is what the device side did so far.
func (p *PartDevice) Stats() PartDeviceStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close frees the device memory and the context.
func (p *PartDevice) Close() error {
	if p.dev == nil {
		return nil
	}
	_ = p.dev.do(func() error {
		for _, d := range []*cu.DevicePtr{&p.dOffsets, &p.dBounds, &p.dBase, &p.dEntries, &p.dWalkers, &p.dRows} {
			if *d != 0 {
				_ = cu.MemFree(*d)
				*d = 0
			}
		}
		hostFree(p.hWalkers)
		hostFree(p.hRows)
		p.hWalkers, p.hRows = nil, nil
		unloadModule(p.mod)
		return nil
	})
	p.dev.close()
	p.dev = nil
	return nil
}

// PartSide is the device side of one job (hybrid.PartSide).
type PartSide struct {
	p     *PartDevice
	rows  *walk.HandoverRows
	first uint64
	seed  uint64
	len   uint32
	mode  uint64
	stopT uint64
}

// Side is the device side of job j, writing into rows (through the
// device's copy: Finish): DeepWalk and PPR, weighted (alias) or uniform,
// without overlay. One job at a time: a later Side reuses the rows.
func (p *PartDevice) Side(j walk.Job, rows *walk.HandoverRows) (*PartSide, error) {
	a := j.Algorithm
	if a.Kind != walk.DeepWalk && a.Kind != walk.PPR {
		return nil, fmt.Errorf("gpu: partition split walks DeepWalk and PPR, not %s", a)
	}
	sm := a.ResolvedStepper()
	if sm != walk.StepperUniform && sm != walk.StepperAlias {
		return nil, fmt.Errorf("gpu: partition split walks the alias and uniform steppers, not %s", a)
	}
	if j.Overlay != nil && !j.Overlay.Empty() {
		return nil, errors.New("gpu: partition split: a job on a live graph's delta is not split by partition")
	}
	if rows == nil || rows.Stride != a.Length+1 || len(rows.Lens) != len(j.Starts) {
		return nil, errors.New("gpu: partition split: rows not made for the job (walk.NewHandoverRows)")
	}
	s := &PartSide{p: p, rows: rows, first: j.FirstWalk, seed: j.Seed, len: uint32(a.Length)}
	n := int64(len(rows.Rows))
	err := p.dev.do(func() error {
		if n > p.capRows {
			if p.dRows != 0 {
				_ = cu.MemFree(p.dRows)
				p.dRows = 0
			}
			hostFree(p.hRows)
			p.hRows, p.capRows = nil, 0
			var err error
			if p.dRows, err = cu.MemAlloc(max(n, 1) * 4); err != nil {
				return fmt.Errorf("gpu: partition split: rows of %d walks on the device: %w", len(j.Starts), err)
			}
			if p.hRows, err = hostAlloc(max(n, 1) * 4); err != nil {
				return fmt.Errorf("gpu: partition split: pinned rows of %d walks: %w", len(j.Starts), err)
			}
			p.capRows = n
		}
		return cu.MemsetD32(p.dRows, graph.NoVertex, max(n, 1))
	})
	if err != nil {
		return nil, err
	}
	if a.Weighted && sm == walk.StepperAlias {
		s.mode |= 1
	}
	if a.Kind == walk.PPR {
		s.mode |= 2
		s.stopT = walk.Threshold(a.StopProb)
	}
	return s, nil
}

const partEnded = 0x80000000

// Advance walks the walkers of in on the device while their vertex is the
// device's and appends those that reached a CPU vertex to out.
func (s *PartSide) Advance(in, out []walk.Walker) ([]walk.Walker, int, int64) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	ended, steps := 0, int64(0)
	for lo := 0; lo < len(in); lo += partCallWalkers {
		batch := in[lo:min(lo+partCallWalkers, len(in))]
		res, err := s.call(batch)
		if err != nil {
			// A device failure has no way back to the driver but a
			// panic: the run would never end without its walkers.
			panic(fmt.Sprintf("gpu: partition split: %v", err))
		}
		e, st, o := s.apply(batch, res, out)
		ended += e
		steps += st
		out = o
	}
	return out, ended, steps
}

// Finish copies the job's device rows back and sets them as the rows'
// Device (valid until the next Side).
func (s *PartSide) Finish() error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int64(len(s.rows.Rows))
	t0 := time.Now()
	err := p.dev.do(func() error { return cu.MemcpyDtoH(p.hRows, p.dRows, n*4) })
	if err != nil {
		return fmt.Errorf("gpu: partition split: copy the rows back: %w", err)
	}
	p.stats.Rows += time.Since(t0)
	p.stats.RowBytes += n * 4
	s.rows.Device = unsafe.Slice((*uint32)(p.hRows), n)
	return nil
}

// call runs one kernel call on batch and returns the walkers' new state
// (pinned; valid until the next call).
func (s *PartSide) call(batch []walk.Walker) (res []walk.Walker, err error) {
	p := s.p
	n := len(batch)
	t0 := time.Now()
	var tk time.Duration
	err = p.dev.do(func() error {
		if n > p.capW {
			if p.dWalkers != 0 {
				_ = cu.MemFree(p.dWalkers)
				p.dWalkers = 0
			}
			hostFree(p.hWalkers)
			p.hWalkers, p.capW = nil, 0
			c := max(n, 1<<16)
			var err error
			if p.dWalkers, err = cu.MemAlloc(int64(c) * 16); err != nil {
				return err
			}
			if p.hWalkers, err = hostAlloc(int64(c) * 16); err != nil {
				return err
			}
			p.capW = c
		}
		hw := unsafe.Slice((*walk.Walker)(p.hWalkers), n)
		copy(hw, batch)
		if err := cu.MemcpyHtoD(p.dWalkers, p.hWalkers, int64(n)*16); err != nil {
			return err
		}
		t := time.Now()
		grid := min((n+255)/256, p.numSM*8)
		if err := launch(p.fn, grid, 256, cu.Stream{}, []uint64{uint64(p.dOffsets), uint64(p.dBounds), uint64(p.dBase),
			uint64(p.dEntries), uint64(p.dWalkers), uint64(p.dRows), uint64(n), uint64(p.nparts), uint64(s.rows.Stride),
			uint64(s.len), s.first, s.seed, s.mode, s.stopT}); err != nil {
			return err
		}
		if err := cu.Synchronize(); err != nil {
			return err
		}
		tk = time.Since(t)
		return cu.MemcpyDtoH(p.hWalkers, p.dWalkers, int64(n)*16)
	})
	p.stats.Calls++
	p.stats.Walkers += int64(n)
	p.stats.Kernel += tk
	p.stats.Copy += time.Since(t0) - tk
	p.stats.BytesIn += int64(n) * 16
	p.stats.BytesOut += int64(n) * 16
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*walk.Walker)(p.hWalkers), n), nil
}

// apply sorts the walkers a call returned, on p.scatter goroutines: ended
// (their vertex count written) or handed to the CPU (out).
func (s *PartSide) apply(batch, res, out []walk.Walker) (int, int64, []walk.Walker) {
	p := s.p
	t0 := time.Now()
	lens := s.rows.Lens
	workers := min(p.scatter, max(len(batch)/(1<<16), 1), runtime.GOMAXPROCS(0))
	type part struct {
		ended int
		steps int64
		out   []walk.Walker
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	per := (len(batch) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(batch))
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt := &parts[w]
			for i := lo; i < hi; i++ {
				nw := res[i]
				st := nw.Step &^ partEnded
				pt.steps += int64(st - batch[i].Step)
				if nw.Step&partEnded != 0 {
					lens[nw.Slot] = st + 1
					pt.ended++
					continue
				}
				nw.Step = st
				pt.out = append(pt.out, nw)
			}
		}()
	}
	wg.Wait()
	ended, steps := 0, int64(0)
	for _, pt := range parts {
		ended += pt.ended
		steps += pt.steps
		out = append(out, pt.out...)
	}
	p.stats.Steps += steps
	p.stats.Host += time.Since(t0)
	return ended, steps, out
}
