package ooc

import (
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestChooseMostActiveFirst: the partition with the most waiting walkers
// is visited first, a cached one counting double; the slot given up for
// a load is an empty one, else the one with the fewest waiting walkers.
func TestChooseMostActiveFirst(t *testing.T) {
	e := &Engine{g: &graph.Graph{}, plan: Plan{Partitions: make([]Partition, 4), Slots: 3}, cfg: config{fixedSlots: true}}
	for range 3 {
		e.slots = append(e.slots, &part{id: -1})
	}
	rs := newRun(e, []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 3}, Starts: []uint32{0}}})
	rs.queues = [][]int32{make([]int32, 5), make([]int32, 9), nil, make([]int32, 6)}
	if p := rs.choose(); p != 1 {
		t.Fatalf("chose %d, want 1 (9 waiting)", p)
	}
	e.slots[0].id = 3 // 6 waiting, cached: counts 12
	if p := rs.choose(); p != 3 {
		t.Fatalf("chose %d, want the cached 3", p)
	}
	if v := rs.victim(nil, 1<<30); v != e.slots[1] {
		t.Fatal("victim is not an empty slot")
	}
	e.slots[1].id, e.slots[2].id = 0, 1
	if v := rs.victim(nil, 1<<30); v != e.slots[1] {
		t.Fatalf("victim holds %d, want partition 0 (5 waiting)", v.id)
	}
	if v := rs.victim(e.slots[1], 1<<30); v != e.slots[0] {
		t.Fatalf("victim holds %d, want partition 3 (6 waiting) when 0 is kept", v.id)
	}
	if v := rs.victim(nil, 4); v != nil {
		t.Fatalf("victim %d has more waiting walkers than the limit", v.id)
	}
	rs.queues = make([][]int32, 4)
	if p := rs.choose(); p != -1 {
		t.Fatalf("chose %d with no walker waiting", p)
	}
}
