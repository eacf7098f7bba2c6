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
//
// Offsets name records of one log. A partition whose log is replaced (a
// broker back without its data, the topic deleted and created again) reuses
// them for other records, so each partition's state carries an epoch that
// reset bumps: a delivery fetched under an older epoch belongs to a log that
// is gone, and its acknowledgement commits nothing in the new one.
type tracker struct {
	mu    sync.Mutex
	parts map[tp]*partState
}

type tp struct {
	topic string
	part  int
}

type partState struct {
	epoch uint64
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

// epoch is the partition's current log epoch, for the deliveries fetched
// from now on.
func (t *tracker) epoch(topic string, part int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state(topic, part).epoch
}

// fetched records a delivery. It reports false, recording nothing, for a
// delivery fetched under an older epoch: its log was reset meanwhile.
func (t *tracker) fetched(topic string, part int, off int64, epoch uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if epoch != s.epoch {
		return false
	}
	s.outstanding[off]++
	return true
}

// ack records that off is done and returns the offset to commit, if the
// partition's commit point moved. An acknowledgement from an older epoch
// changes nothing.
func (t *tracker) ack(topic string, part int, off int64, epoch uint64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if epoch != s.epoch {
		return 0, false
	}
	if n := s.outstanding[off]; n > 1 {
		s.outstanding[off] = n - 1
	} else {
		delete(s.outstanding, off)
	}
	if off > s.committed {
		s.acked = append(s.acked, off)
	}
	return s.point()
}

// point returns the offset to commit, if the partition's commit point is
// above its last commit. A commit point for an older epoch is none.
func (t *tracker) point(topic string, part int, epoch uint64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if epoch != s.epoch {
		return 0, false
	}
	return s.point()
}

func (s *partState) point() (int64, bool) {
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

// committed records a successful commit through off, made for a delivery
// of the given epoch.
func (t *tracker) committed(topic string, part int, off int64, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if epoch != s.epoch || off <= s.committed {
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

// lastCommitted is the highest offset this consumer committed in the
// partition's current log, -1 when none.
func (t *tracker) lastCommitted(topic string, part int) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state(topic, part).committed
}

// caughtUp raises the partition's commit point to the group's (another
// member committed further while it had the partition), so that no
// commit of this consumer moves the group's offset back.
func (t *tracker) caughtUp(topic string, part int, groupNext int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	if groupNext-1 > s.committed {
		s.committed = groupNext - 1
		kept := s.acked[:0]
		for _, o := range s.acked {
			if o > s.committed {
				kept = append(kept, o)
			}
		}
		s.acked = kept
	}
}

// reset starts a new epoch for a partition whose log was replaced:
// everything known of the old log is dropped, and the commit point is the
// one before next (the new log's first offset to read).
func (t *tracker) reset(topic string, part int, next int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(topic, part)
	s.epoch++
	clear(s.outstanding)
	s.acked = nil
	s.committed = max(next, 0) - 1
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
