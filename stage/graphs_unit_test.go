package stage

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

func idGraph(t *testing.T, name string, edges ...graph.Edge) *graph.Graph {
	t.Helper()
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: name, Undirected: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Seeds are resolved again against the version a batch is walked on: dense
// ids change between versions, and seeds may have disappeared.
func TestRebindResolvesSeedsOnTheNewVersion(t *testing.T) {
	v1 := idGraph(t, "social", graph.Edge{Src: 100, Dst: 200}, graph.Edge{Src: 200, Dst: 300})
	v2 := idGraph(t, "social", graph.Edge{Src: 50, Dst: 200}, graph.Edge{Src: 200, Dst: 300}) // 100 gone, 50 new
	other := idGraph(t, "web", graph.Edge{Src: 100, Dst: 200})
	req := func() *message.Request {
		r, err := message.DecodeRequest(nil, []byte(`{"version":1,"batch_id":"b","graph":"social","algorithm":"deepwalk","seeds":[100,300]}`),
			v1, message.Limits{SkipUnknown: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dense := func(g *graph.Graph, ext int64) uint32 { v, _ := g.DenseID(ext); return v }
	cases := []struct {
		name   string
		g      *graph.Graph
		skip   bool
		reason message.Reason
		seeds  []int64
	}{
		{"same version", v1, false, "", []int64{100, 300}},
		{"seed gone, reject", v2, false, message.ReasonUnknownVertices, nil},
		{"seed gone, skip", v2, true, "", []int64{300}},
		{"another graph", other, true, message.ReasonGraphMismatch, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := req()
			re := rebind(r, c.g, c.skip)
			if c.reason != "" {
				if re == nil || re.Reason != c.reason {
					t.Fatalf("rebind = %v, want %s", re, c.reason)
				}
				return
			}
			if re != nil {
				t.Fatal(re)
			}
			if !slices.Equal(r.Seeds, c.seeds) || len(r.Starts) != len(c.seeds) {
				t.Fatalf("seeds %v starts %v, want %v", r.Seeds, r.Starts, c.seeds)
			}
			for i, s := range c.seeds {
				if r.Starts[i] != dense(c.g, s) {
					t.Errorf("seed %d: start %d, want %d", s, r.Starts[i], dense(c.g, s))
				}
			}
			if c.skip && len(c.seeds) < 2 && (r.Skipped != 1 || !slices.Equal(r.SkippedIDs, []string{"100"})) {
				t.Errorf("skipped %d %v", r.Skipped, r.SkippedIDs)
			}
		})
	}
}

func unitStage(t *testing.T, g *graph.Graph) *Stage {
	t.Helper()
	eng, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenBucket(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := New(Options{Graph: g, Engine: eng, Source: newMemSource(), Events: &memEvents{}, Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An overlap swap releases the old version only when its last reference
// (a batch still finishing on it) is gone; a drain swap whose new engine
// cannot be built goes back to the old version.
func TestSwapLifecycle(t *testing.T) {
	ctx := context.Background()
	v1 := idGraph(t, "social", graph.Edge{Src: 1, Dst: 2})
	v2 := idGraph(t, "social", graph.Edge{Src: 1, Dst: 3})
	v3 := idGraph(t, "social", graph.Edge{Src: 2, Dst: 3})
	s := unitStage(t, v1)
	gs := &s.graphs
	build := func(g *graph.Graph) (walk.Engine, error) {
		if g == v3 {
			return nil, errors.New("out of device memory")
		}
		return cpu.New(g)
	}
	f := &follower{s: s, build: build, log: slog.New(slog.DiscardHandler)}
	gs.follower = f

	held := gs.acquire(ctx) // a batch still finishing on v1
	if err := f.swap(ctx, v2, f.log, 0); err != nil {
		t.Fatal(err)
	}
	if gs.serving().g != v2 {
		t.Fatal("not serving v2 after the swap")
	}
	select {
	case <-held.released:
		t.Fatal("v1 released while a batch still uses it")
	default:
	}
	held.release()
	select {
	case <-held.released:
	case <-time.After(time.Second):
		t.Fatal("v1 not released after its last batch")
	}
	if n := metricValue(gs.swaps.WithLabelValues(config.SwapOverlap)); n != 1 {
		t.Errorf("swaps{overlap} = %v", n)
	}

	f.drain = true
	if err := f.swap(ctx, v3, f.log, 0); err == nil {
		t.Fatal("swap to an engine that cannot be built succeeded")
	}
	cur := gs.acquire(ctx)
	defer cur.release()
	if cur.g != v2 {
		t.Fatalf("after a failed drain swap serving %s, want v2 %s", cur.g.Version, v2.Version)
	}
	var steps int64
	err := cur.e.Run(ctx, []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 3}, Starts: []uint32{0}}},
		func(c walk.Chunk) error { steps += c.Steps(); return nil })
	if err != nil || steps == 0 {
		t.Fatalf("the rebuilt v2 engine does not walk: %v, %d steps", err, steps)
	}
	if gs.gate.Load() != nil {
		t.Fatal("launches still held after the drain swap")
	}
}

// A request pinned to a version that is not loaded waits for it and passes
// once a swap brings it; one whose wait runs out becomes a
// graph_version_unavailable rejection; unpinned requests pass meanwhile.
func TestPinnedRequestsWaitForTheirVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v1 := idGraph(t, "social", graph.Edge{Src: 1, Dst: 2})
	v2 := idGraph(t, "social", graph.Edge{Src: 1, Dst: 3})
	s := unitStage(t, v1)
	f := &follower{s: s, build: func(g *graph.Graph) (walk.Engine, error) { return cpu.New(g) }, log: slog.New(slog.DiscardHandler)}
	s.graphs.follower = f
	src := newMemSource()
	p := &pinSource{inner: src, gs: &s.graphs, wait: time.Minute, max: 4}
	body := func(id, version string) string {
		return `{"version":1,"batch_id":"` + id + `","algorithm":"deepwalk","seeds":[1],"graph_version":"` + version + `"}`
	}
	src.send(t, "to-v2", body("to-v2", v2.Version))
	src.send(t, "plain", `{"version":1,"batch_id":"plain","algorithm":"deepwalk","seeds":[1]}`)
	d, err := p.Next(ctx)
	if err != nil || d.BatchID() != "plain" || d.Reject != nil {
		t.Fatalf("first delivery %+v, %v: want the unpinned request while the pinned one waits", d, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.swap(ctx, v2, f.log, 0)
	}()
	d, err = p.Next(ctx)
	if err != nil || d.BatchID() != "to-v2" || d.Reject != nil || s.graphs.serving().g != v2 {
		t.Fatalf("second delivery %+v, %v: want to-v2 released by the swap", d, err)
	}

	p.wait = 200 * time.Millisecond
	src.send(t, "never", body("never", "0123456789abcdef"))
	d, err = p.Next(ctx)
	if err != nil || d.BatchID() != "never" || d.Reject == nil || d.Reject.Reason != ReasonGraphVersionUnavailable {
		t.Fatalf("third delivery %+v, %v: want never rejected after its wait", d, err)
	}
}

// String seeds are resolved again too, by string: a new version renumbers
// its vertices; a swap to a graph of the other id type keeps the seeds
// that still name vertices (decimal strings name integer ids).
func TestRebindResolvesStringSeeds(t *testing.T) {
	strGraph := func(edges ...[2]string) *graph.Graph {
		var es []graph.StringEdge
		for _, e := range edges {
			es = append(es, graph.StringEdge{Src: e[0], Dst: e[1]})
		}
		g, err := graph.FromStringEdges(es, graph.BuildOptions{Name: "social", Undirected: true})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	v1 := strGraph([2]string{"bob", "carol"}, [2]string{"carol", "dave"})
	v2 := strGraph([2]string{"alice", "bob"}, [2]string{"bob", "dave"}) // carol gone, alice renumbers the rest
	r, err := message.DecodeRequest(nil, []byte(`{"version":1,"batch_id":"b","algorithm":"deepwalk","seeds":["dave","carol","bob"]}`),
		v1, message.Limits{SkipUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if re := rebind(r, v2, true); re != nil {
		t.Fatal(re)
	}
	if !slices.Equal(r.StringSeeds, []string{"dave", "bob"}) || r.Seeds != nil || r.Skipped != 1 || !slices.Equal(r.SkippedIDs, []string{"carol"}) {
		t.Fatalf("string seeds %v, seeds %v, skipped %d %v", r.StringSeeds, r.Seeds, r.Skipped, r.SkippedIDs)
	}
	for i, s := range r.StringSeeds {
		if v2.ExternalString(r.Starts[i]) != s {
			t.Errorf("seed %q starts at %q", s, v2.ExternalString(r.Starts[i]))
		}
	}
	if re := rebind(r, strGraph([2]string{"bob", "carol"}), false); re == nil || re.Reason != message.ReasonUnknownVertices || !strings.Contains(re.Msg, "[dave]") {
		t.Fatalf("rebind to a version without a seed: %v", re)
	}

	// Integer seeds onto a graph with string ids: decimal strings.
	digits := strGraph([2]string{"100", "300"}, [2]string{"300", "x"})
	ints := idGraph(t, "social", graph.Edge{Src: 100, Dst: 300})
	r, err = message.DecodeRequest(nil, []byte(`{"version":1,"batch_id":"b","algorithm":"deepwalk","seeds":[100,300]}`), ints, message.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if re := rebind(r, digits, false); re != nil || !slices.Equal(r.StringSeeds, []string{"100", "300"}) || r.Seeds != nil {
		t.Fatalf("to string ids: %v %+v", re, r)
	}
	if re := rebind(r, ints, false); re != nil || !slices.Equal(r.Seeds, []int64{100, 300}) || r.StringSeeds != nil {
		t.Fatalf("back to integer ids: %v %+v", re, r)
	}
}
