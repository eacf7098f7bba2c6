package stage

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// heldDuringRun is an engine that notes what the stage tells the live
// graph's applier while it walks.
type heldDuringRun struct {
	walk.Engine
	load *walkerLoad
	held []int
}

func (e *heldDuringRun) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	e.held = append(e.held, e.load.WalkerCores())
	return e.Engine.Run(ctx, jobs, emit)
}

// The walks hold the engine's cores for the applier (live.Beside) while a
// walk job runs, every slice of a sliced one included, and while a request
// waits in the queue for the engine; none before or after. A request
// waiting for its edge offsets is not queued, so the applier it waits for
// keeps the cores.
func TestWalkersHoldTheCoresWhileWalking(t *testing.T) {
	_, g := testGraphCached(t)
	c, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &Stage{queue: make(chan *batch, 1), turns: turns.NewLine(), log: slog.New(slog.DiscardHandler)}
	s.walkers.queue, s.walkers.cores = s.queue, 6
	eng := &heldDuringRun{Engine: c, load: &s.walkers}
	m, err := newMetrics(prometheus.NewRegistry(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.m = m
	v := newServed(g, eng)
	if got := s.walkers.WalkerCores(); got != 0 {
		t.Fatalf("no walk: %d cores held, want 0", got)
	}
	s.queue <- &batch{}
	if got := s.walkers.WalkerCores(); got != 6 {
		t.Fatalf("a request queued: %d cores held, want the engine's 6", got)
	}
	<-s.queue
	starts := make([]uint32, 64)
	for i := range starts {
		starts[i] = uint32(i % g.NumVertices())
	}
	job := walk.Job{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, Seed: 1, Starts: starts}
	for _, budget := range []int64{1 << 40, int64(v.cost.WalkCost(job.Algorithm, 8))} { // one run; slices of 8 walks
		s.o.MicroBatchMaxCost = budget
		eng.held = nil
		b := &batch{chunks: make(chan walk.Chunk, 1024)}
		if err := s.runJobs(context.Background(), v, []walk.Job{job}, []*batch{b}, s.turns.Hold()); err != nil {
			t.Fatal(err)
		}
		if len(eng.held) == 0 || budget < 1<<40 && len(eng.held) < 2 {
			t.Fatalf("budget %d: %d engine runs, want one, or slices", budget, len(eng.held))
		}
		for i, h := range eng.held {
			if h != 6 {
				t.Errorf("budget %d, run %d of %d: %d cores held while walking, want 6", budget, i+1, len(eng.held), h)
			}
		}
		if got := s.walkers.WalkerCores(); got != 0 {
			t.Errorf("after the walks: %d cores held, want 0", got)
		}
	}
}

// The cores a stage's walks hold: the engine's workers as configured, one
// host thread for the GPU engine.
func TestWalkerCores(t *testing.T) {
	_, g := testGraphCached(t)
	c, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := walkerCores(&LiveOptions{WalkerCores: 3}, c); got != 3 {
		t.Errorf("configured 3: %d", got)
	}
	if got := walkerCores(&LiveOptions{}, gpuNamed{c}); got != 1 {
		t.Errorf("the GPU engine: %d, want 1", got)
	}
}

type gpuNamed struct{ walk.Engine }

func (gpuNamed) Name() string { return "gpu" }
