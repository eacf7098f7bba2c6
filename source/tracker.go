package source

import (
	"math"
	"sync"
)

// tracker decides how far each partition's offset may be committed.
// Batches finish out of order (micro-batches, concurrent writers), but a
// Kafka offset commit means "everything before this is done": committing
// offset 5 while offset 4 is still walking would lose 4 on a crash. So the
// commit point of a partition is the highest acknowledged offset below the
// lowest offset still outstanding.
type tracker struct {
	mu    sync.Mutex
	parts map[tp]*partState
}

type tp struct {
	topic string
	part  int
}

type partState struct {
	// outstanding counts fetched, unacknowledged deliveries per offset; a
	// count above one is a redelivery after a rebalance while the first
	// copy is still in flight.
	outstanding map[int64]int
	acked       []int64 // acknowledged offsets above committed
	committed   int64   // highest offset committed, -1 before the first
}

func newTracker() *tracker { return &tracker{parts: map[tp]*partState{}} }

func (t *tracker) state(topic string, part int) *partState {
	k := tp{topic, part}
	s := t.parts[k]
	if s == nil {
		s = &partState{outstanding: map[int64]int{}, committed: -1}
		t.parts[k] = s
	}
	return s
}

func (t *tracker) fetched(topic string, part int, off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state(topic, part).outstanding[off]++
}

// ack records that off is done and returns the offset to commit, if the
// partition's commit point moved.
func (t *tracker) ack(topic string, part int, off int64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if n := s.outstanding[off]; n > 1 {
		s.outstanding[off] = n - 1
	} else {
		delete(s.outstanding, off)
	}
	if off > s.committed {
		s.acked = append(s.acked, off)
	}
	low := int64(math.MaxInt64)
	for o := range s.outstanding {
		low = min(low, o)
	}
	best := int64(-1)
	for _, o := range s.acked {
		if o < low && o > best {
			best = o
		}
	}
	if best <= s.committed {
		return 0, false
	}
	return best, true
}

// committed records a successful commit through off.
func (t *tracker) committed(topic string, part int, off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if off <= s.committed {
		return
	}
	s.committed = off
	kept := s.acked[:0]
	for _, o := range s.acked {
		if o > off {
			kept = append(kept, o)
		}
	}
	s.acked = kept
}

func (t *tracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.parts {
		for _, c := range s.outstanding {
			n += c
		}
	}
	return n
}
