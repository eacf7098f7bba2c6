package livegraph

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// TestRebaseEqualsRebuild compacts a live graph in the background while
// records go on being applied, rebases it on each compaction, and checks
// that every snapshot published before, between and after the rebases —
// checked at the end, after later rebases — compacts to the graph built
// offline from the model's edges at its publication, with its watermark:
// the records applied during a compaction are neither lost nor applied
// twice, and a rebase leaves the old base's snapshots whole.
func TestRebaseEqualsRebuild(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(7, uint64(len(v.name))))
			m, base := newModel(t, v, 40, 200, rng)
			l, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			type published struct {
				snap  *Snapshot
				want  *graph.Graph
				marks map[int32]int64
			}
			var pubs []published
			marks := map[int32]int64{}
			var done chan *graph.Graph
			var rb *Rebaser
			rebases := 0
			for i := range 500 {
				if i%80 == 10 {
					s, err := l.BeginCompaction()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := l.BeginCompaction(); err == nil {
						t.Fatal("a second compaction began while one is in progress")
					}
					// Every other rebase is caught up on the compacting
					// goroutine while the applier goes on (the stage's
					// way), the others all on the applier (Rebase).
					rb = nil
					if rebases%2 == 1 {
						if rb, err = l.NewRebaser(); err != nil {
							t.Fatal(err)
						}
					}
					done = make(chan *graph.Graph, 1)
					go func(rb *Rebaser) {
						g, err := Compact(ctx, s)
						if err != nil {
							t.Error(err)
						}
						if rb != nil {
							if err := rb.Base(g); err != nil {
								t.Error(err)
							}
							for range 3 {
								if _, err := rb.CatchUp(); err != nil {
									t.Error(err)
								}
							}
						}
						done <- g
					}(rb)
				}
				if i%80 == 45 {
					g := <-done
					before := l.Snapshot()
					var s *Snapshot
					var st RebaseStats
					var err error
					if rb != nil {
						s, st, err = l.FinishRebase(rb)
					} else {
						s, st, err = l.Rebase(g)
					}
					if err != nil {
						t.Fatal(err)
					}
					if rb == nil && st.TailUpdates != st.Updates || st.TailUpdates > st.Updates {
						t.Fatalf("rebase %d: %d of %d updates applied again on the applier", rebases, st.TailUpdates, st.Updates)
					}
					rebases++
					if s.Base() != g || before.Base() == g || st.Records != 35 {
						t.Fatalf("rebase %d: base swapped %v, old snapshot's base kept %v, %d records applied again, want 35", rebases, s.Base() == g, before.Base() != g, st.Records)
					}
					if !reflect.DeepEqual(s.Watermark(), marks) {
						t.Fatalf("rebase %d: watermark %v, want %v", rebases, s.Watermark(), marks)
					}
				}
				rec := m.randomRecord(rng)
				part := int32(i % 3)
				if err := l.Apply(part, int64(10*i), rec); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				marks[part] = int64(10*i) + 1
				if i%50 == 49 {
					pubs = append(pubs, published{l.Publish(), m.build(t, "base"), maps_clone(marks)})
				}
			}
			if rebases != 6 {
				t.Fatalf("%d rebases, want 6", rebases)
			}
			for k, p := range pubs {
				got, err := Compact(ctx, p.snap)
				if err != nil {
					t.Fatal(err)
				}
				if got.Checksum() != p.want.Checksum() || got.NumVertices() != p.want.NumVertices() || !reflect.DeepEqual(got.IDs, p.want.IDs) {
					t.Fatalf("snapshot %d: compacted %d vertices %d edges checksum %x, rebuilt %d vertices %d edges checksum %x",
						k, got.NumVertices(), got.NumEdges(), got.Checksum(), p.want.NumVertices(), p.want.NumEdges(), p.want.Checksum())
				}
				if !reflect.DeepEqual(p.snap.Watermark(), p.marks) {
					t.Fatalf("snapshot %d: watermark %v, want %v", k, p.snap.Watermark(), p.marks)
				}
				names := p.snap.Naming()
				for v := range p.snap.NumVertices() {
					if names.ExternalID(uint32(v)) != p.snap.ExternalID(uint32(v)) {
						t.Fatalf("snapshot %d: its naming graph names vertex %d %d, the snapshot %d", k, v, names.ExternalID(uint32(v)), p.snap.ExternalID(uint32(v)))
					}
				}
				for w := range p.want.NumVertices() {
					id := p.want.ExternalID(uint32(w))
					if v, ok := p.snap.DenseID(id); !ok || p.snap.ExternalID(v) != id {
						t.Fatalf("snapshot %d: id %d resolves to dense %d (%v), which names %d", k, id, v, ok, p.snap.ExternalID(v))
					}
				}
			}
		})
	}
}

