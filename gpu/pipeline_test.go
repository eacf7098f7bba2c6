package gpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/walkstage/walkstage/walk"
)

// fakeDevice plays the slots of a pipeline: it checks that a slot is issued
// only when idle and unpacked or abandoned only when busy, and fails the
// step it was told to.
type fakeDevice struct {
	t        *testing.T
	mu       sync.Mutex
	busy     []int // batch on each slot, -1 when idle
	inFlight int   // most slots busy at once
	failAt   string
	failB    int
	rng      *rand.Rand
	emitted  []int // batch of each emitted chunk, in order
	chunks   int   // chunks per batch
	pieces   bool  // unpack sends a batch's chunks one by one (a result window)
	// Lending (WithLentChunks): lent counts each slot's chunks not yet
	// given back, which the receiver does later, on its own goroutines.
	lend     bool
	lent     []int
	lentFrom map[int]int // slot of each batch
	back     *sync.Cond
	returns  sync.WaitGroup
}

// releaseLent returns a lent chunk of batch b.
func (d *fakeDevice) releaseLent(b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.lentFrom[b]
	if d.lent[s]--; d.lent[s] < 0 {
		d.t.Errorf("slot %d: a chunk of batch %d given back twice", s, b)
	}
	d.back.Broadcast()
}

var errInjected = errors.New("injected")

func (d *fakeDevice) pause() {
	d.mu.Lock()
	n := d.rng.IntN(200)
	d.mu.Unlock()
	time.Sleep(time.Duration(n) * time.Microsecond)
}

func (d *fakeDevice) take(s, b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[s] != -1 {
		d.t.Errorf("batch %d issued on slot %d, which holds batch %d", b, s, d.busy[s])
	}
	if d.lend && d.lent[s] != 0 {
		d.t.Errorf("batch %d issued on slot %d, which still lends %d chunks", b, s, d.lent[s])
	}
	d.busy[s] = b
	n := 0
	for _, x := range d.busy {
		if x >= 0 {
			n++
		}
	}
	d.inFlight = max(d.inFlight, n)
}

func (d *fakeDevice) release(s, b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b >= 0 && d.busy[s] != b {
		d.t.Errorf("unpack of batch %d on slot %d, which holds %d", b, s, d.busy[s])
	}
	if d.busy[s] == -1 {
		d.t.Errorf("slot %d released while idle", s)
	}
	d.busy[s] = -1
}

