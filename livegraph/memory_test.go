package livegraph

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestMemoryPerDeltaEdge bounds what a delta of a few appended edges a
// vertex costs per appended edge (issue 37 aims at 24 bytes): the live
// state (Stats.Bytes) and the walkers' delta index (DeltaIndex.Bytes), on
// BenchmarkOverlayWalk's workload at scale 14 (a 10% skewed insert delta
// and 1% deletes, about 3.5 appended edges a vertex with a delta). It also
// checks that Stats.Bytes is not below what the structures hold, counted
// from them, so that the bound cannot be met by counting less.
func TestMemoryPerDeltaEdge(t *testing.T) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Name: "mem"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	ups, _ := skewedDelta(base, rand.New(rand.NewPCG(3, 3)), weightedInsert)
	// Records of 1,000 updates, published after each while walks go on
	// (each publication makes its index): the states copied on write and
	// the index's patches as a stream leaves them.
	for i := 0; i < len(ups); i += 1000 {
		l.walkedAt.Store(time.Now().UnixNano())
		if err := l.Apply(0, int64(i), ups[i:min(len(ups), i+1000)]); err != nil {
			t.Fatal(err)
		}
		l.Publish()
	}
	l.walkedAt.Store(time.Now().UnixNano())
	s := l.Publish()
	st := s.Stats()

	// The structures, counted: tree nodes and vertex states (the tree
	// the last publication left, empty when it made an index), and every
	// delta's arrays' capacity.
	var held int64
	for _, m := range s.top {
		if m == nil {
			continue
		}
		held += int64(unsafe.Sizeof(*m))
		for _, lf := range m.leaves {
			if lf == nil {
				continue
			}
			held += int64(unsafe.Sizeof(*lf))
			for _, vs := range lf.v {
				if vs != nil {
					held += int64(unsafe.Sizeof(*vs))
				}
			}
		}
	}
	records := 0
	for v := range uint32(s.NumVertices()) {
		if dv := s.Vertex(v); dv != nil {
			records++
			held += l.edgeBytes(cap(edgesFull(dv))) + int64(len(dv.Dead()))*int64(unsafe.Sizeof(walk.Tombstone{}))
		}
	}
	if st.Bytes < held {
		t.Errorf("Stats.Bytes %d is below the %d bytes the delta's structures hold", st.Bytes, held)
	}
	if s.top != nil || s.under != s.DeltaIndex() {
		t.Errorf("a publication that made an index kept its tree")
	}
	if got := s.DeltaBytes(); got < st.Bytes+int64(records)*48 {
		t.Errorf("DeltaBytes %d is below Stats.Bytes %d and %d 48-byte records", got, st.Bytes, records)
	}
	// The records of a vertex with a delta, each a whole Go size class.
	if n := unsafe.Sizeof(walk.DeltaVertex{}); n != 48 {
		t.Errorf("a delta record is %d bytes, want 48", n)
	}
	index := s.DeltaIndex().Bytes()
	per := float64(st.Bytes+index) / float64(st.DeltaEdges)
	t.Logf("%d appended edges over %d vertices (%.2f a vertex), %d tombstones: live state %.1f + index %.1f = %.1f bytes per appended edge",
		st.DeltaEdges, st.Vertices, float64(st.DeltaEdges)/float64(st.Vertices), st.Tombstones,
		float64(st.Bytes)/float64(st.DeltaEdges), float64(index)/float64(st.DeltaEdges), per)
	// 63.9 before the compact states (a 112-byte vertex state, a pointer
	// and a 56-byte head in the index per vertex with a delta); 46.7 with
	// a 64-byte state, a pointer and a 48-byte head, and the appended
	// edges grown by halves; 39.9 with the state and the head one 48-byte
	// record (walk.DeltaVertex), kept in the tree and in the index; 24.6
	// with the tree dropped at each publication that makes an index
	// (one record a vertex, in the index).
	const bound = 25.0
	if per > bound {
		t.Errorf("%.1f bytes per appended edge, want at most %.1f", per, bound)
	}
}
