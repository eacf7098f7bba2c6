package hybrid

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// splitJobs walks jobs split by partition on two CPU sides (the second in
// the device's place: one worker taking every queued batch, as the GPU's
// side does) and returns the walks by (tag, id) as collect does, checking
// that chunks come whole and in walk-id order.
func splitJobs(t *testing.T, host, dev *cpu.Engine, plan *PartPlan, jobs []walk.Job) (map[[2]uint64][]uint32, []SplitStats) {
	t.Helper()
	devSet := plan.DeviceSet()
	hostSet := devSet.Complement(int(plan.Vertices))
	out := map[[2]uint64][]uint32{}
	var stats []SplitStats
	for _, j := range jobs {
		rows := walk.NewHandoverRows(j.Starts, j.Algorithm.Length)
		hs, err := host.NewHandoverSide(j, hostSet, rows)
		if err != nil {
			t.Fatal(err)
		}
		// The side in the device's place writes its own rows, NoVertex
		// where it took no step, merged at the end as the GPU's are
		// (HandoverRows.Device).
		devRows := &walk.HandoverRows{Rows: make([]uint32, len(rows.Rows)), Lens: rows.Lens, Stride: rows.Stride}
		for i := range devRows.Rows {
			devRows.Rows[i] = graph.NoVertex
		}
		ds, err := dev.NewHandoverSide(j, devSet, devRows)
		if err != nil {
			t.Fatal(err)
		}
		st, err := RunPartSplit(context.Background(), j, rows, [2]SideConfig{
			{Name: "cpu", Side: hs, Set: hostSet, Workers: 3},
			{Name: "dev", Side: ds, Set: devSet, Workers: 1, Gather: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		stats = append(stats, st)
		rows.Device = devRows.Rows
		next := j.FirstWalk
		err = EmitRows(j, rows, 777, 3, func(c walk.Chunk) error {
			for k := range c.Len() {
				if c.WalkIDs[k] != next {
					t.Fatalf("job %d: walk %d emitted after %d", j.Tag, c.WalkIDs[k], next-1)
				}
				next++
				if c.Starts[k] != c.Walk(k)[0] {
					t.Fatalf("job %d walk %d: start %d, walk %v", j.Tag, c.WalkIDs[k], c.Starts[k], c.Walk(k))
				}
				out[[2]uint64{uint64(c.Tag), c.WalkIDs[k]}] = slices.Clone(c.Walk(k))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if next != j.FirstWalk+uint64(len(j.Starts)) {
			t.Fatalf("job %d: %d walks emitted, want %d", j.Tag, next-j.FirstWalk, len(j.Starts))
		}
	}
	return out, stats
}

// TestPartSplitEqualsCPU: a job split by partition between the CPU side
// and a second CPU side in the device's place, with walkers handed
// between them through the queues, gives the CPU engine's walks byte for
// byte, in walk-id order: DeepWalk weighted and uniform and PPR on the
// fused ring and (fused table off) on the scalar steps, Node2Vec and
// MetaPath on the scalar steps, at device shares from none to all. The
// steps of both sides add up to the walks' and, where both hold edges,
// both sides walk and walkers are handed both ways.
func TestPartSplitEqualsCPU(t *testing.T) {
	g := testGraph(t)
	starts := spreadStarts(g, 5000, 37)
	jobs := []walk.Job{
		{Tag: 7, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: true}, Seed: 1, Starts: starts},
		{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 15}, Seed: 2, Starts: starts[:4000], FirstWalk: 1 << 33},
		{Tag: 9, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.2, Weighted: true}, Seed: 3, Starts: starts[100:3100]},
		{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 2, Q: 0.5, Weighted: true}, Seed: 4, Starts: starts[:1500]},
		{Tag: 5, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 12, Schema: []uint8{0, 1, 2}}, Seed: 5, Starts: starts[:1200]},
	}
	for _, fused := range []bool{true, false} {
		var opts []cpu.Option
		if !fused {
			opts = append(opts, cpu.WithFusedTableLimit(0))
		}
		want := collect(t, newCPU(t, g, append(opts, cpu.WithWorkers(2))...), jobs)
		host, dev := newCPU(t, g, opts...), newCPU(t, g, opts...)
		for _, share := range []float64{0, 0.1, 0.5, 1} {
			t.Run(fmt.Sprintf("fused=%v/device=%.0f%%", fused, 100*share), func(t *testing.T) {
				plan := PlanParts(g, int64(share*float64(g.NumEdges())), 16)
				got, stats := splitJobs(t, host, dev, plan, jobs)
				sameWalks(t, got, want)
				for i, st := range stats {
					var steps int64
					for k := range jobs[i].Starts {
						steps += int64(len(want[[2]uint64{uint64(jobs[i].Tag), jobs[i].FirstWalk + uint64(k)}]) - 1)
					}
					if st.Steps[0]+st.Steps[1] != steps || st.Ended[0]+st.Ended[1] != int64(len(jobs[i].Starts)) {
						t.Fatalf("job %d: %s; want %d steps, %d walks", jobs[i].Tag, st, steps, len(jobs[i].Starts))
					}
					mixed := plan.DeviceEdges > 0 && plan.DeviceEdges < plan.Edges
					if mixed && i == 0 && (st.Steps[0] == 0 || st.Steps[1] == 0 || st.Handed[0] == 0 || st.Handed[1] == 0) {
						t.Fatalf("job %d at %s: %s; want both sides walking and walkers handed both ways", jobs[i].Tag, plan, st)
					}
					if !mixed && (st.Handed[0] != 0 || st.Handed[1] != 0) {
						t.Fatalf("job %d at %s: %s; want no walker handed over", jobs[i].Tag, plan, st)
					}
				}
			})
		}
	}
}

// TestPlanPartsDensestFirst: the device gets the densest partitions that
// fit its edges, never more, and the sets cover every vertex once.
func TestPlanPartsDensestFirst(t *testing.T) {
	g := testGraph(t)
	for _, share := range []float64{0, 0.25, 0.5, 1} {
		budget := int64(share * float64(g.NumEdges()))
		p := PlanParts(g, budget, 32)
		if len(p.Device) > 32 || len(p.Bounds) != len(p.Device)+1 {
			t.Fatalf("%s: %d partitions, %d bounds; want at most 32", p, len(p.Device), len(p.Bounds))
		}
		if p.DeviceEdges > budget {
			t.Fatalf("%s: %d device edges over the budget %d", p, p.DeviceEdges, budget)
		}
		if share == 1 && p.DeviceEdges != int64(g.NumEdges()) {
			t.Fatalf("%s: want every edge on the device", p)
		}
		dev := p.DeviceSet()
		host := dev.Complement(g.NumVertices())
		var edges int64
		for v := range g.NumVertices() {
			if dev.Has(uint32(v)) == host.Has(uint32(v)) {
				t.Fatalf("vertex %d on both sides or neither", v)
			}
			if dev.Has(uint32(v)) {
				edges += int64(g.Offsets[v+1] - g.Offsets[v])
			}
		}
		if edges != p.DeviceEdges {
			t.Fatalf("%s: the set holds %d edges", p, edges)
		}
		// Densest first: no host partition is denser than a device one.
		var minDev, maxHost float64 = 1e18, -1
		for i := range p.Device {
			d := float64(g.Offsets[p.Bounds[i+1]]-g.Offsets[p.Bounds[i]]) / float64(p.Bounds[i+1]-p.Bounds[i])
			if p.Device[i] {
				minDev = min(minDev, d)
			} else {
				maxHost = max(maxHost, d)
			}
		}
		_ = maxHost // a denser host partition may simply not fit what is left
		if p.DeviceEdges > 0 && minDev <= 0 {
			t.Fatalf("%s: an empty partition on the device", p)
		}
	}
}

// cancelling is a side that cancels the run at its first call and hands
// every walker back untouched.
type cancelling struct{ cancel func() }

func (c cancelling) Advance(in, out []walk.Walker) ([]walk.Walker, int, int64) {
	c.cancel()
	return append(out, in...), 0, 0
}

// TestPartSplitCancelled: a context cancelled while walkers are queued
// ends the split with its error (the walkers would otherwise bounce
// between the sides for ever).
func TestPartSplitCancelled(t *testing.T) {
	g := testGraph(t)
	e := newCPU(t, g)
	starts := spreadStarts(g, 3000, 1)
	j := walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: true}, Seed: 9, Starts: starts}
	plan := PlanParts(g, int64(g.NumEdges())/2, 8)
	dev := plan.DeviceSet()
	host := dev.Complement(g.NumVertices())
	rows := walk.NewHandoverRows(starts, 40)
	hs, err := e.NewHandoverSide(j, host, rows)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = RunPartSplit(ctx, j, rows, [2]SideConfig{
		{Name: "cpu", Side: hs, Set: host, Workers: 2},
		{Name: "dev", Side: cancelling{cancel}, Set: dev, Workers: 1, Gather: true},
	})
	if err != context.Canceled {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// TestPilotCountsLikeTheSplit: the pilot of a whole job counts the steps
// and hand-overs the split itself makes (its walks are the job's), and the
// cost model chooses the split only where the host steps and hand-overs
// together are fewer than the CPU engine's steps: never at an R-MAT
// graph's half share (a hand-over every other step), at a share of all
// the edges always.
func TestPilotCountsLikeTheSplit(t *testing.T) {
	g := testGraph(t)
	e := newCPU(t, g)
	starts := spreadStarts(g, 4000, 1)
	j := walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 30, Weighted: true}, Seed: 11, Starts: starts}
	for _, share := range []float64{0.5, 1} {
		plan := PlanParts(g, int64(share*float64(g.NumEdges())), 16)
		dev := plan.DeviceSet()
		host := dev.Complement(g.NumVertices())
		// k = 1: every walk, with its own id.
		p, err := PilotPartSplit(context.Background(), e, j, dev, len(starts))
		if err != nil {
			t.Fatal(err)
		}
		rows := walk.NewHandoverRows(starts, 30)
		hs, _ := e.NewHandoverSide(j, host, rows)
		ds, _ := e.NewHandoverSide(j, dev, rows)
		st, err := RunPartSplit(context.Background(), j, rows, [2]SideConfig{
			{Name: "cpu", Side: hs, Set: host, Workers: 2}, {Name: "dev", Side: ds, Set: dev, Workers: 1, Gather: true}})
		if err != nil {
			t.Fatal(err)
		}
		if p.Walks != int64(len(starts)) || p.Steps != st.Steps[0]+st.Steps[1] || p.DeviceSteps != st.Steps[1] || p.Handovers != st.Handed[0]+st.Handed[1] {
			t.Fatalf("share %.0f%%: %s; the split: %s", 100*share, p, st)
		}
		if want := share == 1; p.Wins() != want {
			t.Fatalf("share %.0f%%: %s: chosen %v, want %v", 100*share, p, p.Wins(), want)
		}
	}
}

// spreadStarts is n start vertices of g, every stride-th vertex modulo its
// vertex count.
func spreadStarts(g *graph.Graph, n, stride int) []uint32 {
	starts := make([]uint32, n)
	for i := range starts {
		starts[i] = uint32(i*stride) % uint32(g.NumVertices())
	}
	return starts
}
