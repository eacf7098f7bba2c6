//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/visits"
)

// TestVisitsCPUEqualsGPU counts the same queries on both engines
// (visits.CountVisits over each engine's walks): wherever the walks are
// identical (uniform, alias, Node2Vec rejection, MetaPath label tables) the
// counts, steps and candidates are too.
func TestVisitsCPUEqualsGPU(t *testing.T) { visitsCPUEqualsGPU(t) }

// visitsCPUEqualsGPU runs TestVisitsCPUEqualsGPU on an engine made with opts.
func visitsCPUEqualsGPU(t *testing.T, opts ...Option) {
	g := testGraph(t)
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	gpu := newEngine(t, g, opts...)
	var qs []visits.VisitQuery
	for v := uint32(0); v < 60; v++ {
		qs = append(qs, visits.VisitQuery{Starts: []uint32{v * 61 % nTest}})
	}
	qs = append(qs, visits.VisitQuery{Starts: []uint32{vHub, vMid, vA}, Weights: []float64{1, 2, 3}},
		visits.VisitQuery{Starts: []uint32{vSink, vB}})
	cases := []struct {
		name string
		p    visits.VisitParams
	}{
		{"ppr uniform", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, StepsPerQuery: 30000, TopK: 100}},
		{"ppr weighted", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true}, StepsPerQuery: 20000, TopK: 50, ExcludeSeeds: true}},
		{"deepwalk weighted", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10, Weighted: true}, WalksPerSeed: 700, TopK: 20, MinVisits: 3}},
		{"node2vec", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 20, Weighted: true, P: 2, Q: 0.5}, StepsPerQuery: 15000, TopK: 30, ExcludeNeighbors: true}},
		{"metapath", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 12, Weighted: true, Schema: []uint8{0, 1, 2}}, StepsPerQuery: 10000, TopK: 30}},
		{"early stopping", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.3}, StepsPerQuery: 200000, TopK: 10, NP: 10, NV: 40}},
		{"deepwalk uniform", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 7}, StepsPerQuery: 12345, TopK: 1000, ExcludeNeighbors: true}},
		{"ppr walks per seed", visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.1}, WalksPerSeed: 1500, TopK: 40, MinVisits: 2}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.Seed = uint64(1000 + i)
			qs := qs
			if c.p.WalksPerSeed > 0 {
				qs = append([]visits.VisitQuery(nil), qs...)
				for k := range qs {
					qs[k].Weights = nil
				}
			}
			want, wst, err := visits.CountVisits(context.Background(), ref, g, c.p, qs)
			if err != nil {
				t.Fatal(err)
			}
			got, gst, err := visits.CountVisits(context.Background(), gpu, g, c.p, qs)
			if err != nil {
				t.Fatal(err)
			}
			// The same engine's walks counted on the host, for a failure's diagnosis.
			host, _, err := visits.CountVisits(context.Background(), hostCounting{gpu}, g, c.p, qs)
			if err != nil {
				t.Fatal(err)
			}
			for q := range want {
				if !reflect.DeepEqual(host[q], want[q]) {
					t.Errorf("query %d: gpu walks counted on the host differ from the cpu's: %s vs %s", q, head(host[q]), head(want[q]))
					break
				}
			}
			for q := range want {
				if !reflect.DeepEqual(got[q], want[q]) {
					t.Fatalf("query %d: gpu %+v\ncpu %+v", q, head(got[q]), head(want[q]))
				}
			}
			if gst.Steps != wst.Steps || gst.Walks != wst.Walks || gst.Candidates != wst.Candidates {
				t.Errorf("stats gpu %+v cpu %+v", gst, wst)
			}
			t.Logf("%d queries, %d steps, %d candidates: equal (counted on the device: %v)", len(qs), wst.Steps, wst.Candidates, deviceCounts(c.p))
		})
	}
}

// hostCounting hides the engine's DeviceVisitCounter: visits.CountVisits
// then counts its walks on the host.
type hostCounting struct{ walk.Engine }

func head(r visits.VisitResult) string {
	return fmt.Sprintf("steps %d walks %d stopped %v top %v", r.Steps, r.Walks, r.Stopped, r.Candidates[:min(5, len(r.Candidates))])
}

