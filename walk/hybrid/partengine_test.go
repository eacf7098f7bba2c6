package hybrid

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// cpuDeviceSide is a second CPU engine in the device's place: it walks
// DeepWalk and PPR only (as the GPU side does), writing its own rows merged
// at the end as the GPU's are.
func cpuDeviceSide(e *cpu.Engine, dev walk.VertexSet) func(walk.Job, *walk.HandoverRows) (PartSide, func() error, error) {
	return func(j walk.Job, rows *walk.HandoverRows) (PartSide, func() error, error) {
		if k := j.Algorithm.Kind; k != walk.DeepWalk && k != walk.PPR {
			return nil, nil, errors.New("not DeepWalk or PPR")
		}
		own := &walk.HandoverRows{Rows: make([]uint32, len(rows.Rows)), Lens: rows.Lens, Stride: rows.Stride}
		for i := range own.Rows {
			own.Rows[i] = graph.NoVertex
		}
		s, err := e.NewHandoverSide(j, dev, own)
		return s, func() error { rows.Device = own.Rows; return nil }, err
	}
}

// TestPartEngineChoosesByPilot: the engine splits a job by partition only
// where the pilot's bound wins (all the edges on the device) or when
// forced, walks the others on its fallback engine (at half the edges, and
// Node2Vec, which the device side refuses), says which plan each job got
// and why in LastPlans and the log, and gives the CPU engine's walks
// either way.
func TestPartEngineChoosesByPilot(t *testing.T) {
	g := testGraph(t)
	starts := spreadStarts(g, 3000, 13)
	jobs := []walk.Job{
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: true}, Seed: 1, Starts: starts},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.2}, Seed: 2, Starts: starts[:2000], FirstWalk: 1 << 33},
		{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 2, Q: 0.5}, Seed: 3, Starts: starts[:1000]},
	}
	want := collect(t, newCPU(t, g, cpu.WithWorkers(2)), jobs)
	for _, c := range []struct {
		share float64
		force bool
		plans []string // by job; "" as the pilot says (PartPilot.Wins)
	}{
		{0.5, false, []string{"fallback", "", "fallback"}},
		{1, false, []string{"partition", "partition", "fallback"}},
		{0.5, true, []string{"partition", "partition", "fallback"}},
	} {
		t.Run(fmt.Sprintf("device=%.0f%%/force=%v", 100*c.share, c.force), func(t *testing.T) {
			dev := PlanParts(g, int64(c.share*float64(g.NumEdges())), 16).DeviceSet()
			host, devCPU := newCPU(t, g), newCPU(t, g)
			var log strings.Builder
			e, err := NewPartEngine(g, PartConfig{
				Fallback: newCPU(t, g, cpu.WithWorkers(2)), DeviceSet: dev,
				HostSide: func(j walk.Job, set walk.VertexSet, rows *walk.HandoverRows) (PartSide, error) {
					return host.NewHandoverSide(j, set, rows)
				},
				DeviceSide: cpuDeviceSide(devCPU, dev), CPUWorkers: 2, Force: c.force, ChunkWalks: 500,
				Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&log), nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			for run := range 2 {
				sameWalks(t, collect(t, e, jobs), want)
				plans := e.LastPlans()
				for i, p := range plans {
					wantPlan := c.plans[i]
					if wantPlan == "" {
						wantPlan = map[bool]string{true: "partition", false: "fallback"}[p.Pilot.Wins()]
					}
					if p.Plan != wantPlan || p.Why == "" {
						t.Fatalf("run %d job %d: plan %q (%s), want %q", run, p.Tag, p.Plan, p.Why, wantPlan)
					}
					if p.Plan == "partition" {
						st := p.Split
						if st.Steps[0]+st.Steps[1] == 0 || (c.share < 1 && (st.Handed[0] == 0 || st.Handed[1] == 0)) {
							t.Fatalf("job %d: %s", p.Tag, st)
						}
					}
				}
				var steps int64
				for _, w := range want {
					steps += int64(len(w) - 1)
				}
				if st := e.LastRunStats(); st.Walks != int64(len(want)) || st.Steps != steps {
					t.Fatalf("stats %+v, want %d walks, %d steps", st, len(want), steps)
				}
			}
			if !strings.Contains(log.String(), "partition split plan") || !strings.Contains(log.String(), "plan="+c.plans[0]) {
				t.Fatalf("log does not say the plan:\n%s", log.String())
			}
		})
	}
}
