package chaos

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
)

// liveModel is the edge list an edge topic's records describe, for the
// offline rebuild: every vertex has a self-loop (never deleted), so none
// is edgeless and an id-mapped build keeps them all.
type liveModel struct {
	ids   []int64
	has   map[int64]bool
	edges []graph.Edge
}

type liveRecord struct {
	partition int32
	value     []byte
}

// livePartition keeps a vertex's updates on one partition, in order: the
// stage applies partitions in any interleaving.
func livePartition(src int64) int32 { return int32(((src % 2) + 2) % 2) }

// record makes one record of 1-3 updates from one vertex (a new vertex
// comes with a record of its self-loop first).
func (m *liveModel) record(rng *rand.Rand) []liveRecord {
	var out []liveRecord
	src := m.ids[rng.IntN(len(m.ids))]
	var ups []map[string]any
	for range 1 + rng.IntN(3) {
		if rng.IntN(10) < 7 {
			dst := m.ids[rng.IntN(len(m.ids))]
			if rng.IntN(10) == 0 {
				for dst = rng.Int64N(4000) - 500; m.has[dst]; dst = rng.Int64N(4000) - 500 {
				}
				m.ids, m.has[dst] = append(m.ids, dst), true
				m.edges = append(m.edges, graph.Edge{Src: dst, Dst: dst, Weight: 1})
				v, _ := json.Marshal(map[string]any{"op": "insert", "src": dst, "dst": dst})
				out = append(out, liveRecord{livePartition(dst), v})
			}
			m.edges = append(m.edges, graph.Edge{Src: src, Dst: dst, Weight: 1})
			ups = append(ups, map[string]any{"op": "insert", "src": src, "dst": dst})
			continue
		}
		var outs []int64
		for _, e := range m.edges {
			if e.Src == src && e.Dst != src {
				outs = append(outs, e.Dst)
			}
		}
		if len(outs) == 0 {
			continue
		}
		dst := outs[rng.IntN(len(outs))]
		m.edges = slices.DeleteFunc(m.edges, func(e graph.Edge) bool { return e.Src == src && e.Dst == dst })
		ups = append(ups, map[string]any{"op": "delete", "src": src, "dst": dst})
	}
	if len(ups) > 0 {
		v, _ := json.Marshal(ups)
		out = append(out, liveRecord{livePartition(src), v})
	}
	return out
}

func (m *liveModel) build() (*graph.Graph, error) {
	return graph.FromEdges(m.edges, graph.BuildOptions{Name: "ring", SelfLoops: true, Duplicates: graph.DupKeepAll})
}

