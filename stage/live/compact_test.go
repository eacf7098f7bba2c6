package live

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/source"
)

// TestApplierCompactsInBackground drives the applier with edge batches: a
// delta past the threshold starts a compaction; a Prepare that fails drops
// it (failed, the delta stays over the loaded base) and a later
// publication past the threshold tries again; a Prepare that succeeds gets
// its swap called with the first snapshot of the compacted base, which
// holds every update applied (swapped). The compaction metrics count both.
func TestApplierCompactsInBackground(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	edges := []graph.Edge{{Src: 0, Dst: 1, Weight: 1}, {Src: 1, Dst: 2, Weight: 1}, {Src: 2, Dst: 0, Weight: 1}}
	opts := graph.BuildOptions{Name: "tri", DenseIDs: true, NumVertices: 3, SelfLoops: true, Duplicates: graph.DupKeepAll}
	base, err := graph.FromEdges(edges, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := NewCompactionMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	prepared := 0
	swapped := make(chan *livegraph.Snapshot, 1)
	c := &Compaction{Ratio: 1, MinDelta: 1, Metrics: cm,
		Prepare: func(_ context.Context, g *graph.Graph, from *livegraph.Snapshot) (func(*livegraph.Snapshot), error) {
			prepared++
			if prepared == 1 {
				return nil, errors.New("no engine today")
			}
			return func(s *livegraph.Snapshot) {
				if s.Base() != g {
					t.Errorf("swap with a snapshot of another base")
				}
				swapped <- s
			}, nil
		}}
	in := make(chan source.EdgeBatch)
	done := make(chan error, 1)
	go func() { done <- RunApplierWith(ctx, slog.New(slog.DiscardHandler), l, in, time.Millisecond, m, c) }()
	offset := int64(0)
	send := func(s, d int64) {
		in <- source.EdgeBatch{Partition: 0, Offset: offset, Updates: []livegraph.Update{{Op: livegraph.Insert, Src: s, Dst: d}}}
		offset++
		edges = append(edges, graph.Edge{Src: s, Dst: d, Weight: 1})
	}
	// Three inserts reach the threshold (a delta of 3 edges, 1x the
	// base's); the first compaction fails; the applier goes on until a
	// later one is swapped in.
	var snap *livegraph.Snapshot
	for snap == nil {
		send(offset%3, (offset+2)%3)
		select {
		case snap = <-swapped:
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no compaction swapped in")
		}
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, cm.compactions.WithLabelValues("failed")); v != 1 {
		t.Errorf("failed compactions %v, want 1", v)
	}
	if v := metricValue(t, cm.compactions.WithLabelValues("swapped")); v != 1 {
		t.Errorf("swapped compactions %v, want 1", v)
	}
	final := l.Snapshot()
	if final.Base() != snap.Base() || final.Watermark()[0] != offset {
		t.Fatalf("the live graph's base is not the swapped one, or its watermark %v is not %d", final.Watermark(), offset)
	}
	got, err := livegraph.Compact(ctx, final)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graph.FromEdges(edges, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum() != want.Checksum() {
		t.Fatalf("after the swap the live graph holds %d edges, want the %d applied", got.NumEdges(), want.NumEdges())
	}
}

func metricValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// The rebase's catch up goes on past its first rounds while it gains on
// the applier (a stream slower than it: halving its distance every
// catchUpRounds rounds reaches the tail), through rounds that gain nothing
// or lose (the cores are shared, so rounds vary), and stops when it no
// longer gains (a backlog, the applier as fast as it) or at the bound.
// Where it reaches the tail, the applier is left fewer than catchUpTail
// updates to apply at the swap.
func TestCatchUpRoundsWhileGaining(t *testing.T) {
	// noisy gains 30% twice and then loses 5%: 0.51 every three rounds,
	// under a sixth every eight, but one round in three gains nothing.
	noisy := func() func(int64) int64 {
		round := 0
		return func(b int64) int64 {
			round++
			if round%3 == 0 {
				return b + b/20
			}
			return b - b*3/10
		}
	}
	for _, tc := range []struct {
		name   string
		start  int64
		next   func(behind int64) int64
		rounds int
		tail   bool // whether it ends within catchUpTail of the applier
	}{
		{"gaining a fifth a round", 5_000_000, func(b int64) int64 { return b - b/5 }, 20, true},
		{"a round in three losing", 5_000_000, noisy(), 19, true},
		{"2 M behind, a round in three losing", 2_000_000, noisy(), 16, true},
		{"not gaining", 5_000_000, func(b int64) int64 { return b }, catchUpRounds + 1, false},
		{"gaining a hundredth", 5_000_000, func(b int64) int64 { return b - b/100 }, catchUpRounds + 1, false},
		{"at once", 5_000_000, func(int64) int64 { return catchUpTail - 1 }, 1, true},
		{"gaining a ninth, bounded", 1 << 62, func(b int64) int64 { return b - b/9 }, catchUpMaxRounds, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			behind := tc.start
			rounds, err := catchUpRounded(context.Background(), func() (int64, error) {
				behind = tc.next(behind)
				return behind, nil
			})
			if err != nil || rounds != tc.rounds {
				t.Fatalf("%d rounds (%v), %d left; want %d rounds", rounds, err, behind, tc.rounds)
			}
			if tc.tail && behind >= catchUpTail {
				t.Fatalf("the applier is left %d updates to apply at the swap, want fewer than %d", behind, catchUpTail)
			}
		})
	}
}

// A compaction leaves the applier a quarter of the cores, at least one.
func TestCompactionWorkers(t *testing.T) {
	for _, c := range []struct{ procs, want int }{{1, 1}, {2, 1}, {3, 2}, {4, 3}, {8, 6}, {16, 12}, {64, 48}} {
		if got := CompactionWorkers(c.procs); got != c.want {
			t.Errorf("CompactionWorkers(%d) = %d, want %d", c.procs, got, c.want)
		}
	}
}
