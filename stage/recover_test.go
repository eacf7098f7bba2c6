package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// edgeModel is the edge list a live graph's records describe, for an
// offline rebuild: every vertex has a self-loop (never deleted), so none is
// edgeless and an id-mapped build keeps them all.
type edgeModel struct {
	ids   []int64
	has   map[int64]bool
	edges []graph.Edge
}

// edgeRecord is one record of the edge topic.
type edgeRecord struct {
	partition int
	ups       []map[string]any
}

func edgePartition(src int64) int { return int(((src % 2) + 2) % 2) }

// records makes n records of 1-3 updates, all from one source vertex, on
// the partition of that vertex: the applier applies partitions in any
// interleaving, and a vertex's updates stay in order on its partition.
func (m *edgeModel) records(rng *rand.Rand, n int) []edgeRecord {
	var out []edgeRecord
	for range n {
		src := m.ids[rng.IntN(len(m.ids))]
		rec := edgeRecord{partition: edgePartition(src)}
		for range 1 + rng.IntN(3) {
			if rng.IntN(10) < 7 {
				dst := m.ids[rng.IntN(len(m.ids))]
				if rng.IntN(10) == 0 {
					for dst = rng.Int64N(2300) - 300; m.has[dst]; dst = rng.Int64N(2300) - 300 {
					}
					m.ids, m.has[dst] = append(m.ids, dst), true
					m.edges = append(m.edges, graph.Edge{Src: dst, Dst: dst, Weight: 1})
					out = append(out, edgeRecord{partition: edgePartition(dst), ups: []map[string]any{{"op": "insert", "src": dst, "dst": dst}}})
				}
				m.edges = append(m.edges, graph.Edge{Src: src, Dst: dst, Weight: 1})
				rec.ups = append(rec.ups, map[string]any{"op": "insert", "src": src, "dst": dst})
				continue
			}
			dst := m.ids[rng.IntN(len(m.ids))]
			var out []int64
			for _, e := range m.edges {
				if e.Src == src && e.Dst != src {
					out = append(out, e.Dst)
				}
			}
			if len(out) > 0 && rng.IntN(4) > 0 {
				dst = out[rng.IntN(len(out))]
			}
			if dst == src {
				continue
			}
			m.edges = slices.DeleteFunc(m.edges, func(e graph.Edge) bool { return e.Src == src && e.Dst == dst })
			rec.ups = append(rec.ups, map[string]any{"op": "delete", "src": src, "dst": dst})
		}
		if len(rec.ups) > 0 {
			out = append(out, rec)
		}
	}
	return out
}

func (m *edgeModel) build(t *testing.T) *graph.Graph {
	t.Helper()
	g, err := graph.FromEdges(m.edges, graph.BuildOptions{Name: "ring", SelfLoops: true, Duplicates: graph.DupKeepAll})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// produceEdges writes recs to the edge topic, each on its partition, and
// returns each record's offset and the topic's end offsets after them
// (next holds the end offsets before).
func produceEdges(t *testing.T, ctx context.Context, brokers []string, recs []edgeRecord, next map[int32]int64) []int64 {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0] - '0') })}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	offsets := make([]int64, len(recs))
	for i, r := range recs {
		v, _ := json.Marshal(r.ups)
		msgs[i] = kafka.Message{Key: []byte{byte('0' + r.partition)}, Value: v}
		offsets[i] = next[int32(r.partition)]
		next[int32(r.partition)]++
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	return offsets
}

