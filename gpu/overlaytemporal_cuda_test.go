//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// TestOverlayTemporalMatchesCPU walks temporal walks on a live graph's
// snapshots (timedSnapshot: deletes, re-inserts at other times, stripped
// and added vertices) on the GPU and on the CPU engine, every bias and
// direction, weighted and not, with start times and gaps, and finds them
// equal walk for walk and time for time, on two snapshots in turn (the
// second copies its lists again) and back; every walk respects time.
// Temporal Node2Vec's rows take their classes in the snapshot.
func TestOverlayTemporalMatchesCPU(t *testing.T) {
	tm := func(b walk.TimeBias, scale float64, f func(*walk.TimeParams)) walk.TimeParams {
		p := walk.TimeParams{Bias: b, Scale: scale}
		if f != nil {
			f(&p)
		}
		return p
	}
	params := []struct {
		name string
		tp   walk.TimeParams
		p, q float64 // temporal Node2Vec's where set
	}{
		{"uniform", tm(walk.TimeUniform, 0, nil), 0, 0},
		{"linear", tm(walk.TimeLinear, 0, nil), 0, 0},
		{"exp-s3", tm(walk.TimeExponential, 3, nil), 0, 0},
		{"exp-s250", tm(walk.TimeExponential, 250, nil), 0, 0},
		{"exp-s1e5", tm(walk.TimeExponential, 1e5, nil), 0, 0},
		{"exp-s0.002-back", tm(walk.TimeExponential, 0.002, func(p *walk.TimeParams) { p.Backward = true }), 0, 0},
		{"exp-s40-start-gap", tm(walk.TimeExponential, 40, func(p *walk.TimeParams) {
			p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = 5000, true, 400, true
		}), 0, 0},
		{"linear-back-start-gap", tm(walk.TimeLinear, 0, func(p *walk.TimeParams) {
			p.Backward, p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = true, 15000, true, 3000, true
		}), 0, 0},
		{"uniform-start-gap", tm(walk.TimeUniform, 0, func(p *walk.TimeParams) {
			p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = 2000, true, 1500, true
		}), 0, 0},
		// Temporal Node2Vec: classes in the snapshot; p 0.01 rejects
		// nearly every proposal but a return, so windows without one
		// end in the exact fallbacks (the base's ZPRS, the list's scan).
		{"n2v-uniform", tm(walk.TimeUniform, 0, nil), 0.5, 2},
		{"n2v-linear", tm(walk.TimeLinear, 0, nil), 2, 0.5},
		{"n2v-exp-s250", tm(walk.TimeExponential, 250, nil), 0.5, 2},
		{"n2v-exp-s40-start-gap-rejecting", tm(walk.TimeExponential, 40, func(p *walk.TimeParams) {
			p.Start, p.HasStart, p.MaxGap, p.HasMaxGap = 5000, true, 400, true
		}), 0.01, 100},
		{"n2v-linear-back-rejecting", tm(walk.TimeLinear, 0, func(p *walk.TimeParams) { p.Backward = true }), 0.01, 1},
	}
	for _, weighted := range []bool{false, true} {
		l, early := timedSnapshot(t, 10, 7, weighted)
		applyRandomTimed(t, l, early.Base(), 107, weighted, 20000, int(early.Base().NumEdges())/60, 1)
		snap := l.Snapshot()
		base := snap.Base()
		ref, err := cpu.New(base)
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(t, base, WithMaxBatchWalks(2500), WithChunkWalks(700))
		for _, p := range params {
			alg := walk.Algorithm{Kind: walk.Temporal, Length: 40, Weighted: weighted, Time: p.tp, P: p.p, Q: p.q}
			for i, s := range []*livegraph.Snapshot{early, snap, early} {
				name := fmt.Sprintf("%s/weighted=%v/snapshot=%d", p.name, weighted, i)
				starts := make([]uint32, 0, 2*s.NumVertices()+600)
				for v := range uint32(s.NumVertices()) {
					starts = append(starts, v, v)
				}
				for range 200 {
					starts = append(starts, 0, 1, 2) // the stripped vertices
				}
				jobs := []walk.Job{{Tag: 1, Algorithm: alg, Seed: 31, Starts: starts, Overlay: s, WithTimes: true}}
				want := collectTimed(t, ref, jobs)[1]
				got := collectTimed(t, e, jobs)[1]
				steps, onDelta := 0, 0
				for id, cw := range want {
					gw := got[id]
					if !slices.Equal(gw.v, cw.v) || !slices.Equal(gw.t, cw.t) {
						t.Fatalf("%s: walk %d differs:\ngpu %v %v\ncpu %v %v", name, id, gw.v, gw.t, cw.v, cw.t)
					}
					for k := 1; k < len(gw.t); k++ {
						if back := p.tp.Backward; !back && gw.t[k] < gw.t[k-1] || back && gw.t[k] > gw.t[k-1] {
							t.Fatalf("%s: walk %d goes back in time at step %d: %v", name, id, k, gw.t)
						}
					}
					steps += len(gw.v) - 1
					for _, v := range gw.v[:len(gw.v)-1] {
						if s.Vertex(v) != nil {
							onDelta++
						}
					}
				}
				if steps == 0 || onDelta == 0 {
					t.Fatalf("%s: %d steps, %d from a vertex with a delta: nothing tested", name, steps, onDelta)
				}
			}
		}
	}
}