// TestLiveGraphRecoversFromKills (issue 37) runs the real binary with a
// live graph against the broker process: an update stream of inserts (some
// naming new vertices) and deletes goes to the edge topic's two partitions
// while the stage compacts in the background at every publication (a tiny
// WALKSTAGE_EDGE_COMPACT_RATIO), publishing each compaction to a file
// catalog with its watermark, and is SIGKILLed and restarted several
// times, mid-compaction, mid-publication or mid-replay, as it falls. Each
// restart loads the catalog's CURRENT and replays the topic from its
// offsets. Once the stream has ended, the catalog's CURRENT must come to
// record the topic's end offsets, and its graph must be the offline rebuild
// from every record (content checksum and ids): nothing lost, nothing
// applied twice across the kills. The stage never exits by itself.
func TestLiveGraphRecoversFromKills(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: skipped under -short; CI runs it without -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if walkstageBin == "" {
		t.Skip("chaos suite: binaries not built (versitygw not found; WALKSTAGE_INTEGRATION=1 builds them anyway)")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WALKSTAGE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WALKSTAGE_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("live graph chaos: seed %d (replay: WALKSTAGE_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6c697665))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "logs")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stageLog := filepath.Join(logDir, "stage.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- stage log, last 60 lines ----\n%s", tail(stageLog, 60))
		}
	})
	_, brokerAddr := startBroker(t, logDir, 0)
	cl, err := newClient(brokerAddr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := createTopics(ctx, cl, 2, "in", "out", "dlq", "edges"); err != nil {
		t.Fatal(err)
	}

	m := &liveModel{has: map[int64]bool{}}
	for i := range 200 {
		id := int64(1000 + 7*i)
		m.ids, m.has[id] = append(m.ids, id), true
		m.edges = append(m.edges, graph.Edge{Src: id, Dst: id, Weight: 1}, graph.Edge{Src: id, Dst: 1000 + 7*int64((i+1)%200), Weight: 1})
	}
	base, err := m.build()
	if err != nil {
		t.Fatal(err)
	}
	graphPath := filepath.Join(dir, "ring.wsg")
	if err := graph.Save(graphPath, base); err != nil {
		t.Fatal(err)
	}
	catURL := "file://" + filepath.Join(dir, "live-catalog")
	metricsAddr := freeAddr(t)
	ready := pollReadiness(ctx, metricsAddr, 50*time.Millisecond)
	env := append(stageEnviron(brokerAddr, graphPath, "file://"+filepath.Join(dir, "out"), metricsAddr),
		"WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_PUBLISH_INTERVAL=20ms",
		"WALKSTAGE_EDGE_COMPACT_RATIO=0.000001", "WALKSTAGE_EDGE_COMPACT_MIN=1", "WALKSTAGE_EDGE_CATALOG="+catURL)
	sup := newSupervisor(t, time.Now(), stageLog, env)
	sup.start()

	// The stream: 2,000 records in 40 bursts over about 8 s; a kill every
	// 0.8-2 s meanwhile, and one after the stream while it catches up.
	produced := make(chan error, 1)
	go func() {
		for range 40 {
			var recs []*kgo.Record
			for range 50 {
				for _, r := range m.record(rng) {
					recs = append(recs, &kgo.Record{Topic: "edges", Partition: r.partition, Value: r.value})
				}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		produced <- nil
	}()
	kills := 0
	killRng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	for done := false; !done; {
		select {
		case err := <-produced:
			if err != nil {
				t.Fatalf("produce: %v", err)
			}
			done = true
		case <-time.After(800*time.Millisecond + time.Duration(killRng.IntN(1200))*time.Millisecond):
			sup.killAndRestart()
			kills++
		}
	}
	time.Sleep(time.Duration(killRng.IntN(500)) * time.Millisecond)
	sup.killAndRestart()
	kills++
	restarted := time.Now()
	if _, ok := ready.waitReady(ctx, restarted, 60*time.Second); !ok {
		t.Fatal("the stage did not come back ready within 60 s of its last restart")
	}
	end, err := endOffsets(ctx, cl, "edges", 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.build()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills; edge topic end offsets %v; the rebuilt graph has %d vertices, %d edges", kills, end, want.NumVertices(), want.NumEdges())

	cat, err := catalog.Open(ctx, catURL)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	var cur catalog.Pointer
	for {
		cur, err = cat.Current(ctx)
		if err == nil && maps.Equal(cur.EdgeOffsets, end) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the catalog's CURRENT never reached the end offsets %v: %+v, %v", end, cur, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if how := sup.stop(20 * time.Second); how != "exit status 0" {
		t.Errorf("the stage's last process ended with %s", how)
	}
	if ex := sup.unexpectedExits(); len(ex) > 0 {
		t.Errorf("the stage exited by itself: %+v", ex)
	}
	got, err := cat.Load(ctx, cur, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Checksum() != want.Checksum() || !slices.Equal(got.IDs, want.IDs) {
		t.Fatalf("after %d kills the published graph has %d vertices, %d edges (checksum %x); the offline rebuild from every record %d, %d (%x)",
			kills, got.NumVertices(), got.NumEdges(), got.Checksum(), want.NumVertices(), want.NumEdges(), want.Checksum())
	}
}