// cpuWalks walks 3 DeepWalks from every vertex of g on the CPU engine and
// returns them in walk id order, each ended by graph.NoVertex.
func cpuWalks(t *testing.T, g *graph.Graph) []uint32 {
	t.Helper()
	e, err := cpu.New(g, cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	var starts []uint32
	for v := range g.NumVertices() {
		starts = append(starts, uint32(v), uint32(v), uint32(v))
	}
	byID := make([][]uint32, len(starts))
	err = e.Run(context.Background(), []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 12}, Seed: 42, Starts: starts}}, func(c walk.Chunk) error {
		for k, id := range c.WalkIDs {
			byID[id] = slices.Clone(c.Walk(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for _, w := range byID {
		out = append(append(out, w...), graph.NoVertex)
	}
	return out
}

func counterSum(t *testing.T, rt *Runtime, name string, label ...string) float64 {
	t.Helper()
	mfs, err := rt.o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			ok := len(label) == 0
			for _, l := range m.Label {
				ok = ok || l.GetName() == label[0] && l.GetValue() == label[1]
			}
			if ok {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestLiveGraphCompactsAndRecovers runs the stage with a live graph
// against kfake over TCP, a file catalog and gofakes3. The base is an
// id-mapped ring with self-loops, and the edge topic gets random inserts
// (some naming new vertices) and deletes on two partitions. With a tiny
// compaction threshold the first stage compacts in the background while
// the records arrive, publishes each compaction to WALKSTAGE_EDGE_CATALOG
// with its watermark and swaps it in: a walk request that asks for every
// record's offset walks edges of the graph rebuilt offline from them, on a
// compacted base. The stage is stopped, more records arrive, and a second
// stage starts: it must load the catalog's CURRENT version, start its
// snapshots at the recorded watermark and apply only the records after it
// (walkstage_live_updates_total), and its graph, compacted, must be the
// offline rebuild from all records (checksum, ids, CPU walks byte for
// byte); a walk request on it walks that graph's edges.
func TestLiveGraphCompactsAndRecovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out", "dlq", "edges"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	outURL, bucket := startS3(t)
	rng := rand.New(rand.NewPCG(37, 37))
	m := &edgeModel{has: map[int64]bool{}}
	for i := range 40 {
		id := int64(1000 + 7*i)
		m.ids, m.has[id] = append(m.ids, id), true
		m.edges = append(m.edges, graph.Edge{Src: id, Dst: id, Weight: 1}, graph.Edge{Src: id, Dst: 1000 + 7*int64((i+1)%40), Weight: 1})
	}
	path := filepath.Join(t.TempDir(), "ring.wsg")
	if err := graph.Save(path, m.build(t)); err != nil {
		t.Fatal(err)
	}
	catURL := "file://" + filepath.Join(t.TempDir(), "live-catalog")
	env := stageEnviron(brokers, path, outURL, "WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_PUBLISH_INTERVAL=5ms",
		"WALKSTAGE_EDGE_OFFSETS_WAIT=30s", "WALKSTAGE_EDGE_COMPACT_RATIO=0.1", "WALKSTAGE_EDGE_COMPACT_MIN=1",
		"WALKSTAGE_EDGE_CATALOG="+catURL)
	offsetsJSON := func(wm map[int32]int64) map[string]int64 {
		o := map[string]int64{}
		for p, off := range wm {
			o[fmt.Sprint(p)] = off
		}
		return o
	}
	// Seeds of the base: decoded against its dense ids, which a
	// compaction renumbers (new vertices take ids among them).
	seeds := []int64{m.ids[0], m.ids[39], m.ids[17]}
	askWalks := func(id string, end map[int32]int64) {
		produce(t, brokers, "in", request(id, map[string]any{"algorithm": "deepwalk", "seeds": seeds, "length": 8,
			"walks_per_seed": 4, "edge_offsets": offsetsJSON(end)}))
	}
	checkLiveWalks := func(id string, end map[int32]int64, want *graph.Graph) {
		t.Helper()
		obs := newObserver(brokers, "out")
		defer obs.Close()
		events, err := obs.events(ctx, func(evs map[string][]message.Event) bool { return len(evs[id]) > 0 })
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		ev := events[id][0]
		if ev.Status != message.StatusSucceeded || ev.Walks != 12 || !maps.Equal(ev.EdgeOffsets, end) {
			t.Fatalf("%s: %+v, want 12 walks at edge offsets %v", id, ev, end)
		}
		checkWalks(t, ctx, bucket, ev, want)
		starts := map[int64]int{}
		for _, r := range liveWalks(t, ctx, bucket, ev) {
			if r.Walk[0] != r.Start {
				t.Fatalf("%s: walk %d starts at %d, its start says %d", id, r.WalkID, r.Walk[0], r.Start)
			}
			starts[r.Start]++
		}
		if !maps.Equal(starts, map[int64]int{seeds[0]: 4, seeds[1]: 4, seeds[2]: 4}) {
			t.Fatalf("%s: walks start at %v, want 4 from each of %v", id, starts, seeds)
		}
	}

	// The first stage compacts while the records arrive. A walk request
	// asks for all of them before they are written: its seeds are
	// resolved against the loaded base, and it walks after compactions.
	rtA, stopA := runStage(t, env)
	next := map[int32]int64{}
	recs1 := m.records(rng, 400)
	end1 := map[int32]int64{}
	for _, r := range recs1 {
		end1[int32(r.partition)]++
	}
	askWalks("after-compaction", end1)
	waiting := func() float64 {
		var m dto.Metric
		rtA.m.edgeWaits.Write(&m)
		return m.GetGauge().GetValue()
	}
	for waiting() != 1 {
		if ctxsleep.Sleep(ctx, 10*time.Millisecond) != nil {
			t.Fatal("the walk request does not wait for its edge offsets")
		}
	}
	// The records come in two parts, the second after a compaction was
	// swapped in: the request walks on a renumbered base.
	recs1Offs := produceEdges(t, ctx, brokers, recs1[:250], next)
	for counterSum(t, rtA, "walkstage_live_compactions_total", "result", "swapped") < 1 {
		if ctxsleep.Sleep(ctx, 10*time.Millisecond) != nil {
			t.Fatal("no compaction swapped in")
		}
	}
	recs1Offs = append(recs1Offs, produceEdges(t, ctx, brokers, recs1[250:], next)...)
	if _, err := rtA.o.Live.Graph.WaitFor(ctx, end1); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, catURL)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if rtA.graphs.serving().g == rtA.Graph {
		t.Fatal("the stage still serves the loaded graph after its compactions were swapped in")
	}
	checkLiveWalks("after-compaction", end1, m.build(t))
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	cur, err := cat.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur.EdgeTopic != "edges" || len(cur.EdgeOffsets) == 0 {
		t.Fatalf("CURRENT %+v records no watermark of topic edges", cur)
	}

	// More records while no stage runs; the second starts from CURRENT.
	recs2 := m.records(rng, 150)
	offs2 := produceEdges(t, ctx, brokers, recs2, next)
	var wantReplayed int
	for i, r := range append(slices.Clone(recs1), recs2...) {
		off := append(slices.Clone(recs1Offs), offs2...)[i]
		if off >= cur.EdgeOffsets[int32(r.partition)] {
			wantReplayed += len(r.ups)
		}
	}
	askWalks("after-recovery", next)
	rtB, _ := runStage(t, env)
	if rtB.Graph.Version != cur.Version {
		t.Fatalf("the restarted stage loaded graph version %s, the catalog's CURRENT is %s", rtB.Graph.Version, cur.Version)
	}
	snap, err := rtB.o.Live.Graph.WaitFor(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := counterSum(t, rtB, "walkstage_live_updates_total"); int(got) != wantReplayed {
		t.Fatalf("the restarted stage applied %v updates, want %d: those after the recorded offsets %v", got, wantReplayed, cur.EdgeOffsets)
	}
	want := m.build(t)
	got, err := livegraph.Compact(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum() != want.Checksum() || !slices.Equal(got.IDs, want.IDs) {
		t.Fatalf("the recovered graph compacts to %d vertices %d edges (checksum %x), the offline rebuild has %d, %d (%x)",
			got.NumVertices(), got.NumEdges(), got.Checksum(), want.NumVertices(), want.NumEdges(), want.Checksum())
	}
	if !slices.Equal(cpuWalks(t, got), cpuWalks(t, want)) {
		t.Fatal("walks on the recovered graph's compaction differ from walks on the offline rebuild")
	}
	checkLiveWalks("after-recovery", next, want)
}
