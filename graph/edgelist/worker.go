package edgelist

import (
	"sync"
	"sync/atomic"
)

// worker is one goroutine at the far end of a bounded channel: the import's
// sorter (runs in, spilled runs out) and the CSR writer (edge batches in,
// sections out) are both one. After do's first error the worker keeps
// receiving, so a sender never blocks on it, and raises failed so the sender
// can stop early; that first error is the one wait returns.
type worker[T any] struct {
	in     chan T
	done   chan error
	failed atomic.Bool
}

// startWorker starts a worker with a queue of depth items that calls do on
// each item until do fails, and release on every item, done or not (to hand
// its buffer back).
func startWorker[T any](depth int, do func(T) error, release func(T)) *worker[T] {
	w := &worker[T]{in: make(chan T, depth), done: make(chan error, 1)}
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

// hasFailed reports whether do has returned an error.
func (w *worker[T]) hasFailed() bool { return w.failed.Load() }

// send queues x, blocking while the queue is full.
func (w *worker[T]) send(x T) { w.in <- x }

// wait closes the queue, waits for the worker to finish it and returns do's
// first error.
func (w *worker[T]) wait() error {
	close(w.in)
	return <-w.done
}

// parallelFor calls f(0) .. f(n-1) on n goroutines (the caller's being
// one of them) and returns when all have returned.
func parallelFor(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { f(i) })
	}
	if n > 0 {
		f(0)
	}
	wg.Wait()
}
