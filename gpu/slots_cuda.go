//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/walk"
)

// batchSlot is one of the engine's batch slots (WithBatchSlots): a stream, device buffers for
// one batch and the pinned host buffers its inputs and results pass through.
type batchSlot struct {
	name        string
	stream      cu.Stream
	start, stop cu.Event
	capWalks    int64 // tasks and lengths
	capWords    int64 // result and packed vertices (device)
	// capHostWords is hDense's length: capWords, or less when the rows
	// come back through a result window (batchplan.go).
	capHostWords                                        int64
	capJobs                                             int64
	dTasks, dSeeds, dResult, dLengths, dCursor, dParams cu.DevicePtr
	dDense, dPartials                                   cu.DevicePtr
	hTasks                                              []task
	hSeeds                                              []uint64
	hDense, hLengths                                    []uint32
	hTotal                                              *uint32
	hParams                                             *walkParams
	hPtrs                                               []unsafe.Pointer
	pending                                             *batch
	// dTimes and hTimes are the walks' times, capWords of them, rows of
	// timesStride parallel to the result pool's (ensureTimes: only once a
	// run asks for them); withTimes says the pending batch has them.
	dTimes      cu.DevicePtr
	hTimes      []int64
	timesStride int64
	withTimes   bool
	// lent counts the chunks of hDense not yet given back
	// (WithLentChunks); back gets a token when it drops to zero.
	lent atomic.Int64
	back chan struct{}
}

// release frees whatever of the slot was allocated, also a slot whose
// construction failed halfway (device thread).
func (s *batchSlot) release(e *Engine) {
	e.lenders.remove(s)
	if s.stream != (cu.Stream{}) {
		_ = s.stream.Synchronize()
	}
	for _, p := range s.hPtrs {
		e.hostFree(p)
	}
	s.hPtrs, s.hTimes = nil, nil
	for name, p := range map[string]*cu.DevicePtr{"tasks": &s.dTasks, "seeds": &s.dSeeds, "result": &s.dResult,
		"lengths": &s.dLengths, "cursor": &s.dCursor, "params": &s.dParams, "dense": &s.dDense, "partials": &s.dPartials,
		"times": &s.dTimes} {
		e.free(s.name+"."+name, p)
	}
	if s.stream != (cu.Stream{}) {
		_ = s.stream.Destroy()
	}
	for _, ev := range []*cu.Event{&s.start, &s.stop} {
		if *ev != (cu.Event{}) {
			_ = cu.DestroyEvent(ev)
		}
	}
}

// ensureSlots sizes every slot for batches of up to walks walks, words
// result vertices (hostWords of them in pinned memory at once) and jobs
// seeds (device thread). Slots only grow, each dimension on its own, so
// groups of different lengths reuse them instead of reallocating pinned
// memory run after run.
func (e *Engine) ensureSlots(walks, words, hostWords, jobs int64) error {
	type size struct{ walks, words, hostWords, jobs int64 }
	asked := size{walks, words, hostWords, jobs}
	want := make([]*size, len(e.slots))
	for i, old := range e.slots {
		if old != nil && old.capWalks >= walks && old.capWords >= words && old.capHostWords >= hostWords && old.capJobs >= jobs {
			continue
		}
		sz := &size{walks, words, hostWords, jobs}
		if old != nil {
			sz = &size{max(walks, old.capWalks), max(words, old.capWords), max(hostWords, old.capHostWords), max(jobs, old.capJobs)}
			// Give the old slot's memory back first: the new ones may
			// need it (batchWalks counted it as free). Until its
			// replacement is complete there is no slot i.
			old.release(e)
			e.slots[i] = nil
		}
		want[i] = sz
	}
	for i, sz := range want {
		if sz == nil {
			continue
		}
		free, err := e.memFree()
		if err != nil {
			return err
		}
		if err := slotPlan(i, sz.walks, sz.words, sz.jobs).check(free); err != nil {
			// Grown in every dimension it may not fit where the batch
			// sizing (batchWalks) did: take only what was asked for.
			if *sz == asked || slotPlan(i, asked.walks, asked.words, asked.jobs).check(free) != nil {
				return err
			}
			sz = &asked
		}
		s, err := e.newSlot(i, sz.walks, sz.words, sz.hostWords, sz.jobs)
		if err != nil {
			return err
		}
		e.slots[i] = s
	}
	return nil
}

