// Package turns is a ticket lock: a mutex whose holders take their turns
// in the order they asked. The stage gives its engine to one run at a time
// through it (the walk.Engine contract), and the order is what keeps small
// requests from starving behind an expensive one that walks in slices.
package turns

import "sync"

// Line gives a resource (the stage's engine) to one holder at a time, in
// the order they asked for it. The order is what keeps small requests from
// starving: an expensive request walks in slices (stage's runJobs), each
// slice a turn of its own, asked for only when the
// previous one is done, so every micro-batch that asked meanwhile walks
// before its next slice. A sync.Mutex promises no order, and a slice that
// unlocks and locks again at once mostly wins.
//
// A ticket taken must be waited for and done, or given back: the turns
// behind it wait for it.
type Line struct {
	mu      sync.Mutex
	cond    sync.Cond
	next    uint64          // the next ticket handed out
	serving uint64          // the ticket whose turn it is
	gone    map[uint64]bool // tickets given back before their turn
}

func NewLine() *Line {
	t := &Line{gone: map[uint64]bool{}}
	t.cond.L = &t.mu
	return t
}

// Take hands out the next ticket: a place in the line, without waiting.
func (t *Line) Take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.next
	t.next++
	return n
}

// Wait blocks until ticket n's turn. The engine is then the caller's until
// done. It takes no context: the run ahead stops with its own context.
func (t *Line) Wait(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.serving != n {
		t.cond.Wait()
	}
}

// Done ends the current turn.
func (t *Line) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
}

// GiveBack gives ticket n up without taking its turn.
func (t *Line) GiveBack(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.serving == n {
		t.advance()
		return
	}
	t.gone[n] = true
}

func (t *Line) advance() {
	t.serving++
	for t.gone[t.serving] {
		delete(t.gone, t.serving)
		t.serving++
	}
	t.cond.Broadcast()
}

// Lock takes a ticket and waits for its turn.
func (t *Line) Lock() { t.Wait(t.Take()) }

// Waiting is the number of tickets handed out and not yet done or given
// back, the turn in progress included.
func (t *Line) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.next-t.serving) - len(t.gone)
}

// Held is a ticket taken ahead of the engine run that will use it
// (walk takes one before it opens the writers, so the micro-batch keeps
// its place while it gets ready): its first lock waits for that ticket,
// later ones take new tickets.
type Held struct {
	t    *Line
	n    uint64
	used bool
}

func (t *Line) Hold() *Held { return &Held{t: t, n: t.Take()} }

func (h *Held) Lock() {
	if h.used {
		h.t.Lock()
		return
	}
	h.used = true
	h.t.Wait(h.n)
}

// Release gives the ticket back if no lock used it.
func (h *Held) Release() {
	if !h.used {
		h.used = true
		h.t.GiveBack(h.n)
	}
}
