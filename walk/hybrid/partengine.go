package hybrid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// PartEngine walks each job either split by partition (RunPartSplit) or on
// its fallback engine alone (the CPU engine), choosing per algorithm by
// the cost model: a pilot of the job's walks (PilotPartSplit) and
// PartPilot.Wins. It logs and records which plan each job got
// (LastPlans), so a caller can say which plan ran. It knows neither the
// CPU engine nor the GPU: its config hands it their sides.
type PartEngine struct {
	g   *graph.Graph
	cfg PartConfig
	// host is the CPU's vertices (DeviceSet's complement).
	host walk.VertexSet

	mu     sync.Mutex
	pilots map[string]PartPilot // by Algorithm.String()
	last   []JobPlan
	stats  walk.RunStats
}

var (
	_ walk.Engine        = (*PartEngine)(nil)
	_ walk.StatsReporter = (*PartEngine)(nil)
)

// PartConfig is what a PartEngine is built from.
type PartConfig struct {
	// Fallback walks every job the split does not (the CPU engine).
	Fallback walk.Engine
	// DeviceSet is the vertices the device walks (PartPlan.DeviceSet,
	// gpu.PartDevice.Set); the CPU walks the others.
	DeviceSet walk.VertexSet
	// HostSide is the CPU's side of job j over the vertices set
	// (cpu.Engine.NewHandoverSide).
	HostSide func(j walk.Job, set walk.VertexSet, rows *walk.HandoverRows) (PartSide, error)
	// DeviceSide is the device's side of job j and the call that brings
	// its rows back once the job's walkers have ended (gpu.PartDevice.Side
	// and PartSide.Finish). An error (an algorithm the device does not
	// walk) sends the job to Fallback.
	DeviceSide func(j walk.Job, rows *walk.HandoverRows) (side PartSide, finish func() error, err error)
	// CPUWorkers is the CPU side's goroutines. Defaults to GOMAXPROCS.
	CPUWorkers int
	// PilotWalks is the walks of a pilot. Defaults to 100,000.
	PilotWalks int
	// Force splits every job both sides walk, whatever the pilot says
	// (tests and benchmarks).
	Force bool
	// ChunkWalks is the walks of an emitted chunk. Defaults to 65,536.
	ChunkWalks int
	// Logger receives each job's plan. Defaults to slog.Default().
	Logger *slog.Logger
}

// JobPlan is the plan one job of a Run got.
type JobPlan struct {
	Tag   int
	Plan  string // "partition" or "fallback"
	Why   string
	Pilot PartPilot
	Split SplitStats // the split's, for Plan "partition"
}

// NewPartEngine builds the engine over g.
func NewPartEngine(g *graph.Graph, cfg PartConfig) (*PartEngine, error) {
	if g == nil || cfg.Fallback == nil || cfg.HostSide == nil || cfg.DeviceSide == nil {
		return nil, errors.New("partition split engine: needs a graph, a fallback engine and both sides")
	}
	if len(cfg.DeviceSet) != (g.NumVertices()+63)/64 {
		return nil, fmt.Errorf("partition split engine: device set of %d words for %d vertices", len(cfg.DeviceSet), g.NumVertices())
	}
	if cfg.CPUWorkers <= 0 {
		cfg.CPUWorkers = runtime.GOMAXPROCS(0)
	}
	if cfg.PilotWalks <= 0 {
		cfg.PilotWalks = 100_000
	}
	if cfg.ChunkWalks <= 0 {
		cfg.ChunkWalks = 65536
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &PartEngine{g: g, cfg: cfg, host: cfg.DeviceSet.Complement(g.NumVertices()), pilots: map[string]PartPilot{}}, nil
}

// Name implements walk.Engine.
func (e *PartEngine) Name() string { return "hybrid" }

// Close closes the fallback engine.
func (e *PartEngine) Close() error { return e.cfg.Fallback.Close() }

// LastRunStats reports the last Run: its walks and steps, both plans'.
func (e *PartEngine) LastRunStats() walk.RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// LastPlans is the plan each job of the last Run got, in job order.
func (e *PartEngine) LastPlans() []JobPlan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]JobPlan(nil), e.last...)
}

