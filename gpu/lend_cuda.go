//go:build cuda

package gpu

import (
	"context"
	"slices"
	"sync"
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// lenders are the slots whose pinned buffers chunks may be lent out of
// (WithLentChunks). Release looks a lent chunk's slot up here from any
// goroutine, while Run may replace slots.
type lenders struct {
	mu    sync.RWMutex
	slots []*batchSlot
}

func (l *lenders) add(s *batchSlot) {
	l.mu.Lock()
	l.slots = append(l.slots, s)
	l.mu.Unlock()
}

func (l *lenders) remove(s *batchSlot) {
	l.mu.Lock()
	l.slots = slices.DeleteFunc(l.slots, func(x *batchSlot) bool { return x == s })
	l.mu.Unlock()
}

// of is the slot whose pinned vertex buffer holds p, or nil.
func (l *lenders) of(p *uint32) *batchSlot {
	a := uintptr(unsafe.Pointer(p))
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.slots {
		if len(s.hDense) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(&s.hDense[0]))
		if a >= lo && a < lo+uintptr(len(s.hDense))*4 {
			return s
		}
	}
	return nil
}

// lend counts n chunks cut out of slot s's pinned buffer as lent; the
// slot is walked again once all are back.
func (s *batchSlot) lend(n int) { s.lent.Add(int64(n)) }

// releaseLent takes a lent chunk back, waking a batch waiting for its slot
// when it was the last.
func (e *Engine) releaseLent(c walk.Chunk) {
	if len(c.Vertices) == 0 {
		e.cfg.logger.Error("gpu: a lent chunk came back without its vertices", "tag", c.Tag)
		return
	}
	s := e.lenders.of(&c.Vertices[0])
	if s == nil {
		e.cfg.logger.Error("gpu: a lent chunk came back that no batch slot lent", "tag", c.Tag)
		return
	}
	switch n := s.lent.Add(-1); {
	case n == 0:
		select {
		case s.back <- struct{}{}:
		default: // a token is there already
		}
	case n < 0:
		s.lent.Add(1)
		e.cfg.logger.Error("gpu: a lent chunk came back twice", "tag", c.Tag, "slot", s.name)
	}
}

// awaitLent waits until every chunk lent out of slot s is back, or stop
// closes (errStopped), or ctx ends.
func (e *Engine) awaitLent(ctx context.Context, s *batchSlot, stop <-chan struct{}) error {
	for s.lent.Load() > 0 {
		select {
		case <-s.back: // look again: a token may be older than the last lend
		case <-stop:
			return errStopped
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// awaitAllLent waits until no slot has chunks lent, before slots are
// replaced or freed.
func (e *Engine) awaitAllLent(ctx context.Context) error {
	for _, s := range e.slots {
		if s != nil {
			if err := e.awaitLent(ctx, s, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
