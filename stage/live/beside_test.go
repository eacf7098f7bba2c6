package live

import (
	"context"
	"maps"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
)

// heldCores is Walkers with a count the test sets.
type heldCores struct{ n atomic.Int64 }

func (h *heldCores) WalkerCores() int { return int(h.n.Load()) }

// A pass takes every goroutine while walks hold fewer than half the cores
// (none, or a few probes), and beside a walk backlog the cores the walks
// leave free, at least Share of its own and one.
func TestBesideShares(t *testing.T) {
	cases := []struct {
		name        string
		held, procs int
		share       float64
		n, want     int
	}{
		{"no walks: all", 0, 16, 0.25, 16, 16},
		{"no walks, a compaction's 12", 0, 16, 0.25, 12, 12},
		{"the CPU engine's 16 walkers: the share", 16, 16, 0.25, 16, 4},
		{"a compaction beside them", 16, 16, 0.25, 12, 3},
		{"share 1: ingest first", 16, 16, 1, 16, 16},
		{"the least share still one", 16, 16, 0.01, 16, 1},
		{"one walk held: all", 1, 16, 0.25, 16, 16},
		{"three probes of a walk each: all", 3, 16, 0.1, 16, 16},
		{"three probes beside a compaction: all its 12", 3, 16, 0.1, 12, 12},
		{"7 of 16 held: no backlog yet", 7, 16, 0.1, 16, 16},
		{"8 CPU workers of 16: the free 8", 8, 16, 0.25, 16, 8},
		{"9 of 16 held: the free 7", 9, 16, 0.1, 16, 7},
		{"more held than the host", 32, 16, 0.5, 16, 8},
		{"two cores", 2, 2, 0.25, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h heldCores
			h.n.Store(int64(c.held))
			b := &Beside{Walkers: &h, Share: c.share, Procs: c.procs}
			if got := b.Cores(c.n); got != c.want {
				t.Errorf("%d held of %d, share %v: %d of %d goroutines, want %d", c.held, c.procs, c.share, got, c.n, c.want)
			}
		})
	}
}

// The applier's passes, fed by the edge reader from kfake over TCP, take
// the goroutines Beside leaves them: both of a two-mid graph's while no
// walk holds a core, one while walks hold all four (share a quarter); the
// watermark and the state are those of the records applied one by one.
func TestApplierYieldsToWalkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "edges", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	// Two tree mids (65,536 vertices each): a pass over both spreads over
	// two goroutines when it may.
	const n = 1<<16 + 4096
	var edges []graph.Edge
	for v := range int64(n) {
		edges = append(edges, graph.Edge{Src: v, Dst: (v*7 + 1) % n})
	}
	base, err := graph.FromEdges(edges, graph.BuildOptions{Name: "live", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	var walkers heldCores
	l.SetCores(&Beside{Walkers: &walkers, Share: 0.25, Procs: 4})
	// Records of 3,000 updates whose sources fall in both mids, each
	// above the size Apply spreads over goroutines.
	record := func(k int64) []livegraph.Update {
		var ups []livegraph.Update
		for i := range int64(3000) {
			op := livegraph.Insert
			if i%10 == 9 {
				op = livegraph.Delete
			}
			src := (k*7919 + i*37) % n
			ups = append(ups, livegraph.Update{Op: op, Src: src, Dst: (src*13 + i) % n})
		}
		return ups
	}
	m, stop := runReaderApplier(ctx, t, brokers, l)
	one, err := livegraph.New(base)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	// produce writes records k0..k0+2 on partitions 0 and 1, applies them
	// to one as well, and waits for the applier to publish past them.
	produce := func(k0 int64) {
		t.Helper()
		for k := k0; k < k0+3; k++ {
			p := int32(k % 2)
			ups := record(k)
			w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", Balancer: fixedPartition(p), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
			if err := w.WriteMessages(ctx, kafka.Message{Value: livegraph.AppendBinary(nil, ups)}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if err := one.Apply(p, want[p], ups); err != nil {
				t.Fatal(err)
			}
			want[p]++
		}
		if _, err := l.WaitFor(ctx, maps.Clone(want)); err != nil {
			t.Fatalf("watermark %v, want %v: %v", l.Snapshot().Watermark(), want, err)
		}
	}
	workers := func() float64 {
		var d dto.Metric
		if err := m.applyWorkers.Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetGauge().GetValue()
	}
	produce(0)
	if got := workers(); got != 2 {
		t.Errorf("no walks: the last pass took %v goroutines, want 2 (one a mid)", got)
	}
	walkers.n.Store(4)
	produce(3)
	if got := workers(); got != 1 {
		t.Errorf("walks holding the 4 cores: the last pass took %v goroutines, want 1 (a quarter)", got)
	}
	walkers.n.Store(0)
	produce(6)
	if got := workers(); got != 2 {
		t.Errorf("the walks done: the last pass took %v goroutines, want 2", got)
	}
	stop()
	got, exp := l.Snapshot(), one.Publish()
	// The counts, not the bytes: those depend on which publications made
	// a delta index (one that does drops the live graph's tree, Publish),
	// and the applier's did for the waits.
	gs, es := got.Stats(), exp.Stats()
	gs.Bytes, es.Bytes = 0, 0
	if gs != es || !maps.Equal(got.Watermark(), exp.Watermark()) {
		t.Fatalf("applier: %+v at %v; one by one: %+v at %v", got.Stats(), got.Watermark(), exp.Stats(), exp.Watermark())
	}
}