// TestOverlayTemporalAccepts: temporal walks on a snapshot, temporal
// Node2Vec included, are accepted.
func TestOverlayTemporalAccepts(t *testing.T) {
	_, snap := timedSnapshot(t, 8, 5, true)
	e := newEngine(t, snap.Base())
	for _, a := range []walk.Algorithm{{Kind: walk.Temporal, Length: 5}, {Kind: walk.Temporal, Length: 5, P: 2, Q: 1}} {
		if err := walk.CheckOverlay(e, a); err != nil {
			t.Fatalf("%s on a snapshot refused: %v", a, err)
		}
	}
}

// TestOverlayTemporalBench measures temporal walks on a live graph's
// snapshot on the GPU:
//
//	WALKSTAGE_GPU_OVERLAY_BENCH=22 .dev/gpu.test -test.run OverlayTemporalBench -test.v
//
// R-MAT scale $WALKSTAGE_GPU_OVERLAY_BENCH, edge factor 16, undirected,
// weighted, times uniform in [0, 10^6) (TestBenchRMAT's temporal graph);
// TestOverlayBench's delta of 10% of its edges with its inserts timed in
// the same span. Rows: the base, base + delta, and the delta's compaction
// on an engine of its own; one walk of 80 steps from every base vertex; M
// steps/s over kernel time, and the warm-up's gathering and copy of the
// snapshot's timed lists. Temporal Node2Vec's rows (p 0.5, q 2) come
// last; WALKSTAGE_GPU_OVERLAY_BENCH_ONLY=n2v runs only them.
func TestOverlayTemporalBench(t *testing.T) {
	scale, _ := strconv.Atoi(os.Getenv("WALKSTAGE_GPU_OVERLAY_BENCH"))
	if scale == 0 {
		t.Skip("set WALKSTAGE_GPU_OVERLAY_BENCH=<scale> to run the benchmark")
	}
	ctx := context.Background()
	const span = 1_000_000
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true,
		Name: fmt.Sprintf("rmat%d-timed", scale), TimeSpan: span})
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	snap, total, _ := benchDeltaShaped(t, g, 0, span)
	st := snap.Stats()
	t.Logf("delta: %d updates applied in %v: %d appended edges, %d tombstones, %d vertices with a delta, %d added",
		total, time.Since(t1), st.DeltaEdges, st.Tombstones, st.Vertices, st.Added)
	for _, w := range []bool{false, true} {
		t2 := time.Now()
		l, err := buildTimedLists(snap, snap.DeltaIndex(), walk.TimedBaseOf(g), w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("timed lists gathered on the host (weighted %v): %d lists, %d edges, %.1f MiB, in %v",
			w, len(l.off)-1, l.edges(), float64(l.bytes())/(1<<20), time.Since(t2))
	}
	compacted, err := livegraph.Compact(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g, WithHostBufferBytes(3<<29))
	ce := newEngine(t, compacted, WithHostBufferBytes(3<<29))
	all := allStarts(g, 1)
	var table []string
	row := func(name string, e *Engine, alg walk.Algorithm, ov walk.Overlay) {
		job := walk.Job{Algorithm: alg, Seed: 1, Starts: all}
		if ov != nil {
			job.Overlay = ov
		}
		warm := job
		warm.Starts = all[:1<<16]
		t0 := time.Now()
		if err := e.Run(ctx, []walk.Job{warm}, func(walk.Chunk) error { return nil }); err != nil {
			t.Fatalf("%s warm-up: %v", name, err)
		}
		warmWall := time.Since(t0)
		first := e.LastRunStats()
		if err := e.Run(ctx, []walk.Job{job}, func(walk.Chunk) error { return nil }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rs := e.LastRunStats()
		sec := rs.Compute.Seconds()
		line := fmt.Sprintf("| %-34s | %9d | %11d | %9.2f | %10.0f | %7.2f | %9.1f | %9.2f | %7.2f |",
			name, rs.Walks, rs.Steps, sec*1e3, float64(rs.Steps)/sec/1e6, rs.Wall.Seconds(),
			float64(first.DeltaBytes)/(1<<20), first.DeltaUpload.Seconds()*1e3, warmWall.Seconds())
		t.Log(line)
		table = append(table, line)
	}
	only := os.Getenv("WALKSTAGE_GPU_OVERLAY_BENCH_ONLY") // a row-name prefix, e.g. "n2v"
	for _, c := range []struct {
		name string
		bias walk.TimeBias
		p, q float64
	}{{"exp", walk.TimeExponential, 0, 0}, {"uniform", walk.TimeUniform, 0, 0}, {"linear", walk.TimeLinear, 0, 0},
		{"n2v exp", walk.TimeExponential, 0.5, 2}, {"n2v uniform", walk.TimeUniform, 0.5, 2}} {
		if !strings.HasPrefix(c.name, only) {
			continue
		}
		for _, w := range []bool{false, true} {
			alg := walk.Algorithm{Kind: walk.Temporal, Length: 80, Weighted: w, Time: walk.TimeParams{Bias: c.bias}, P: c.p, Q: c.q}
			if c.bias == walk.TimeExponential {
				alg.Time.Scale = 10_000
			}
			kind := "temporal " + c.name + map[bool]string{false: "", true: " weighted"}[w]
			row(kind+" base", e, alg, nil)
			row(kind+" base + 10% delta", e, alg, snap)
			row(kind+" compacted", ce, alg, nil)
		}
	}
	fmt.Printf("\nR-MAT scale %d ef 16 undirected weighted timed: V=%d E=%d; delta %d appended edges, %d tombstones, %d vertices with a delta; timed lists %d edges in %d lists\n",
		scale, g.NumVertices(), g.NumEdges(), st.DeltaEdges, st.Tombstones, st.Vertices, e.tl.edges, e.tl.n)
	fmt.Println("M steps/s: kernel time; lists MiB / copy ms: the warm-up run's gathering and copy of the snapshot's timed lists; warm s: its whole run")
	fmt.Println("| walk                               |     walks |       steps | kernel ms | M steps/s  | wall s  | lists MiB | copy ms   | warm s  |")
	fmt.Println("|------------------------------------|-----------|-------------|-----------|------------|---------|-----------|-----------|---------|")
	for _, r := range table {
		fmt.Println(r)
	}
}