// TestRebaseRefusals: a rebase without a compaction, or on a graph that is
// not the compacted snapshot's, changes nothing.
func TestRebaseRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	m, base := newModel(t, variants[1], 30, 100, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Rebase(base); !errors.Is(err, ErrNoCompaction) {
		t.Fatalf("rebase without a compaction: %v", err)
	}
	if err := l.Apply(0, 0, m.randomRecord(rng)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BeginCompaction(); err != nil {
		t.Fatal(err)
	}
	plain, _ := newModel(t, variants[0], 30, 100, rng)
	before := l.Snapshot()
	if _, _, err := l.Rebase(plain.build(t, "base")); err == nil {
		t.Fatal("rebase on an unweighted graph under a weighted live graph was accepted")
	}
	if l.Snapshot() != before || l.Base() != base || l.Compacting() != nil {
		t.Fatal("a refused rebase changed the live graph or kept its compaction")
	}
}

// TestDueForCompaction: the threshold needs both the ratio and the minimum.
func TestDueForCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	m, base := newModel(t, variants[0], 30, 100, rng) // 100 base edges
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rec := []Update{{Op: Insert, Src: m.ids[i], Dst: m.ids[i+1]}}
		if err := l.Apply(0, int64(i), rec); err != nil {
			t.Fatal(err)
		}
	}
	s := l.Publish() // a delta of 10
	for _, tc := range []struct {
		ratio float64
		min   int64
		want  bool
	}{{0.1, 1, true}, {0.11, 1, false}, {0.05, 10, true}, {0.05, 11, false}, {0, 1, false}} {
		if got := s.DueForCompaction(tc.ratio, tc.min); got != tc.want {
			t.Errorf("ratio %v min %d: due %v, want %v", tc.ratio, tc.min, got, tc.want)
		}
	}
}

