//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/hybrid"
)

// partSplitRun walks job split by partition between the CPU engine's
// side (cpuWorkers) and the device's, into rows (the device's copied back
// as rows.Device), and returns the stats.
func partSplitRun(t testing.TB, ce *cpu.Engine, pd *PartDevice, job walk.Job, rows *walk.HandoverRows, cpuWorkers int) hybrid.SplitStats {
	t.Helper()
	devSet := pd.Set()
	hostSet := devSet.Complement(pd.g.NumVertices())
	hs, err := ce.NewHandoverSide(job, hostSet, rows)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := pd.Side(job, rows)
	if err != nil {
		t.Fatal(err)
	}
	st, err := hybrid.RunPartSplit(context.Background(), job, rows, [2]hybrid.SideConfig{
		{Name: "cpu", Side: hs, Set: hostSet, Workers: cpuWorkers},
		{Name: "gpu", Side: ds, Set: devSet, Workers: 1, Gather: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Finish(); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPartSplitMatchesCPU: jobs split by partition between the CPU engine
// and the device (kernels/partsplit.cuh), walkers handed both ways through
// the queues, give the CPU engine's walks byte for byte: DeepWalk weighted
// and uniform, PPR, on the directed graph with a hub and dead ends and on
// weighted and unweighted R-MAT graphs, with 10%, 50% and 90% of the edges
// on the device.
func TestPartSplitMatchesCPU(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		ref, err := cpu.New(g)
		if err != nil {
			t.Fatal(err)
		}
		starts := allStarts(g, 3)
		jobs := []walk.Job{
			{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: g.Weighted()}, Seed: 42, Starts: starts},
			{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40}, Seed: 1<<40 + 7, Starts: starts},
			{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.1, Weighted: g.Weighted()}, Seed: 5, Starts: starts},
		}
		want := collect(t, ref, jobs)
		for _, share := range []float64{0.1, 0.5, 0.9} {
			t.Run(fmt.Sprintf("%s/device=%.0f%%", gname, 100*share), func(t *testing.T) {
				plan := hybrid.PlanParts(g, int64(share*float64(g.NumEdges())), 64)
				pd, err := NewPartDevice(g, plan.Bounds, plan.Device, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				defer pd.Close()
				for _, j := range jobs {
					rows := walk.NewHandoverRows(j.Starts, j.Algorithm.Length)
					st := partSplitRun(t, ref, pd, j, rows, 3)
					k := 0
					err := hybrid.EmitRows(j, rows, 1000, 2, func(c walk.Chunk) error {
						for i := range c.Len() {
							if c.WalkIDs[i] != uint64(k) {
								return fmt.Errorf("walk %d after %d", c.WalkIDs[i], k-1)
							}
							if w := want[j.Tag][k]; !slices.Equal(c.Walk(i), w) {
								return fmt.Errorf("job %d walk %d: %v, want %v (%s)", j.Tag, k, c.Walk(i), w, st)
							}
							k++
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if k != len(j.Starts) {
						t.Fatalf("job %d: %d walks emitted, want %d", j.Tag, k, len(j.Starts))
					}
					if j.Tag == 1 && (st.Steps[0] == 0 || st.Steps[1] == 0) {
						t.Fatalf("job %d: %s: want both sides walking", j.Tag, st)
					}
				}
			})
		}
	}
}

// TestPartSplitBench measures the partition split on the graph at
// $WALKSTAGE_PARTSPLIT_GRAPH (skipped without it) against the CPU engine
// alone in the same process: weighted DeepWalk, 80 steps, four walks a
// vertex, with 50%, 25% and 10% of the graph's stream bytes (offsets and
// 12-byte entries) on the device. Each figure is the best of two runs,
// the walks built into chunks (emitted to a no-op) included.
func TestPartSplitBench(t *testing.T) {
	path := os.Getenv("WALKSTAGE_PARTSPLIT_GRAPH")
	if path == "" {
		t.Skip("WALKSTAGE_PARTSPLIT_GRAPH not set")
	}
	g, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	length := 80
	starts := allStarts(g, 4)
	job := walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: length, Weighted: g.Weighted()}, Seed: 7, Starts: starts}
	if a := os.Getenv("WALKSTAGE_PARTSPLIT_UNIFORM"); a != "" {
		job.Algorithm.Weighted = false
	}
	ce, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	ce.PrepareTables()
	cores := runtime.GOMAXPROCS(0)
	var steps int64
	// The CPU engine alone, and a checksum of its walks (an untimed run).
	sum := func(c walk.Chunk, acc []uint64) {
		for i := range c.Len() {
			h := uint64(14695981039346656037)
			for _, v := range c.Walk(i) {
				h = (h ^ uint64(v)) * 1099511628211
			}
			acc[c.WalkIDs[i]] = h
		}
	}
	wantSum := make([]uint64, len(starts))
	if err := ce.Run(context.Background(), []walk.Job{job}, func(c walk.Chunk) error {
		sum(c, wantSum)
		steps += c.Steps()
		ce.Release(c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	best := func(n int, f func() time.Duration) time.Duration {
		b := time.Duration(1 << 62)
		for range n {
			b = min(b, f())
		}
		return b
	}
	cpuWall := best(2, func() time.Duration {
		t0 := time.Now()
		if err := ce.Run(context.Background(), []walk.Job{job}, func(c walk.Chunk) error { ce.Release(c); return nil }); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	})
	rate := func(d time.Duration) float64 { return float64(steps) / d.Seconds() / 1e6 }
	t.Logf("graph %s: V=%d E=%d, %s, %d walks, %d steps, %d cores", path, g.NumVertices(), g.NumEdges(), job.Algorithm, len(starts), steps, cores)
	t.Logf("cpu engine alone: %v, %.1f M steps/s", cpuWall.Round(time.Millisecond), rate(cpuWall))
	rows := walk.NewHandoverRows(starts, length)
	total := StreamBytesNeeded(g)
	offBytes := int64(len(g.Offsets)) * 8
	for _, share := range []float64{0.5, 0.25, 0.1} {
		devEdges := (int64(share*float64(total)) - offBytes) / 12
		plan := hybrid.PlanParts(g, devEdges, 1024)
		t0 := time.Now()
		scatter := 2
		if v, err := strconv.Atoi(os.Getenv("WALKSTAGE_PARTSPLIT_SCATTER")); err == nil {
			scatter = v
		}
		pd, err := NewPartDevice(g, plan.Bounds, plan.Device, 0, scatter)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%.0f%% of %d bytes: %s; device %d bytes, built in %v; %d scatter workers", 100*share, total, plan, pd.DeviceBytes(), time.Since(t0).Round(time.Millisecond), scatter)
		pilot, err := hybrid.PilotPartSplit(context.Background(), ce, job, pd.Set(), 100000)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("  %s", pilot)
		// Walks equal the CPU engine's (checksum of every walk, untimed).
		st := partSplitRun(t, ce, pd, job, rows, cores)
		gotSum := make([]uint64, len(starts))
		if err := hybrid.EmitRows(job, rows, 65536, cores, func(c walk.Chunk) error { sum(c, gotSum); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotSum, wantSum) {
			i := 0
			for gotSum[i] == wantSum[i] {
				i++
			}
			t.Errorf("%.0f%%: walk %d differs from the CPU engine's", 100*share, i)
		}
		t.Logf("  check run: %s", st)
		for _, workers := range []int{cores, cores - 2} {
			var walkT, emitT time.Duration
			var last hybrid.SplitStats
			d0 := pd.Stats()
			wall := best(2, func() time.Duration {
				t0 := time.Now()
				last = partSplitRun(t, ce, pd, job, rows, workers)
				t1 := time.Now()
				if err := hybrid.EmitRows(job, rows, 65536, cores, func(walk.Chunk) error { return nil }); err != nil {
					t.Fatal(err)
				}
				walkT, emitT = t1.Sub(t0), time.Since(t1)
				return time.Since(t0)
			})
			d1 := pd.Stats()
			t.Logf("  split, %d cpu workers: best %v, %.1f M steps/s, %.2fx the cpu engine (last run: walk %v, chunks %v)",
				workers, wall.Round(time.Millisecond), rate(wall), cpuWall.Seconds()/wall.Seconds(), walkT.Round(time.Millisecond), emitT.Round(time.Millisecond))
			t.Logf("    %s", last)
			t.Logf("    device, 2 runs: %d calls, %d walkers, %d steps, kernel %v, walker copies %v, host sort %v, %.2f GB in, %.2f GB out; rows back %v (%.2f GB)",
				d1.Calls-d0.Calls, d1.Walkers-d0.Walkers, d1.Steps-d0.Steps, (d1.Kernel - d0.Kernel).Round(time.Millisecond),
				(d1.Copy - d0.Copy).Round(time.Millisecond), (d1.Host - d0.Host).Round(time.Millisecond),
				float64(d1.BytesIn-d0.BytesIn)/1e9, float64(d1.BytesOut-d0.BytesOut)/1e9,
				(d1.Rows - d0.Rows).Round(time.Millisecond), float64(d1.RowBytes-d0.RowBytes)/1e9)
		}
		pd.Close()
	}
}

// TestPartEngineOnDevice: the partition split engine over the device side
// gives the CPU engine's walks and says which plan each job got: forced,
// the DeepWalk job split; unforced, as its pilot says (on an R-MAT graph at
// half the edges, the CPU engine); Node2Vec, which the device side does
// not walk, on the CPU engine either way.
func TestPartEngineOnDevice(t *testing.T) {
	g := streamGraphs(t)["rmat-weighted"]
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	starts := allStarts(g, 2)
	jobs := []walk.Job{
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: true}, Seed: 3, Starts: starts},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 2, Q: 0.5}, Seed: 4, Starts: starts[:3000]},
	}
	want := collect(t, ref, jobs)
	plan := hybrid.PlanParts(g, g.NumEdges()/2, 64)
	pd, err := NewPartDevice(g, plan.Bounds, plan.Device, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	for _, force := range []bool{true, false} {
		e, err := hybrid.NewPartEngine(g, hybrid.PartConfig{
			Fallback: ref, DeviceSet: pd.Set(), Force: force, CPUWorkers: 4, ChunkWalks: 1000,
			HostSide: func(j walk.Job, set walk.VertexSet, rows *walk.HandoverRows) (hybrid.PartSide, error) {
				return ref.NewHandoverSide(j, set, rows)
			},
			DeviceSide: func(j walk.Job, rows *walk.HandoverRows) (hybrid.PartSide, func() error, error) {
				s, err := pd.Side(j, rows)
				if err != nil {
					return nil, nil, err
				}
				return s, s.Finish, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, e, jobs)
		for tag, ws := range want {
			for id, w := range ws {
				if !slices.Equal(got[tag][id], w) {
					t.Fatalf("force %v: job %d walk %d: %v, want %v", force, tag, id, got[tag][id], w)
				}
			}
		}
		plans := e.LastPlans()
		wantPlan := map[bool]string{true: "partition", false: "fallback"}[force || plans[0].Pilot.Wins()]
		if plans[0].Plan != wantPlan || plans[1].Plan != "fallback" {
			t.Fatalf("force %v: plans %+v, want %s then fallback", force, plans, wantPlan)
		}
		t.Logf("force %v: %s; %s", force, plans[0].Pilot, plans[0].Split)
	}
}
