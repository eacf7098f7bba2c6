package stage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/segmentio/kafka-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/stage/config"
)

// versionFile writes one version of graph "social": same vertices, edges
// drawn from seed.
func versionFile(t *testing.T, dir string, scale int, seed uint64) (string, *graph.Graph) {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 4, Seed: seed,
		Undirected: true, Name: "social"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("social-%d.wsg", seed))
	if err := graph.Save(p, g); err != nil {
		t.Fatal(err)
	}
	return p, g
}

// A backlog runs while two new versions are published (and a corrupt one
// is refused): every event names one version, every walk step is an edge
// of that version, no batch is lost, batches produced after a swap walk on
// the new version, and pinned requests wait or are rejected.
func TestGraphFollowSwapsVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	for _, mode := range []string{config.SwapOverlap, config.SwapDrain} {
		t.Run(mode, func(t *testing.T) { testGraphFollow(t, mode, startS3) })
	}
	// The catalog, the graphs and the walks on a real S3 gateway process.
	t.Run(config.SwapOverlap+"-versitygw", func(t *testing.T) { testGraphFollow(t, config.SwapOverlap, startVersityS3) })
}

func testGraphFollow(t *testing.T, mode string, store func(testing.TB) (string, *blob.Bucket)) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	brokers := startKafka(t, 2)
	outURL, bucket := store(t)
	catURL := strings.Replace(outURL, "s3://walks?", "s3://walks/graphs?", 1)
	cu, _ := url.Parse(catURL)
	cu.Path += "/" + catalog.PointerName
	pointerURL := cu.String()

	dir := t.TempDir()
	var files []string
	graphs := map[string]*graph.Graph{}
	var versions []string
	for seed := uint64(1); seed <= 3; seed++ {
		f, g := versionFile(t, dir, 10, seed)
		files, versions = append(files, f), append(versions, g.Version)
		graphs[g.Version] = g
	}
	cat, err := catalog.Open(ctx, catURL)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Publish(ctx, files[0]); err != nil {
		t.Fatal(err)
	}

	environ := stageEnviron(brokers, pointerURL, outURL, "WALKSTAGE_GRAPH_POLL_INTERVAL=100ms", "WALKSTAGE_GRAPH_SWAP="+mode,
		"WALKSTAGE_GRAPH_VERSION_WAIT=3s", "WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=5ms",
		"WALKSTAGE_MICROBATCH_MAX_REQUESTS=4", "WALKSTAGE_GRAPH_DOWNLOAD_DIR="+t.TempDir())
	rt, stop := runStage(t, environ)
	gs := &rt.Stage.graphs
	if v := gs.serving().g.Version; v != versions[0] {
		t.Fatalf("started on %s, want the pointer's %s", v, versions[0])
	}

	// Events, collected as they come.
	var mu sync.Mutex
	events := map[string][]message.Event{}
	obs := newObserver(brokers, "out")
	defer obs.Close()
	go func() {
		for {
			m, err := obs.r.ReadMessage(ctx)
			if err != nil {
				return
			}
			var ev message.Event
			if json.Unmarshal(m.Value, &ev) == nil {
				mu.Lock()
				events[ev.BatchID] = append(events[ev.BatchID], ev)
				mu.Unlock()
			}
		}
	}()

	// The backlog: a request every few milliseconds until told to stop;
	// each remembers the version served when it was produced.
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "in", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond}
	defer w.Close()
	producedOn := map[string]int{} // batch id -> index of the version served when produced
	index := func(v string) int { return slices.Index(versions, v) }
	send := func(id string, body map[string]any) {
		if err := w.WriteMessages(ctx, request(id, body)); err != nil {
			t.Error(err)
		}
	}
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			id := fmt.Sprintf("b-%04d", i)
			mu.Lock()
			producedOn[id] = index(gs.serving().g.Version)
			mu.Unlock()
			send(id, map[string]any{"algorithm": "deepwalk", "length": 12, "walks_per_seed": 2,
				"seed_range": map[string]int{"first": (i * 37) % 900, "count": 100}})
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Pinned requests: to v3, not yet published (it waits, then walks on
	// v3), and to a version that never comes (rejected).
	send("pin-never", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": []int{1}, "graph_version": "0123456789abcdef"})

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	nEvents := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }
	waitFor("the backlog to start", func() bool { return nEvents() >= 10 })

	// A corrupt version whose pointer is self-consistent (size and SHA-256
	// match the bytes), as a broken pipeline might publish it: refused by
	// the graph's own checks, and v1 keeps serving.
	data, _ := os.ReadFile(files[1])
	data[len(data)/2] ^= 0x20
	sum := sha256.Sum256(data)
	bad := catalog.Pointer{Version: versions[1], Key: "graphs/versions/bad.wsg", Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Name: "social", Created: time.Now()}
	pj, _ := json.Marshal(bad)
	if err := bucket.WriteAll(ctx, bad.Key, data, nil); err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "graphs/CURRENT", pj, nil); err != nil {
		t.Fatal(err)
	}
	waitFor("the corrupt version's refusal", func() bool {
		return metricValue(gs.failures.WithLabelValues("corrupt")) == 1
	})
	time.Sleep(200 * time.Millisecond)
	if v := gs.serving().g.Version; v != versions[0] {
		t.Fatalf("serving %s after a corrupt publish, want %s", v, versions[0])
	}

	for _, i := range []int{1, 2} {
		if _, err := cat.Publish(ctx, files[i]); err != nil {
			t.Fatal(err)
		}
		waitFor("version "+versions[i], func() bool { return gs.serving().g.Version == versions[i] })
		if i == 1 {
			send("pin-v3", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": []int{1, 2, 3}, "graph_version": versions[2]})
		}
		n := nEvents()
		waitFor("batches on "+versions[i], func() bool { return nEvents() >= n+10 })
	}
	close(stopProducing)
	<-produced

	mu.Lock()
	want := len(producedOn) + 2
	mu.Unlock()
	waitFor("every batch's event", func() bool { return nEvents() == want })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for id, on := range producedOn {
		evs := events[id]
		if len(evs) == 0 {
			t.Errorf("%s: no event (lost)", id)
			continue
		}
		for _, ev := range evs {
			if ev.Status != message.StatusSucceeded {
				t.Errorf("%s: %s %s %s", id, ev.Status, ev.Reason, ev.Error)
				continue
			}
			g := graphs[ev.GraphVersion]
			if g == nil {
				t.Errorf("%s: walked on version %q, not a published one", id, ev.GraphVersion)
				continue
			}
			if index(ev.GraphVersion) < on {
				t.Errorf("%s: produced while %s was served, walked on the older %s", id, versions[on], ev.GraphVersion)
			}
			seen[ev.GraphVersion]++
			checkWalks(t, ctx, bucket, ev, g)
		}
	}
	for _, v := range versions {
		if seen[v] == 0 {
			t.Errorf("no batch walked on %s (seen %v)", v, seen)
		}
	}
	if evs := events["pin-v3"]; len(evs) == 0 || evs[0].Status != message.StatusSucceeded || evs[0].GraphVersion != versions[2] {
		t.Errorf("pin-v3: %+v", evs)
	}
	if evs := events["pin-never"]; len(evs) == 0 || evs[0].Reason != string(ReasonGraphVersionUnavailable) {
		t.Errorf("pin-never: %+v", evs)
	}
	if n := metricValue(gs.swaps.WithLabelValues(mode)); n != 2 {
		t.Errorf("walkstage_graph_swaps_total{mode=%s} = %v, want 2", mode, n)
	}
	mfs, _ := rt.Stage.o.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "walkstage_graph_swap_pause_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			t.Logf("%s: %d batches (%v per version); %d swaps paused launches %v in all", mode, len(producedOn), seen,
				h.GetSampleCount(), time.Duration(h.GetSampleSum()*1e9))
		}
	}
}