func (d *fakeDevice) pipeline() *pipeline {
	return &pipeline{
		slots: len(d.busy),
		issue: func(s, b int) error {
			d.pause()
			if d.failAt == "issue" && b == d.failB {
				return errInjected // nothing queued: the slot stays idle
			}
			d.take(s, b)
			return nil
		},
		fetch: func(s, b int) error {
			d.pause()
			d.mu.Lock()
			if d.busy[s] != b {
				d.t.Errorf("fetch of batch %d on slot %d, which holds %d", b, s, d.busy[s])
			}
			d.mu.Unlock()
			if d.failAt == "fetch" && b == d.failB {
				d.release(s, b) // a failed fetch leaves its slot idle
				return errInjected
			}
			return nil
		},
		unpack: func(s, b int, send func([]walk.Chunk) bool) ([]walk.Chunk, error) {
			d.pause()
			if d.failAt == "unpack" && b == d.failB {
				d.release(s, b)
				return nil, errInjected
			}
			cs := make([]walk.Chunk, d.chunks)
			for i := range cs {
				cs[i].Tag, cs[i].Lent = b, d.lend
			}
			if d.pieces {
				// A result window: every chunk but the last is sent
				// on its own while the slot is still held.
				for len(cs) > 1 {
					d.pause()
					if !send(cs[:1]) {
						d.release(s, b)
						return nil, errStopped
					}
					cs = cs[1:]
				}
			}
			d.release(s, b)
			if d.lend {
				d.mu.Lock()
				d.lent[s] += len(cs)
				d.lentFrom[b] = s
				d.mu.Unlock()
			}
			return cs, nil
		},
		abandon: func(s int) { d.release(s, -1) },
		emit: func(c walk.Chunk) error {
			d.pause()
			if c.Lent {
				// Given back later, also the one that fails here.
				d.returns.Add(1)
				go func() {
					defer d.returns.Done()
					d.pause()
					d.releaseLent(c.Tag)
				}()
			}
			if d.failAt == "emit" && c.Tag == d.failB {
				return errInjected
			}
			d.emitted = append(d.emitted, c.Tag)
			return nil
		},
		reclaim: func(ctx context.Context, s int, stop <-chan struct{}) error {
			if !d.lend {
				return nil
			}
			done := make(chan struct{})
			defer close(done)
			go func() { // wake the wait below when stop or ctx ends it
				select {
				case <-stop:
				case <-ctx.Done():
				case <-done:
					return
				}
				d.mu.Lock()
				d.back.Broadcast()
				d.mu.Unlock()
			}()
			d.mu.Lock()
			defer d.mu.Unlock()
			for d.lent[s] > 0 {
				if stopped(stop) {
					return errStopped
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				d.back.Wait()
			}
			return nil
		},
		drop: func(c walk.Chunk) {
			if c.Lent {
				d.releaseLent(c.Tag)
			}
		},
	}
}

// TestPipelineOrderAndFailures runs batches through fake slots: chunks come
// out in batch order, a slot is never issued while busy, and after any
// stage's failure (or a cancelled context) run returns that error with
// every slot idle and only whole batches before the failure emitted; with
// chunks copied, lent, or sent piece by piece while the slot is held (a
// result window).
func TestPipelineOrderAndFailures(t *testing.T) {
	const batches, chunks = 40, 3
	for _, mode := range []string{"copy", "lend", "pieces"} {
		lend, pieces := mode == "lend", mode == "pieces"
		for _, slots := range []int{1, 2, 3} {
			for _, failAt := range []string{"", "issue", "fetch", "unpack", "emit", "cancel"} {
				for _, failB := range []int{0, 1, 17, batches - 1} {
					if failAt == "" && failB > 0 {
						continue
					}
					t.Run(fmt.Sprintf("%s/slots=%d/fail=%s@%d", mode, slots, failAt, failB), func(t *testing.T) {
						d := &fakeDevice{t: t, busy: make([]int, slots), failAt: failAt, failB: failB,
							rng: rand.New(rand.NewPCG(uint64(slots), uint64(failB))), chunks: chunks,
							lend: lend, pieces: pieces, lent: make([]int, slots), lentFrom: map[int]int{}}
						d.back = sync.NewCond(&d.mu)
						for i := range d.busy {
							d.busy[i] = -1
						}
						p := d.pipeline()
						ctx, cancel := context.WithCancel(context.Background())
						defer cancel()
						if failAt == "cancel" {
							inner := p.issue
							p.issue = func(s, b int) error {
								if b == failB {
									cancel()
								}
								return inner(s, b)
							}
						}
						err := p.run(ctx, batches)
						checkPipelineRun(t, d, err, batches, chunks)
						// Every lent chunk comes back: emitted ones from the
						// receiver, the rest dropped by the pipeline.
						d.returns.Wait()
						for s, n := range d.lent {
							if n != 0 {
								t.Fatalf("slot %d: %d chunks never given back", s, n)
							}
						}
					})
				}
			}
		}
	}
}

func checkPipelineRun(t *testing.T, d *fakeDevice, err error, batches, chunks int) {
	t.Helper()
	switch d.failAt {
	case "":
		if err != nil {
			t.Fatal(err)
		}
	case "cancel":
		// Cancelled while issuing the last batch, the run may complete.
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run returned %v, want nil or context.Canceled", err)
		}
	default:
		if !errors.Is(err, errInjected) {
			t.Fatalf("run returned %v, want the injected error", err)
		}
	}
	for s, b := range d.busy {
		if b != -1 {
			t.Fatalf("slot %d still holds batch %d after run", s, b)
		}
	}
	if d.inFlight > len(d.busy) {
		t.Fatalf("%d slots busy at once", d.inFlight)
	}
	for i, b := range d.emitted {
		if b != i/chunks {
			t.Fatalf("chunk %d of the emitted is from batch %d, want %d (order %v)", i, b, i/chunks, d.emitted)
		}
	}
	want := batches * chunks // exactly without a failure, at most with one
	switch d.failAt {
	case "issue", "fetch", "unpack", "emit":
		want = d.failB * chunks
	case "cancel":
		want = min(batches, d.failB+1) * chunks
	}
	if d.failAt == "" && len(d.emitted) != want || len(d.emitted) > want {
		t.Fatalf("%d chunks emitted, want %d", len(d.emitted), want)
	}
	if d.failAt == "emit" && len(d.emitted) != want {
		t.Fatalf("%d chunks emitted before the failing one, want %d", len(d.emitted), want)
	}
}
