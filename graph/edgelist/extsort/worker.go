package extsort

import (
	"sync"
	"sync/atomic"
)

// Worker is one goroutine at the far end of a bounded channel: the import's
// sorter (runs in, spilled runs out) is one. After do's first error the
// worker keeps receiving, so a sender never blocks on it, and raises failed
// so the sender can stop early (HasFailed); that first error is the one
// Wait returns.
type Worker[T any] struct {
	in     chan T
	done   chan error
	failed atomic.Bool
}

// StartWorker starts a worker with a queue of depth items that calls do on
// each item until do fails, and release on every item, done or not (to hand
// its buffer back).
func StartWorker[T any](depth int, do func(T) error, release func(T)) *Worker[T] {
	w := &Worker[T]{in: make(chan T, depth), done: make(chan error, 1)}
	go func() {
		var err error
		for x := range w.in {
			if err == nil { // after an error, drain; the first error is reported
				if err = do(x); err != nil {
					w.failed.Store(true)
				}
			}
			release(x)
		}
		w.done <- err
	}()
	return w
}

// HasFailed reports whether do has returned an error.
func (w *Worker[T]) HasFailed() bool { return w.failed.Load() }

// Send queues x, blocking while the queue is full.
func (w *Worker[T]) Send(x T) { w.in <- x }

// Wait closes the queue, waits for the worker to finish it and returns do's
// first error.
func (w *Worker[T]) Wait() error {
	close(w.in)
	return <-w.done
}

// ParallelFor calls f(0) .. f(n-1) on n goroutines (the caller's being
// one of them) and returns when all have returned.
func ParallelFor(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { f(i) })
	}
	if n > 0 {
		f(0)
	}
	wg.Wait()
}
