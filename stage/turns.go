package stage

import "sync"

// engineTurns gives the engine to one run at a time (the walk.Engine
// contract), in the order the runs asked for it: a ticket lock. The order
// is what keeps small requests from starving: an expensive request walks in
// slices (runJobs), each slice a turn of its own, asked for only when the
// previous one is done, so every micro-batch that asked meanwhile walks
// before its next slice. A sync.Mutex promises no order, and a slice that
// unlocks and locks again at once mostly wins.
//
// A ticket taken must be waited for and done, or given back: the turns
// behind it wait for it.
type engineTurns struct {
	mu      sync.Mutex
	cond    sync.Cond
	next    uint64          // the next ticket handed out
	serving uint64          // the ticket whose turn it is
	gone    map[uint64]bool // tickets given back before their turn
}

func newEngineTurns() *engineTurns {
	t := &engineTurns{gone: map[uint64]bool{}}
	t.cond.L = &t.mu
	return t
}

// take hands out the next ticket: a place in the line, without waiting.
func (t *engineTurns) take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.next
	t.next++
	return n
}

// wait blocks until ticket n's turn. The engine is then the caller's until
// done. It takes no context: the run ahead stops with its own context.
func (t *engineTurns) wait(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.serving != n {
		t.cond.Wait()
	}
}

// done ends the current turn.
func (t *engineTurns) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance()
}

// giveBack gives ticket n up without taking its turn.
func (t *engineTurns) giveBack(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.serving == n {
		t.advance()
		return
	}
	t.gone[n] = true
}

func (t *engineTurns) advance() {
	t.serving++
	for t.gone[t.serving] {
		delete(t.gone, t.serving)
		t.serving++
	}
	t.cond.Broadcast()
}

// lock takes a ticket and waits for its turn.
func (t *engineTurns) lock() { t.wait(t.take()) }

// waiting is the number of tickets handed out and not yet done or given
// back, the turn in progress included.
func (t *engineTurns) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.next-t.serving) - len(t.gone)
}

// heldTurn is a ticket taken ahead of the engine run that will use it
// (walk takes one before it opens the writers, so the micro-batch keeps
// its place while it gets ready): its first lock waits for that ticket,
// later ones take new tickets.
type heldTurn struct {
	t    *engineTurns
	n    uint64
	used bool
}

func (t *engineTurns) hold() *heldTurn { return &heldTurn{t: t, n: t.take()} }

func (h *heldTurn) lock() {
	if h.used {
		h.t.lock()
		return
	}
	h.used = true
	h.t.wait(h.n)
}

// release gives the ticket back if no lock used it.
func (h *heldTurn) release() {
	if !h.used {
		h.used = true
		h.t.giveBack(h.n)
	}
}
