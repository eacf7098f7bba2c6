package gpu

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/walkstage/walkstage/walk"
)

// pipeline runs a group's batches through a fixed set of slots in four
// stages, each on its own goroutine, so that none waits for another's work
// unless a bounded queue between them is full:
//
//   - issue (Run's goroutine) takes the oldest free slot and enqueues the
//     next batch on its stream (copies in, kernel, pack);
//   - fetch waits for the oldest issued batch and copies its packed walks
//     to the slot's pinned buffer (device to host);
//   - unpack copies the oldest fetched batch's walks out of the pinned
//     buffer into chunks and frees the slot;
//   - emit hands the chunks to the receiver, batch after batch in order.
//
// So while batch i is cut into chunks, batch i+1 crosses the bus and the
// chunks of batch i-1 go to the receiver (which encodes them). A slow
// receiver holds one batch of chunks waiting, then stops unpack and with it
// the issue of new batches: the queues are the backpressure, and memory
// stays bounded by the slots plus two batches of chunks.
//
// The stage functions keep the device's rules: every call that touches a
// slot's stream or buffers comes from the one stage that holds the slot.
type pipeline struct {
	slots int
	// issue enqueues batch b on slot s (which is idle). On an error
	// nothing may still be queued on s.
	issue func(s, b int) error
	// fetch waits for slot s's batch b and copies it to the host. On an
	// error nothing may still be queued on s.
	fetch func(s, b int) error
	// unpack returns the chunks of slot s's fetched batch b; the slot is
	// free when it returns, with or without an error. A batch whose walks
	// come back in pieces (a result window) hands all but the last
	// piece's chunks to send, in order, as they are cut: send blocks
	// while the receiver holds a piece already (the window's
	// backpressure) and returns false, having taken the chunks back,
	// once another stage failed; unpack then returns errStopped.
	unpack func(s, b int, send func([]walk.Chunk) bool) ([]walk.Chunk, error)
	// abandon waits for slot s's batch, whose walks will not be used,
	// after another stage failed.
	abandon func(s int)
	// reclaim, when set, waits until slot s, free in the pipeline's
	// order, may be walked again (its lent chunks are back); it returns
	// errStopped when stop closes first.
	reclaim func(ctx context.Context, s int, stop <-chan struct{}) error
	// drop, when set, takes back a chunk that was unpacked but never
	// emitted, after a failure.
	drop func(walk.Chunk)
	emit walk.EmitFunc

	// What each stage spent, for the run's log line; each field is
	// written by one stage and read once run has returned.
	issueWait, issueTime time.Duration // waiting for a free slot; enqueueing
	fetchTime            time.Duration // waiting for batches and their copies to the host
	unpackTime           time.Duration // copying batches into chunks
	emitWait, emitTime   time.Duration // waiting for chunks; in the receiver
}

// errStopped is what waiting for a lent slot returns when another stage
// of the pipeline failed: that stage's error is the run's.
var errStopped = errors.New("gpu: pipeline stopped")

// heldSlot is an issued batch b on slot s.
type heldSlot struct{ s, b int }

// run pushes batches 0..n-1 through the stages and returns once every
// stage has stopped and every slot is idle: nil when every chunk was
// emitted, else the first error (a stage's, or ctx's).
func (p *pipeline) run(ctx context.Context, n int) error {
	var (
		once  sync.Once
		first error
		stop  = make(chan struct{})
	)
	fail := func(err error) { once.Do(func() { first = err; close(stop) }) }
	free := make(chan int, p.slots)
	for s := range p.slots {
		free <- s
	}
	// At most p.slots batches are issued and not unpacked: sends to issued
	// and fetched never block. One batch of chunks waits for the receiver.
	issued := make(chan heldSlot, p.slots)
	fetched := make(chan heldSlot, p.slots)
	ready := make(chan []walk.Chunk, 1)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		defer close(fetched)
		p.fetchLoop(issued, fetched, stop, fail)
	}()
	go func() {
		defer wg.Done()
		defer close(ready)
		p.unpackLoop(fetched, free, ready, stop, fail)
	}()
	go func() {
		defer wg.Done()
		p.emitLoop(ready, stop, fail)
	}()
	p.issueLoop(ctx, n, free, issued, stop, fail)
	close(issued)
	wg.Wait()
	return first
}

// issueLoop enqueues batches as slots free up, until all are issued or a
// stage fails.
func (p *pipeline) issueLoop(ctx context.Context, n int, free <-chan int, issued chan<- heldSlot, stop <-chan struct{}, fail func(error)) {
	for b := range n {
		t0 := time.Now()
		var s int
		select {
		case s = <-free:
		case <-stop:
			return
		case <-ctx.Done():
			fail(ctx.Err())
			return
		}
		if p.reclaim != nil {
			if err := p.reclaim(ctx, s, stop); err != nil {
				if !errors.Is(err, errStopped) {
					fail(err)
				}
				return
			}
		}
		t1 := time.Now()
		p.issueWait += t1.Sub(t0)
		if stopped(stop) {
			return
		}
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		if err := p.issue(s, b); err != nil {
			fail(err)
			return
		}
		p.issueTime += time.Since(t1)
		issued <- heldSlot{s, b}
	}
}

// fetchLoop copies issued batches to the host in order; after a failure
// it only waits for the slots still issued.
func (p *pipeline) fetchLoop(issued <-chan heldSlot, fetched chan<- heldSlot, stop <-chan struct{}, fail func(error)) {
	for h := range issued {
		if stopped(stop) {
			p.abandon(h.s)
			continue
		}
		t0 := time.Now()
		err := p.fetch(h.s, h.b)
		p.fetchTime += time.Since(t0)
		if err != nil {
			fail(err)
			continue
		}
		fetched <- h
	}
}

// unpackLoop turns fetched batches into chunks in order; after a failure
// it only lets go of the slots still fetched.
func (p *pipeline) unpackLoop(fetched <-chan heldSlot, free chan<- int, ready chan<- []walk.Chunk, stop <-chan struct{}, fail func(error)) {
	send := func(cs []walk.Chunk) bool {
		select {
		case ready <- cs:
			return true
		case <-stop:
			p.dropAll(cs)
			return false
		}
	}
	for h := range fetched {
		if stopped(stop) {
			p.abandon(h.s)
			continue
		}
		t0 := time.Now()
		cs, err := p.unpack(h.s, h.b, send)
		p.unpackTime += time.Since(t0)
		if err != nil {
			if !errors.Is(err, errStopped) {
				fail(err)
			}
			continue
		}
		free <- h.s
		select {
		case ready <- cs:
		case <-stop:
			p.dropAll(cs)
		}
	}
}

// emitLoop hands chunks to the receiver in order; after a failure it only
// drains what unpack still sends.
func (p *pipeline) emitLoop(ready <-chan []walk.Chunk, stop <-chan struct{}, fail func(error)) {
	t0 := time.Now()
	for cs := range ready {
		t1 := time.Now()
		p.emitWait += t1.Sub(t0)
		for i, c := range cs {
			if stopped(stop) {
				p.dropAll(cs[i:])
				break
			}
			if err := p.emit(c); err != nil {
				// The receiver may keep c: only the rest come back.
				fail(err)
				p.dropAll(cs[i+1:])
				break
			}
		}
		t0 = time.Now()
		p.emitTime += t0.Sub(t1)
	}
}

// dropAll takes back chunks that will not be emitted.
func (p *pipeline) dropAll(cs []walk.Chunk) {
	if p.drop != nil {
		for _, c := range cs {
			p.drop(c)
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
