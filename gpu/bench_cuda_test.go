//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestBenchRMAT is the benchmark, run on a GPU machine with
//
//	WALKSTAGE_GPU_BENCH=22 .dev/gpu.test -test.run BenchRMAT -test.v
//
// R-MAT scale $WALKSTAGE_GPU_BENCH, edge factor 16, undirected, weights in
// [1,5), 5 labels, times uniform in [0, 10^6) (temporal rows: exponential
// scale 10^4), one walk from every vertex, 80 steps (PPR: every walk
// from the highest-degree vertex). WALKSTAGE_GPU_BENCH_ONLY=name,name
// selects rows. Times are kernel time (events around the launches) after
// the graph is resident; the table build is reported separately.
func TestBenchRMAT(t *testing.T) {
	scale, _ := strconv.Atoi(os.Getenv("WALKSTAGE_GPU_BENCH"))
	if scale == 0 {
		t.Skip("set WALKSTAGE_GPU_BENCH=<scale> to run the benchmark")
	}
	t0 := time.Now()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1,
		Undirected: true, Weighted: true, Labels: 5, Name: fmt.Sprintf("rmat%d", scale), TimeSpan: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	maxDeg, hub := g.MaxDegree()
	t.Logf("graph: V=%d E=%d max degree %d (vertex %d), generated in %v", g.NumVertices(), g.NumEdges(), maxDeg, hub, time.Since(t0))
	t1 := time.Now()
	e := newEngine(t, g, WithHostBufferBytes(3<<29))
	t.Logf("upload + alias build: %v (alias build %v, %d bytes)", time.Since(t1), e.TableBuild(), e.tableBytes)

	all := allStarts(g, 1)
	fromHub := make([]uint32, g.NumVertices())
	for i := range fromHub {
		fromHub[i] = hub
	}
	temporal := func(b walk.TimeBias, weighted bool) walk.Algorithm {
		a := walk.Algorithm{Kind: walk.Temporal, Length: 80, Weighted: weighted, Time: walk.TimeParams{Bias: b}}
		if b == walk.TimeExponential {
			a.Time.Scale = 10_000
		}
		return a
	}
	// n2v makes a temporal walk temporal Node2Vec (p 0.5, q 2).
	n2v := func(a walk.Algorithm) walk.Algorithm { a.P, a.Q = 0.5, 2; return a }
	rows := []struct {
		name    string
		alg     walk.Algorithm
		starts  []uint32
		variant int // thread-kernel register budget: -1 engine's choice
		batch   int // walks per batch; 0 engine's choice
		thresh  uint32
	}{
		{"uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, all, -1, 0, 0},
		{"uniform-batched", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, all, -1, 1 << 20, 0},
		{"uniform-regs", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, all, 0, 0, 0},
		{"weighted-regs", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}, all, 0, 0, 0},
		{"node2vec-full", walk.Algorithm{Kind: walk.Node2Vec, Length: 80, Weighted: true, P: 2, Q: 0.5}, all, 1, 0, 0},
		{"metapath-zprs", walk.Algorithm{Kind: walk.MetaPath, Length: 80, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}, Stepper: walk.StepperZPRS}, all, -1, 0, 0},
		{"weighted", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}, all, -1, 0, 0},
		{"weighted-zprs", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}, all, -1, 0, 0},
		{"zprs-t256", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}, all, -1, 0, 256},
		{"zprs-t1024", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}, all, -1, 0, 1024},
		{"zprs-t16384", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}, all, -1, 0, 16384},
		{"dprs-t1024", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperDPRS}, all, -1, 0, 1024},
		{"weighted-dprs", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperDPRS}, all, -1, 0, 0},
		{"node2vec", walk.Algorithm{Kind: walk.Node2Vec, Length: 80, Weighted: true, P: 2, Q: 0.5}, all, -1, 0, 0},
		{"metapath", walk.Algorithm{Kind: walk.MetaPath, Length: 80, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}}, all, -1, 0, 0},
		{"metapath-dprs", walk.Algorithm{Kind: walk.MetaPath, Length: 80, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}, Stepper: walk.StepperDPRS}, all, -1, 0, 0},
		{"temporal", temporal(walk.TimeUniform, false), all, -1, 0, 0},
		{"temporal-linear", temporal(walk.TimeLinear, false), all, -1, 0, 0},
		{"temporal-exp", temporal(walk.TimeExponential, false), all, -1, 0, 0},
		{"temporal-exp-regs", temporal(walk.TimeExponential, false), all, 0, 0, 0},
		{"temporal-weighted", temporal(walk.TimeUniform, true), all, -1, 0, 0},
		{"temporal-lin-w", temporal(walk.TimeLinear, true), all, -1, 0, 0},
		{"temporal-exp-w", temporal(walk.TimeExponential, true), all, -1, 0, 0},
		{"temporal-n2v", n2v(temporal(walk.TimeUniform, false)), all, -1, 0, 0},
		{"temporal-n2v-exp", n2v(temporal(walk.TimeExponential, false)), all, -1, 0, 0},
		{"temporal-n2v-exp-w", n2v(temporal(walk.TimeExponential, true)), all, -1, 0, 0},
		{"ppr", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2}, fromHub, -1, 0, 0},
		{"ppr-weighted", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true}, fromHub, -1, 0, 0},
	}
	only := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("WALKSTAGE_GPU_BENCH_ONLY"), ",") {
		if s != "" {
			only[s] = true
		}
	}
	var table []string
	for _, r := range rows {
		if len(only) > 0 && !only[r.name] {
			continue
		}
		e.cfg.threadVariant, e.cfg.maxBatchWalks, e.cfg.warpThreshold = r.variant, r.batch, defaultConfig().warpThreshold
		if r.thresh != 0 {
			e.cfg.warpThreshold = r.thresh
		}
		// Warm-up on a slice of the walks (module load, first-touch).
		warm := []walk.Job{{Algorithm: r.alg, Seed: 7, Starts: r.starts[:min(len(r.starts), 1<<16)]}}
		if err := e.Run(context.Background(), warm, func(walk.Chunk) error { return nil }); err != nil {
			t.Fatalf("%s warm-up: %v", r.name, err)
		}
		sm := r.alg.ResolvedStepper()
		reservoir := (sm == walk.StepperZPRS || sm == walk.StepperDPRS) && !e.useLabelTables(r.alg)
		var scanned int64
		err := e.Run(context.Background(), []walk.Job{{Algorithm: r.alg, Seed: 1, Starts: r.starts}}, func(c walk.Chunk) error {
			if !reservoir {
				return nil
			}
			for k := 0; k < c.Len(); k++ {
				w := c.Walk(k)
				for _, v := range w[:len(w)-1] {
					scanned += int64(g.Degree(v))
				}
				if len(w) < r.alg.Length+1 {
					scanned += int64(g.Degree(w[len(w)-1])) // the step that found nothing
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		st := e.LastRunStats()
		if !reservoir {
			scanned = st.Steps
		}
		sec := st.Compute.Seconds()
		table = append(table, fmt.Sprintf("| %-19s | %9d | %11d | %9.2f | %10.0f | %11.0f | %8.0f | %7.2f |",
			r.name, st.Walks, st.Steps, sec*1e3, float64(st.Steps)/sec/1e6, float64(scanned)/sec/1e6,
			float64(st.MemoryBytes)/(1<<20), st.Wall.Seconds()))
	}
	var allocs []string
	var total int64
	for _, a := range e.Allocations() {
		allocs = append(allocs, fmt.Sprintf("%s=%.1fMiB", a.Name, float64(a.Bytes)/(1<<20)))
		total += a.Bytes
	}
	sort.Strings(allocs)
	fmt.Printf("\nR-MAT scale %d ef 16 undirected weighted 5 labels: V=%d E=%d maxdeg=%d; alias build %v (%.0f MiB)\n",
		scale, g.NumVertices(), g.NumEdges(), maxDeg, e.TableBuild(), float64(e.tableBytes)/(1<<20))
	fmt.Printf("device allocations (%.0f MiB): %s\n", float64(total)/(1<<20), strings.Join(allocs, " "))
	fmt.Println("M steps/s: kernel time; scanned: edges the sampler weighed (reservoir samplers: the whole adjacency; O(1) samplers: one a step)")
	fmt.Println("| algorithm      |     walks |       steps | kernel ms | M steps/s  | M scanned/s | pool MiB | wall s  |")
	fmt.Println("|----------------|-----------|-------------|-----------|------------|-------------|----------|---------|")
	for _, l := range table {
		fmt.Println(l)
	}
}