// Run walks each job on its plan: the split jobs one after another, the
// others on the fallback engine together.
func (e *PartEngine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	t0 := time.Now()
	if err := walk.ValidateOverlayJobs(e.g, jobs); err != nil {
		return err
	}
	plans := make([]JobPlan, len(jobs))
	var rest []walk.Job
	var walks, steps int64
	count := func(c walk.Chunk) error {
		walks += int64(c.Len())
		steps += c.Steps()
		return emit(c)
	}
	for i, j := range jobs {
		plans[i] = JobPlan{Tag: j.Tag, Plan: "fallback"}
		// The pilot first: the rows and sides of a job cost memory (the
		// rows are the whole job's walks) that a job walked on the
		// fallback engine does not need.
		p, err := e.pilot(ctx, j)
		if err != nil {
			return fmt.Errorf("partition split pilot of job %d: %w", j.Tag, err)
		}
		plans[i].Pilot = p
		if !p.Wins() && !e.cfg.Force {
			plans[i].Why = fmt.Sprintf("the pilot's bound %.2fx is below 1.1x", p.Speedup(HandoverStepCost))
			e.logPlan(j, plans[i])
			rest = append(rest, j)
			continue
		}
		rows := walk.NewHandoverRows(j.Starts, j.Algorithm.Length)
		ds, finish, err := e.cfg.DeviceSide(j, rows)
		if err != nil {
			plans[i].Why = "the device side does not walk it: " + err.Error()
			e.logPlan(j, plans[i])
			rest = append(rest, j)
			continue
		}
		hs, err := e.cfg.HostSide(j, e.host, rows)
		if err != nil {
			plans[i].Why = "the CPU side does not walk it: " + err.Error()
			e.logPlan(j, plans[i])
			rest = append(rest, j)
			continue
		}
		plans[i].Plan, plans[i].Why = "partition", fmt.Sprintf("the pilot's bound %.2fx", p.Speedup(HandoverStepCost))
		if !p.Wins() {
			plans[i].Why += " (forced)"
		}
		e.logPlan(j, plans[i])
		st, err := RunPartSplit(ctx, j, rows, [2]SideConfig{
			{Name: "cpu", Side: hs, Set: e.host, Workers: e.cfg.CPUWorkers},
			{Name: "gpu", Side: ds, Set: e.cfg.DeviceSet, Workers: 1, Gather: true},
		})
		if err != nil {
			return fmt.Errorf("partition split of job %d: %w", j.Tag, err)
		}
		if err := finish(); err != nil {
			return fmt.Errorf("partition split of job %d: %w", j.Tag, err)
		}
		plans[i].Split = st
		e.cfg.Logger.Debug("partition split run", "algorithm", j.Algorithm.String(), "walks", st.Walks,
			"cpu_steps", st.Steps[0], "gpu_steps", st.Steps[1], "handed_cpu_gpu", st.Handed[0], "handed_gpu_cpu", st.Handed[1],
			"duration", st.Wall)
		if err := EmitRows(j, rows, e.cfg.ChunkWalks, e.cfg.CPUWorkers, count); err != nil {
			return err
		}
	}
	if len(rest) > 0 {
		if err := e.cfg.Fallback.Run(ctx, rest, count); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.last = plans
	e.stats = walk.RunStats{Walks: walks, Steps: steps, Wall: time.Since(t0), Compute: time.Since(t0)}
	e.mu.Unlock()
	return nil
}

// pilot is the pilot of j's algorithm, walked once per algorithm (its
// share and hand-overs are the graph's and the plan's, not the job's).
func (e *PartEngine) pilot(ctx context.Context, j walk.Job) (PartPilot, error) {
	key := j.Algorithm.String()
	e.mu.Lock()
	p, ok := e.pilots[key]
	e.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := PilotPartSplit(ctx, e.cfg.Fallback, j, e.cfg.DeviceSet, e.cfg.PilotWalks)
	if err != nil {
		return p, err
	}
	e.mu.Lock()
	e.pilots[key] = p
	e.mu.Unlock()
	return p, nil
}

func (e *PartEngine) logPlan(j walk.Job, p JobPlan) {
	e.cfg.Logger.Info("partition split plan", "algorithm", j.Algorithm.String(), "walks", len(j.Starts), "plan", p.Plan,
		"why", p.Why, "device_step_share", float64(p.Pilot.DeviceSteps)/float64(max(p.Pilot.Steps, 1)),
		"handovers_per_walk", float64(p.Pilot.Handovers)/float64(max(p.Pilot.Walks, 1)))
}