// TestVisitsBench measures the workload (queries of one random
// seed, PPR restart 0.2, 100,000 steps, top 100) on an R-MAT graph of
// WALKSTAGE_VISITS_SCALE (default 22) with the GPU engine walking and the
// host counting, and with the CPU engine on every core. Skipped unless
// WALKSTAGE_VISITS_BENCH is set.
func TestVisitsBench(t *testing.T) {
	if os.Getenv("WALKSTAGE_VISITS_BENCH") == "" {
		t.Skip("set WALKSTAGE_VISITS_BENCH=1")
	}
	scale := 22
	if s, err := strconv.Atoi(os.Getenv("WALKSTAGE_VISITS_SCALE")); err == nil {
		scale = s
	}
	t0 := time.Now()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true,
		Weighted: true, Name: fmt.Sprintf("rmat-s%d", scale)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("graph scale %d: V=%d E=%d in %s; %d CPU cores", scale, g.NumVertices(), g.NumEdges(), time.Since(t0).Round(time.Millisecond), runtime.NumCPU())
	gpu := newEngine(t, g)
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(g.NumVertices())
	mk := func(k int) []visits.VisitQuery {
		qs := make([]visits.VisitQuery, k)
		x := uint64(7)
		for i := range qs {
			for {
				x += 0x9E3779B97F4A7C15
				z := (x ^ x>>30) * 0xBF58476D1CE4E5B9
				z = (z ^ z>>27) * 0x94D049BB133111EB
				if v := uint32((z ^ z>>31) % n); g.Degree(v) > 0 {
					qs[i] = visits.VisitQuery{Starts: []uint32{v}}
					break
				}
			}
		}
		return qs
	}
	p := visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, Seed: 1, StepsPerQuery: 100_000, TopK: 100}
	for _, c := range []struct {
		name    string
		e       walk.Engine
		queries int
	}{{"gpu (device counting)", gpu, 20000}, {"gpu walks, host counting", hostCounting{gpu}, 4000}, {"cpu", ref, 2000}} {
		qs := mk(c.queries)
		for r := 0; r < 2; r++ {
			t1 := time.Now()
			_, st, err := visits.CountVisits(context.Background(), c.e, g, p, qs)
			if err != nil {
				t.Fatal(err)
			}
			d := time.Since(t1)
			if c.e == walk.Engine(gpu) {
				t.Logf("  device counting %s, copy back %s, waiting for the top k %s", gpu.visitPhases[0].Round(time.Millisecond),
					gpu.visitPhases[1].Round(time.Millisecond), gpu.visitPhases[2].Round(time.Millisecond))
			}
			t.Logf("%s: %d queries in %s: %.0f queries/s, %.0f M counted steps/s (%.0f M walked), %d runs",
				c.name, c.queries, d.Round(time.Millisecond), float64(c.queries)/d.Seconds(), float64(st.Steps)/d.Seconds()/1e6,
				float64(st.WalkedSteps)/d.Seconds()/1e6, st.Runs)
		}
	}
}

// TestVisitsDeviceTopKTies checks the device's cut to each query's best
// candidates where nearly every candidate ties: a star whose leaves only
// lead back to the hub (and a few to a second ring), so thousands of
// leaves share a handful of visit counts and the last candidates kept are
// chosen by vertex id, through every pass of the radix select. The counts
// are checked against the CPU engine's, whose host cut sees every slot.
func TestVisitsDeviceTopKTies(t *testing.T) {
	const leaves = 6000
	var edges []graph.Edge
	for x := int64(1); x <= leaves; x++ {
		edges = append(edges, graph.Edge{Src: 0, Dst: x, Weight: 1}, graph.Edge{Src: x, Dst: 0, Weight: 1})
		if x%7 == 0 {
			edges = append(edges, graph.Edge{Src: x, Dst: leaves + 1 + x%13, Weight: 1})
		}
	}
	for y := int64(leaves + 1); y <= leaves+13; y++ {
		edges = append(edges, graph.Edge{Src: y, Dst: 0, Weight: 1})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "star", Weighted: true, DenseIDs: true, NumVertices: leaves + 14})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	gpu := newEngine(t, g)
	qs := []visits.VisitQuery{{Starts: []uint32{0}}, {Starts: []uint32{7}}, {Starts: []uint32{leaves + 3}}, {Starts: []uint32{1, 2, 3}, Weights: []float64{1, 1, 2}}}
	for _, c := range []visits.VisitParams{
		{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40}, StepsPerQuery: 60000, TopK: 100},
		{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, StepsPerQuery: 100000, TopK: 1, ExcludeSeeds: true},
		{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40}, StepsPerQuery: 30000, TopK: 7, ExcludeNeighbors: true, MinVisits: 2},
		{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.5}, StepsPerQuery: 9000, TopK: 2500},
	} {
		c.Seed = 99
		want, _, err := visits.CountVisits(context.Background(), ref, g, c, qs)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := visits.CountVisits(context.Background(), gpu, g, c, qs)
		if err != nil {
			t.Fatal(err)
		}
		if !deviceCounts(c) {
			t.Fatalf("%+v is not counted on the device", c)
		}
		for q := range want {
			if !reflect.DeepEqual(got[q], want[q]) {
				t.Fatalf("top %d, query %d: gpu %s\ncpu %s", c.TopK, q, head(got[q]), head(want[q]))
			}
		}
		t.Logf("top %d: %d queries equal: %s", c.TopK, len(qs), head(want[0]))
	}
}