// TestRebaseKeepsWindow: a live graph with a time window, compacted in the
// background and rebased while records go on, equals one that never
// compacts after every record — its compaction and its window (event
// time, cutoff). The compacted snapshot's newest edge is deleted, so a
// rebase that did not resume the window's event time would cut earlier.
func TestRebaseKeepsWindow(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	m, base := newModel(t, windowVariants[1], 40, 200, rng)
	var live [2]*Live
	for i := range live {
		l, err := New(base, WithWindow(40*time.Millisecond, 4))
		if err != nil {
			t.Fatal(err)
		}
		live[i] = l
	}
	var recs [][]Update
	for i := range 300 {
		m.clock = func(rng *rand.Rand) int64 { return 50 + int64(i) - rng.Int64N(60) }
		recs = append(recs, m.randomRecord(rng))
	}
	const begin, swap = 200, 202
	recs[begin-1] = append(recs[begin-1], Update{Op: Insert, Src: 1, Dst: 2, Time: 50 + begin + 25, Has: HasTime}, Update{Op: Delete, Src: 1, Dst: 2})
	l, ref := live[0], live[1]
	var compacted *graph.Graph
	for i, rec := range recs {
		switch i {
		case begin:
			s, err := l.BeginCompaction()
			if err != nil {
				t.Fatal(err)
			}
			if compacted, err = Compact(ctx, s); err != nil {
				t.Fatal(err)
			}
		case swap:
			if _, _, err := l.Rebase(compacted); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range live {
			if err := x.Apply(0, int64(i), rec); err != nil {
				t.Fatal(err)
			}
		}
		if i < swap {
			continue
		}
		a, b := l.Publish(), ref.Publish()
		ga, err := Compact(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := Compact(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		na, ca, _ := a.Window()
		nb, cb, _ := b.Window()
		if ga.Checksum() != gb.Checksum() || na != nb || ca != cb {
			t.Fatalf("record %d: rebased %d edges, window (%d, %d); never compacted %d edges, window (%d, %d)",
				i, ga.NumEdges(), na, ca, gb.NumEdges(), nb, cb)
		}
	}
}

// TestCatchUpDropsAppliedRecords: the records a catch up has applied over
// the new base are no longer held (a catch up may go on for many rounds
// under a stream), the rest are, the swap still applies the tail and
// equals the model, and a second Base, which would need the dropped
// records again, is refused.
func TestCatchUpDropsAppliedRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	m, base := newModel(t, variants[1], 30, 100, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	apply := func(n int) {
		for range n {
			rec := m.randomRecord(rng)
			if err := l.Apply(0, off, rec); err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	apply(5)
	from, err := l.BeginCompaction()
	if err != nil {
		t.Fatal(err)
	}
	rb, err := l.NewRebaser()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Compact(context.Background(), from)
	if err != nil {
		t.Fatal(err)
	}
	apply(7)
	if err := rb.Base(g); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.CatchUp(); err != nil {
		t.Fatal(err)
	}
	apply(3)
	c := l.compacting
	for i, rec := range c.records {
		if held := rec.ups != nil; held != (i >= 7) {
			t.Fatalf("record %d of %d after a catch up of 7: updates held %v", i, len(c.records), held)
		}
	}
	if err := rb.Base(g); err == nil {
		t.Fatal("a second base was accepted after the records applied over the first were dropped")
	}
	s, st, err := l.FinishRebase(rb)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 10 || st.TailUpdates == 0 {
		t.Fatalf("%+v, want 10 records, the last 3 at the swap", st)
	}
	got, err := Compact(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum() != m.build(t, "base").Checksum() {
		t.Fatal("after the swap the live graph differs from the model")
	}
}

// TestCatchUpCountsRecordsKeptMeanwhile: a catch up round returns how far
// behind the applier it is when it ends, the records the applier kept
// while it applied (here, after its second record, as the applier does on
// its goroutine), so that the stage's next round applies them and not the
// applier at the swap. Counted at the round's start, it was always zero.
func TestCatchUpCountsRecordsKeptMeanwhile(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	m, base := newModel(t, variants[2], 30, 100, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	apply := func(n int) (ups int64) {
		for range n {
			rec := m.randomRecord(rng)
			if err := l.Apply(0, off, rec); err != nil {
				t.Fatal(err)
			}
			off++
			ups += int64(len(rec))
		}
		return ups
	}
	apply(4)
	from, err := l.BeginCompaction()
	if err != nil {
		t.Fatal(err)
	}
	rb, err := l.NewRebaser()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Compact(context.Background(), from)
	if err != nil {
		t.Fatal(err)
	}
	first := apply(6)
	if err := rb.Base(g); err != nil {
		t.Fatal(err)
	}
	var meanwhile int64
	n := 0
	rb.applied = func() {
		if n++; n == 2 {
			meanwhile = apply(5)
		}
	}
	behind, err := rb.CatchUp()
	if err != nil {
		t.Fatal(err)
	}
	if behind != meanwhile || rb.st.Updates != first {
		t.Fatalf("the round applied %d updates (want the %d kept at its start) and is %d behind, want the %d kept meanwhile", rb.st.Updates, first, behind, meanwhile)
	}
	rb.applied = nil
	if behind, err = rb.CatchUp(); err != nil || behind != 0 {
		t.Fatalf("a second round is %d behind (%v), want 0", behind, err)
	}
	apply(2)
	s, st, err := l.FinishRebase(rb)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 13 || st.Updates-st.TailUpdates != first+meanwhile {
		t.Fatalf("%+v: want 13 records, the last 2 at the swap", st)
	}
	got, err := Compact(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum() != m.build(t, "base").Checksum() {
		t.Fatal("after the swap the live graph differs from the model")
	}
}