// newSlot allocates slot i for batches of up to walks walks, words result
// vertices (hostWords pinned) and jobs seeds. It returns a complete slot,
// or an error with everything it had allocated freed (device thread).
func (e *Engine) newSlot(i int, walks, words, hostWords, jobs int64) (_ *batchSlot, err error) {
	s := &batchSlot{name: fmt.Sprintf("slot%d", i), back: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			s.release(e)
		}
	}()
	if s.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, fmt.Errorf("gpu: stream: %w", err)
	}
	if s.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, fmt.Errorf("gpu: event: %w", err)
	}
	if s.stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, fmt.Errorf("gpu: event: %w", err)
	}
	dev := []*cu.DevicePtr{&s.dTasks, &s.dSeeds, &s.dResult, &s.dLengths, &s.dCursor, &s.dParams, &s.dDense, &s.dPartials}
	for k, part := range slotParts(walks, words, jobs) {
		if *dev[k], err = e.alloc(s.name+"."+part.name, part.bytes); err != nil {
			return nil, err
		}
	}
	host := func(n int64) (unsafe.Pointer, error) {
		p, err := e.hostAlloc(n)
		if err == nil {
			s.hPtrs = append(s.hPtrs, p)
		}
		return p, err
	}
	p, err := host(walks * 16)
	if err != nil {
		return nil, err
	}
	s.hTasks = unsafe.Slice((*task)(p), walks)
	if p, err = host(jobs * 8); err != nil {
		return nil, err
	}
	s.hSeeds = unsafe.Slice((*uint64)(p), jobs)
	if p, err = host(hostWords * 4); err != nil {
		return nil, err
	}
	s.hDense = unsafe.Slice((*uint32)(p), hostWords)
	if p, err = host(8); err != nil {
		return nil, err
	}
	s.hTotal = (*uint32)(p)
	if p, err = host(walks * 4); err != nil {
		return nil, err
	}
	s.hLengths = unsafe.Slice((*uint32)(p), walks)
	if p, err = host(paramsSize); err != nil {
		return nil, err
	}
	s.hParams = (*walkParams)(p)
	// Capacities only now that every buffer exists.
	s.capWalks, s.capWords, s.capHostWords, s.capJobs = walks, words, hostWords, jobs
	e.lenders.add(s)
	return s, nil
}

// hostBatch is what the pinned host buffers allow a batch of a group of
// total walks of stride words whatever the device's memory: the host
// buffer size, the result window (when the rows come back in pieces), the
// group and the configured cap (planHostBatch).
func (e *Engine) hostBatch(stride, total int64) hostBatch {
	return planHostBatch(e.cfg.hostBufferBytes, e.cfg.resultWindowBytes, stride, total, e.cfg.maxBatchWalks)
}

// slotsHold reports whether every slot exists and hold batches of walks
// walks, words result vertices (hostWords pinned) and jobs seeds. Run's
// goroutine, e.mu held: the slots change only inside Run (ensureSlots on
// the device thread, which dev.do orders before this read).
func (e *Engine) slotsHold(walks, words, hostWords, jobs int64) bool {
	for _, s := range e.slots {
		if s == nil || s.capWalks < walks || s.capWords < words || s.capHostWords < hostWords || s.capJobs < jobs {
			return false
		}
	}
	return true
}

// batchWalks sizes a batch by FlowWalker's equation 3: the free device
// memory (less a reserve) split between the batch slots (the paper's two
// ping-pong slots, or WithBatchSlots of them), each walk
// needing its result row, length and task; bounded by the pinned host
// buffers and the configured cap.
func (e *Engine) batchWalks(stride, total int64) (int64, error) {
	perWalk := 2*stride*4 + 4 + 16 // result row, dense copy, length, task
	if e.streamed != nil {
		// Walker vertex, step and list entry (stream_cuda.go), and
		// Node2Vec's previous vertex, phase and candidate: counted for
		// every batch, since slots sized by one group serve the next.
		perWalk += 24
	}
	var free int64
	err := e.dev.do(func() error {
		// Slots already allocated count as free: they are reused or
		// replaced.
		f, err := e.memFree()
		for _, s := range e.slots {
			if s != nil {
				f += s.capWalks*(4+16) + 2*s.capWords*4 + s.capJobs*8
			}
		}
		free = f
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("gpu: memory info: %w", err)
	}
	reserve := e.cfg.reserveBytes
	if e.cfg.memoryLimit > 0 {
		reserve = 0 // the limit leaves no memory to others: the reserve is the slots'
	}
	// Less each slot's fixed buffers and allocation rounding, which
	// perWalk does not count: a few hundred bytes that matter only under a
	// tight memory limit.
	slots := int64(len(e.slots))
	n := (free - reserve - slots*slotOverhead) / (slots * perWalk)
	n = min(n, e.hostBatch(stride, total).walks)
	if n < 1 {
		return 0, fmt.Errorf("gpu: no device memory for a batch (%d bytes free, %d reserved)", free, reserve)
	}
	return n, nil
}

var _ walk.SlotPreparer = (*Engine)(nil)

// PrepareSlots allocates the batch slots for walks of up to length steps
// now, as WithPreparedSlots does in New, so that the next Run does not pay
// for them: pinned host memory cost 0.1 s at the default host buffer size
// through cuMemHostAlloc (H100 host; 0.35-0.6 s at 512 MiB), and still
// about 0.1 s a GiB registered (pinned_cuda.go), which a one-shot run
// would count as walking time. Slots
// that are large enough already are kept.
func (e *Engine) PrepareSlots(length int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return errors.New("gpu: engine closed")
	case e.broken != nil:
		return e.broken
	case length < 1 || length > walk.MaxLength:
		return fmt.Errorf("gpu: prepared length %d outside [1, %d]", length, walk.MaxLength)
	}
	stride := rowPitch(length)
	per, err := e.batchWalks(stride, 1<<31-1)
	if err != nil {
		return err
	}
	if err := e.awaitAllLent(context.Background()); err != nil {
		return err
	}
	rows := e.hostBatch(stride, 1<<31-1).rowsFor(per, stride)
	return e.dev.do(func() error { return e.ensureSlots(per, per*stride, rows, 1) })
}