// checkWalks reads ev's objects: the manifest and every Parquet file name
// ev's version, and every step of every walk is an edge of it.
func checkWalks(t *testing.T, ctx context.Context, bucket interface {
	ReadAll(context.Context, string) ([]byte, error)
}, ev message.Event, g *graph.Graph) {
	t.Helper()
	var walks int64
	for _, o := range ev.Objects {
		data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
		if err != nil {
			t.Fatalf("%s: %v", ev.BatchID, err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if v, _ := f.Lookup(sink.MetaGraphVersion); v != ev.GraphVersion {
			t.Errorf("%s: file says graph version %q, event %q", o, v, ev.GraphVersion)
		}
		rows, err := parquet.Read[sink.Row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		for _, r := range rows {
			for i := 1; i < len(r.Walk); i++ {
				u, _ := g.DenseID(r.Walk[i-1])
				v, _ := g.DenseID(r.Walk[i])
				if !g.HasEdge(u, v) {
					t.Fatalf("%s: walk %d steps %d -> %d, not an edge of version %s", ev.BatchID, r.WalkID, r.Walk[i-1], r.Walk[i], g.Version)
				}
			}
		}
		walks += int64(len(rows))
	}
	if walks != ev.Walks {
		t.Errorf("%s: %d walks in the objects, event says %d", ev.BatchID, walks, ev.Walks)
	}
}

// TestGraphSwapMeasure measures a swap on a large graph while a backlog
// runs: the launch pause and the process's memory high-water mark. It runs
// only when WALKSTAGE_SWAP_MEASURE_SCALE is set (16-18), e.g.
//
//	WALKSTAGE_SWAP_MEASURE_SCALE=17 go test ./stage -run TestGraphSwapMeasure -v
//
// WALKSTAGE_GRAPH_SWAP picks the mode (default overlap). The catalog and the
// output are local directories (file://), so no in-memory store holds
// copies of the graphs.
func TestGraphSwapMeasure(t *testing.T) {
	scaleEnv := os.Getenv("WALKSTAGE_SWAP_MEASURE_SCALE")
	if scaleEnv == "" {
		t.Skip("set WALKSTAGE_SWAP_MEASURE_SCALE to measure")
	}
	var scale int
	fmt.Sscan(scaleEnv, &scale)
	mode := os.Getenv("WALKSTAGE_GRAPH_SWAP")
	if mode == "" {
		mode = config.SwapOverlap
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	brokers := startKafka(t, 2)
	dir := t.TempDir()
	catDir := filepath.Join(dir, "catalog")
	var files []string
	var versions []string
	for seed := uint64(1); seed <= 2; seed++ {
		g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: seed, Undirected: true,
			Weighted: true, Name: "social"})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("v%d.wsg", seed))
		if err := graph.Save(p, g); err != nil {
			t.Fatal(err)
		}
		files, versions = append(files, p), append(versions, g.Version)
		t.Logf("version %s: %d vertices, %d edges, file %d MiB", g.Version, g.NumVertices(), g.NumEdges(), fileSize(p)>>20)
	}
	cat, err := catalog.Open(ctx, "file://"+catDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Publish(ctx, files[0]); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	outURL := "file://" + filepath.Join(dir, "out")
	engine := "cpu"
	if e := os.Getenv("WALKSTAGE_SWAP_MEASURE_ENGINE"); e != "" { // gpu on a CUDA build with a device
		engine = e
	}
	rt, stop := runStage(t, stageEnviron(brokers, "file://"+filepath.Join(catDir, catalog.PointerName), outURL,
		"WALKSTAGE_GRAPH_POLL_INTERVAL=200ms", "WALKSTAGE_GRAPH_SWAP="+mode, "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_GRAPH_DOWNLOAD_DIR="+dir, "WALKSTAGE_MICROBATCH_MAX_WAIT=5ms", "WALKSTAGE_ENGINE="+engine))
	gs := &rt.Stage.graphs

	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "in", Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond}
	defer w.Close()
	stopProducing := make(chan struct{})
	produced := make(chan int)
	go func() {
		i := 0
		defer func() { produced <- i }()
		for ; ; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			v, _ := json.Marshal(map[string]any{"version": 1, "batch_id": fmt.Sprintf("m-%05d", i), "algorithm": "deepwalk",
				"weighted": true, "length": 40, "seed_range": map[string]int{"first": (i * 4099) % (1 << scale) / 2, "count": 2000}})
			if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(fmt.Sprintf("m-%05d", i)), Value: v}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(2 * time.Second) // steady state
	before := procStatus(t, "VmRSS")
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM to the current RSS
	t0 := time.Now()
	if _, err := cat.Publish(ctx, files[1]); err != nil {
		t.Fatal(err)
	}
	for gs.serving().g.Version != versions[1] {
		if ctx.Err() != nil {
			t.Fatal("no swap")
		}
		time.Sleep(10 * time.Millisecond)
	}
	swapped := time.Since(t0)
	time.Sleep(2 * time.Second) // the old version's last batches finish and release it
	peak := procStatus(t, "VmHWM")
	runtime.GC()
	debug.FreeOSMemory()
	after := procStatus(t, "VmRSS")
	close(stopProducing)
	n := <-produced
	stop()
	mfs, _ := rt.Stage.o.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "walkstage_graph_swap_pause_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			t.Logf("engine %s, mode %s, scale %d: publish to swap %v; launch pause %v; RSS before %d MiB, peak during swap %d MiB, after release %d MiB; %d requests produced",
				rt.EngineName(), mode, scale, swapped.Round(time.Millisecond), time.Duration(h.GetSampleSum()*1e9), before>>10, peak>>10, after>>10, n)
		}
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// procStatus reads a kB field of /proc/self/status.
func procStatus(t *testing.T, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb
		}
	}
	return 0
}