// TestVisitCallsOnDeviceMatchAlone: calls counted together in shared
// launches (visits.CountVisitCalls over the device batcher: tasks keyed by
// their own call's seed) give each call the CPU engine's counts for that
// call alone; calls of two kernel parameter sets (PPR, DeepWalk) and one
// the device does not count (early stopping) are mixed, with different
// seeds, budgets, top k, exclusions and walks per seed.
func TestVisitCallsOnDeviceMatchAlone(t *testing.T) {
	g := testGraph(t)
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	gpu := newEngine(t, g)
	var qs []visits.VisitQuery
	for v := uint32(0); v < 40; v++ {
		qs = append(qs, visits.VisitQuery{Starts: []uint32{v * 37 % nTest}})
	}
	qs = append(qs, visits.VisitQuery{Starts: []uint32{vHub, vMid, vA}, Weights: []float64{1, 2, 3}})
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}
	calls := []visits.VisitCall{
		{Params: visits.VisitParams{Algorithm: ppr, Seed: 1, StepsPerQuery: 20000, TopK: 100}, Queries: qs},
		{Params: visits.VisitParams{Algorithm: ppr, Seed: 2, StepsPerQuery: 7000, TopK: 10, ExcludeSeeds: true}, Queries: qs[:7]},
		{Params: visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 9, Weighted: true}, Seed: 3, WalksPerSeed: 300, TopK: 20, MinVisits: 2}, Queries: qs[3:9]},
		{Params: visits.VisitParams{Algorithm: ppr, Seed: 4, StepsPerQuery: 50000, TopK: 30, ExcludeNeighbors: true}, Queries: qs[10:]},
		{Params: visits.VisitParams{Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.3}, Seed: 5, StepsPerQuery: 100000, TopK: 10, NP: 10, NV: 40}, Queries: qs[:3]},
		{Params: visits.VisitParams{Algorithm: ppr, Seed: 6, StepsPerQuery: 20000, TopK: 100}, Queries: qs[:1]},
	}
	res, st, errs, err := visits.CountVisitCalls(context.Background(), gpu, g, calls)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		want, wst, err := visits.CountVisits(context.Background(), ref, g, c.Params, c.Queries)
		if err != nil {
			t.Fatal(err)
		}
		for q := range want {
			if !reflect.DeepEqual(res[i][q], want[q]) {
				t.Fatalf("call %d query %d: together on the gpu %s\nalone on the cpu %s", i, q, head(res[i][q]), head(want[q]))
			}
		}
		if st[i].Steps != wst.Steps || st[i].Walks != wst.Walks || st[i].Candidates != wst.Candidates || st[i].Queries != wst.Queries {
			t.Errorf("call %d: stats %+v, alone %+v", i, st[i], wst)
		}
		t.Logf("call %d (%s, on the device %v): %d queries, %d steps, %d candidates, %d runs: equal", i, c.Params.Algorithm.Kind,
			deviceCounts(c.Params), wst.Queries, wst.Steps, wst.Candidates, st[i].Runs)
	}
}
