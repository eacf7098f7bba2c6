package hybrid

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

func testGraph(t testing.TB) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 3, Weighted: true, Labels: 3, Name: "hybrid-test"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newCPU(t testing.TB, g *graph.Graph, opts ...cpu.Option) *cpu.Engine {
	t.Helper()
	e, err := cpu.New(g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testJobs are jobs of several algorithms and tags, with walk ids not
// starting at 0: DeepWalk weighted and uniform, PPR and Node2Vec split
// between the engines, a forced reservoir stepper walked by one.
func testJobs(g *graph.Graph) []walk.Job {
	starts := make([]uint32, 6001)
	for i := range starts {
		starts[i] = uint32(i*37) % uint32(g.NumVertices())
	}
	return []walk.Job{
		{Tag: 7, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: true}, Seed: 1, Starts: starts},
		{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 15}, Seed: 2, Starts: starts[:4000], FirstWalk: 1 << 33},
		{Tag: 9, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.2, Weighted: true}, Seed: 3, Starts: starts[100:3100]},
		{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 2, Q: 0.5}, Seed: 4, Starts: starts[:1500]},
		{Tag: 5, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10, Weighted: true, Stepper: walk.StepperZPRS}, Seed: 5, Starts: starts[:700]},
	}
}

// collect runs jobs on e and returns every walk by (tag, id), failing on a
// walk emitted twice or a chunk whose ids do not ascend.
func collect(t *testing.T, e walk.Engine, jobs []walk.Job) map[[2]uint64][]uint32 {
	t.Helper()
	out := map[[2]uint64][]uint32{}
	var mu sync.Mutex
	err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
		mu.Lock()
		defer mu.Unlock()
		for k := range c.Len() {
			if k > 0 && c.WalkIDs[k] <= c.WalkIDs[k-1] {
				t.Errorf("chunk of job %d: walk ids %d then %d", c.Tag, c.WalkIDs[k-1], c.WalkIDs[k])
			}
			if c.Starts != nil && c.Starts[k] != c.Walk(k)[0] {
				t.Errorf("job %d walk %d: start %d, walk %v", c.Tag, c.WalkIDs[k], c.Starts[k], c.Walk(k))
			}
			key := [2]uint64{uint64(c.Tag), c.WalkIDs[k]}
			if out[key] != nil {
				t.Errorf("walk %v emitted twice", key)
			}
			out[key] = slices.Clone(c.Walk(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameWalks(t *testing.T, got, want map[[2]uint64][]uint32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d walks, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("walk %v: %v, want %v", k, got[k], w)
		}
	}
}

// TestHybridEqualsOneEngine: jobs split between two CPU engines (one of
// them in the GPU's place, a worker each, small chunks) give the walks of
// one engine, each once, in chunks of ascending ids; the share adds up and
// both engines walk in the first run; the second walks on the engine that
// was faster alone (chooseMode), the later ones in the faster mode, with
// the same walks.
func TestHybridEqualsOneEngine(t *testing.T) {
	g := testGraph(t)
	jobs := testJobs(g)
	want := collect(t, newCPU(t, g, cpu.WithWorkers(2)), jobs)
	h, err := New(g, newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(100)), newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(300)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for run := range 4 {
		t.Run(fmt.Sprint("run", run), func(t *testing.T) {
			got := collect(t, h, jobs)
			sameWalks(t, got, want)
			var steps int64
			for _, w := range want {
				steps += int64(len(w) - 1)
			}
			st, sh := h.LastRunStats(), h.LastShare()
			if st.Walks != int64(len(want)) || st.Steps != steps {
				t.Fatalf("stats %+v, want %d walks, %d steps", st, len(want), steps)
			}
			if sh.CPUWalks+sh.GPUWalks != st.Walks || sh.CPUSteps+sh.GPUSteps != st.Steps {
				t.Fatalf("share %+v does not add up to %+v", sh, st)
			}
			switch run {
			case 0:
				if sh.Mode != "split" || sh.CPUWalks == 0 || sh.GPUWalks == 0 || sh.CPURanges < 2 {
					t.Fatalf("share %+v: want both engines walking, the CPU in ranges", sh)
				}
			case 1:
				if sh.Mode == "split" {
					t.Fatalf("share %+v: want the second run on one engine", sh)
				}
			}
		})
	}
}

// stalled is an engine in the GPU's place that never ends a run on its
// own: it returns when its context is cancelled, having emitted nothing
// (a GPU busy with a long batch).
type stalled struct {
	walk.Engine
	runs atomic.Int32
}

func (s *stalled) Name() string { return "gpu" }

func (s *stalled) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	s.runs.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestStalledGPUCoveredByCPU: a GPU engine that never finishes its range
// does not hold the job: the CPU takes the range's tail, every walk is
// emitted, and the Run returns with the GPU's run left to stop (detached).
// Having walked nothing, the GPU is left out of the next run, which the CPU
// walks alone; Close waits for the GPU's cancelled run.
// Under a reorder window (the second case) the CPU, once the window has
// left it waiting for stealAfter, takes the stalled range the same way.
func TestStalledGPUCoveredByCPU(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithReorderBytes(1000 * (30*4 + 16))}} {
		stalledGPUCoveredByCPU(t, opts)
	}
}

func stalledGPUCoveredByCPU(t *testing.T, opts []Option) {
	g := testGraph(t)
	jobs := testJobs(g)[:3]
	want := collect(t, newCPU(t, g), jobs)
	gpu := &stalled{Engine: newCPU(t, g)}
	h, err := New(g, newCPU(t, g, cpu.WithWorkers(2)), gpu, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sameWalks(t, collect(t, h, jobs), want)
	sh := h.LastShare()
	if sh.Mode != "split" || sh.GPUWalks != 0 || sh.CPUWalks != int64(len(want)) || !sh.GPUDetached || sh.GPURanges != 1 {
		t.Fatalf("share %+v: want every walk from the CPU, the GPU's range detached", sh)
	}
	sameWalks(t, collect(t, h, jobs), want)
	if sh := h.LastShare(); sh.Mode != "cpu" || sh.GPURanges != 0 {
		t.Fatalf("second run: share %+v, want the CPU alone", sh)
	}
	if err := h.Close(); err != nil { // waits for the GPU's cancelled run
		t.Fatal(err)
	}
	if n := gpu.runs.Load(); n != 1 {
		t.Fatalf("the GPU engine ran %d times, want 1", n)
	}
}

// gate pairs an engine in the GPU's place that holds its walks back until
// the CPU has emitted one of them, with a CPU engine that, having emitted
// one of the GPU's walks, waits until the GPU has emitted its range: so
// both engines emit some walks of the same range, in a known order.
type gate struct {
	mu       sync.Mutex
	mine     map[[2]uint64]bool // the GPU's walks, by (job index, id)
	stolen   chan struct{}      // closed when the CPU emitted one of mine
	gpuDone  chan struct{}      // closed when the GPU emitted its range
	stoleOne sync.Once
}

type gateGPU struct {
	walk.Engine
	gt *gate
}

func (e *gateGPU) Name() string { return "gpu" }

func (e *gateGPU) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	var held []walk.Chunk
	e.gt.mu.Lock()
	for _, j := range jobs {
		for i := range j.Starts {
			e.gt.mine[[2]uint64{uint64(j.Tag), j.FirstWalk + uint64(i)}] = true
		}
	}
	e.gt.mu.Unlock()
	if err := e.Engine.Run(ctx, jobs, func(c walk.Chunk) error { held = append(held, c); return nil }); err != nil {
		return err
	}
	select {
	case <-e.gt.stolen:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer close(e.gt.gpuDone)
	for _, c := range held {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

type gateCPU struct {
	walk.Engine
	gt *gate
}

func (e *gateCPU) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	return e.Engine.Run(ctx, jobs, func(c walk.Chunk) error {
		var theirs bool
		e.gt.mu.Lock()
		for _, id := range c.WalkIDs {
			theirs = theirs || e.gt.mine[[2]uint64{uint64(c.Tag), id}]
		}
		e.gt.mu.Unlock()
		if err := emit(c); err != nil || !theirs {
			return err
		}
		e.gt.stoleOne.Do(func() { close(e.gt.stolen) })
		select {
		case <-e.gt.gpuDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// TestWalksOfBothEnginesEmittedOnce: when the CPU has taken the tail of the
// GPU's range and both emit some of the same walks, each is emitted once
// (the later copy dropped, whole chunks or part of one) and the walks are
// one engine's.
func TestWalksOfBothEnginesEmittedOnce(t *testing.T) {
	g := testGraph(t)
	jobs := testJobs(g)[:2]
	want := collect(t, newCPU(t, g), jobs)
	gt := &gate{mine: map[[2]uint64]bool{}, stolen: make(chan struct{}), gpuDone: make(chan struct{})}
	h, err := New(g, &gateCPU{Engine: newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(64)), gt: gt},
		&gateGPU{Engine: newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(1000)), gt: gt})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sameWalks(t, collect(t, h, jobs), want)
	sh := h.LastShare()
	if sh.Duplicates == 0 || sh.GPUWalks == 0 || sh.CPUWalks+sh.GPUWalks != int64(len(want)) {
		t.Fatalf("share %+v: want walks from both engines, some walked twice, %d in all", sh, len(want))
	}
}

// picky is an engine in the GPU's place that refuses Node2Vec and records
// the jobs it was given.
type picky struct {
	*cpu.Engine
	mu   sync.Mutex
	algs map[string]int // walks run, by algorithm
}

func (p *picky) Name() string { return "gpu" }

func (p *picky) Check(a walk.Algorithm) error {
	if a.Kind == walk.Node2Vec {
		return fmt.Errorf("%w: no node2vec here", walk.ErrInvalidAlgorithm)
	}
	return nil
}

// CheckOverlay refuses Node2Vec on a delta, as the GPU engine refuses
// temporal walks on one.
func (p *picky) CheckOverlay(a walk.Algorithm) error {
	if err := p.Check(a); err != nil {
		return err
	}
	return p.Engine.CheckOverlay(a)
}

func (p *picky) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	p.mu.Lock()
	for _, j := range jobs {
		p.algs[j.Algorithm.String()] += len(j.Starts)
	}
	p.mu.Unlock()
	return p.Engine.Run(ctx, jobs, emit)
}

// TestJobsOneEngineWalks: a job the GPU refuses is walked by the CPU, a job
// whose walks the engines draw differently (a reservoir stepper) by the GPU
// whole, so its walks do not depend on the split; a job list too small to
// split goes to the CPU.
func TestJobsOneEngineWalks(t *testing.T) {
	g := testGraph(t)
	jobs := testJobs(g)
	want := collect(t, newCPU(t, g), jobs)
	gpu := &picky{Engine: newCPU(t, g, cpu.WithWorkers(1)), algs: map[string]int{}}
	h, err := New(g, newCPU(t, g, cpu.WithWorkers(1)), gpu)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Check(jobs[3].Algorithm); err != nil {
		t.Fatalf("Check(node2vec) = %v: the CPU walks it", err)
	}
	sameWalks(t, collect(t, h, jobs), want)
	if n := gpu.algs[jobs[3].Algorithm.String()]; n != 0 {
		t.Errorf("the GPU walked %d node2vec walks", n)
	}
	if n := gpu.algs[jobs[4].Algorithm.String()]; n != len(jobs[4].Starts) {
		t.Errorf("the GPU walked %d of the %d zprs walks", n, len(jobs[4].Starts))
	}

	small := []walk.Job{jobs[0]}
	small[0].Starts = small[0].Starts[:minSplitWalks-1]
	clear(gpu.algs)
	collect(t, h, small)
	if len(gpu.algs) != 0 || h.LastShare().GPUWalks != 0 {
		t.Errorf("%d walks: the GPU walked %v", len(small[0].Starts), gpu.algs)
	}
}

// failing is an engine in the GPU's place whose runs fail.
type failing struct{ walk.Engine }

var errDevice = errors.New("device lost")

func (f failing) Run(context.Context, []walk.Job, walk.EmitFunc) error { return errDevice }

// TestErrorsStopTheRun: an engine's error and emit's error are returned
// (the engine's named), and the engines walk again afterwards.
func TestErrorsStopTheRun(t *testing.T) {
	g := testGraph(t)
	jobs := testJobs(g)[:2]
	h, err := New(g, newCPU(t, g, cpu.WithWorkers(1)), failing{newCPU(t, g)})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(context.Background(), jobs, func(walk.Chunk) error { return nil })
	if !errors.Is(err, errDevice) || !strings.Contains(err.Error(), "gpu engine") {
		t.Fatalf("Run = %v, want the GPU engine's error", err)
	}
	h.Close()

	h, err = New(g, newCPU(t, g, cpu.WithWorkers(1)), newCPU(t, g, cpu.WithWorkers(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	full := errors.New("sink full")
	calls := 0
	err = h.Run(context.Background(), jobs, func(walk.Chunk) error {
		if calls++; calls == 3 {
			return full
		}
		return nil
	})
	if !errors.Is(err, full) {
		t.Fatalf("Run = %v, want emit's error", err)
	}
	sameWalks(t, collect(t, h, jobs), collect(t, newCPU(t, g), jobs))
}

func TestCutKeepsWalkIDs(t *testing.T) {
	jobs := []walk.Job{
		{Tag: 10, Starts: make([]uint32, 5), FirstWalk: 100},
		{Tag: 11, Starts: make([]uint32, 3)}, // not split
		{Tag: 12, Starts: make([]uint32, 4), FirstWalk: 7},
	}
	sp := newSpace(jobs, []int{0, 2})
	if sp.total() != 9 {
		t.Fatalf("total %d, want 9", sp.total())
	}
	type piece struct {
		tag       int
		first     uint64
		n         int
		startsOff int
	}
	cases := []struct {
		lo, hi int64
		want   []piece
	}{
		{0, 9, []piece{{0, 100, 5, 0}, {2, 7, 4, 0}}},
		{3, 7, []piece{{0, 103, 2, 3}, {2, 7, 2, 0}}},
		{5, 6, []piece{{2, 7, 1, 0}}},
		{8, 9, []piece{{2, 10, 1, 3}}},
		{4, 4, nil},
	}
	for _, c := range cases {
		got := sp.cut(c.lo, c.hi)
		if len(got) != len(c.want) {
			t.Fatalf("cut(%d, %d) = %d jobs, want %d", c.lo, c.hi, len(got), len(c.want))
		}
		for k, w := range c.want {
			j := got[k]
			if j.Tag != w.tag || j.FirstWalk != w.first || len(j.Starts) != w.n ||
				&j.Starts[0] != &jobs[w.tag].Starts[w.startsOff] {
				t.Fatalf("cut(%d, %d)[%d] = tag %d first %d %d walks, want %+v", c.lo, c.hi, k, j.Tag, j.FirstWalk, len(j.Starts), w)
			}
		}
	}
}

// TestCursorsHandOutEachWalkOnce: the GPU takes from the front, the CPU
// from the back, then from the back of the GPU's range; every walk is
// handed out once, and once to the GPU's range's thief at most.
func TestCursorsHandOutEachWalkOnce(t *testing.T) {
	c := newCursors(1000)
	g, ok := c.takeGPU(600)
	if !ok || g != (span{0, 600}) {
		t.Fatalf("takeGPU = %v %v", g, ok)
	}
	var got []span
	for {
		r, stolen, ok := c.takeCPU(150)
		if !ok {
			break
		}
		if stolen != (r.hi <= 600) {
			t.Fatalf("range %v stolen=%v", r, stolen)
		}
		got = append(got, r)
	}
	want := []span{{850, 1000}, {700, 850}, {600, 700}, {450, 600}, {300, 450}, {150, 300}, {0, 150}}
	if !slices.Equal(got, want) {
		t.Fatalf("CPU ranges %v, want %v", got, want)
	}
	if _, ok := c.takeGPU(10); ok {
		t.Fatal("the GPU took a range after all were taken")
	}
	// A GPU range ended: nothing of it is stolen.
	c = newCursors(100)
	c.takeGPU(40)
	c.gpuDone()
	r, stolen, _ := c.takeCPU(100)
	if r != (span{40, 100}) || stolen {
		t.Fatalf("takeCPU = %v stolen=%v", r, stolen)
	}
	if _, _, ok := c.takeCPU(100); ok {
		t.Fatal("the CPU took from a GPU range that had ended")
	}
}

func TestRangeSizes(t *testing.T) {
	shares := []struct {
		cpu, gpu, want float64
	}{
		{-1, -1, 0.5}, {850, -1, 0.5}, {-1, 2000, 0.5}, {1, 3, 0.75}, {3, 1, 0.25}, {1, 0, minGPUShare}, {0, 0, 0.5},
	}
	for _, c := range shares {
		if got := gpuShare(c.cpu, c.gpu); got != c.want {
			t.Errorf("gpuShare(%v, %v) = %v, want %v", c.cpu, c.gpu, got, c.want)
		}
	}
	takes := []struct {
		total int64
		rate  float64
		want  int64
	}{
		{1 << 20, -1, 1 << 14},       // unmeasured: 1/64
		{1 << 20, 1e7, 131072},       // 20 ms at 10 M walks/s is 200,000: capped at an eighth
		{1 << 24, 1e7, 200000},       // 20 ms
		{1000, 1e7, minRange},        // an eighth of a small job is below the floor
		{1 << 24, 1000, minRange},    // a slow CPU still takes the floor
		{1 << 20, 0, (1 << 20) / 64}, // a rate of 0 is no measurement
	}
	for _, c := range takes {
		if got := cpuTake(c.total, c.rate); got != c.want {
			t.Errorf("cpuTake(%d, %v) = %d, want %d", c.total, c.rate, got, c.want)
		}
	}
	if got := gpuTake(1000, 0.7); got != 700 {
		t.Errorf("gpuTake(1000, 0.7) = %d", got)
	}
	if got := gpuTake(100, 0.5); got != minRange {
		t.Errorf("gpuTake(100, 0.5) = %d, want the floor %d", got, minRange)
	}
}

func TestSameWalks(t *testing.T) {
	g := testGraph(t)
	cases := []struct {
		a    walk.Algorithm
		want bool
	}{
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, true},
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true}, true},
		{walk.Algorithm{Kind: walk.PPR, Length: 5, StopProb: 0.1}, true},
		{walk.Algorithm{Kind: walk.Node2Vec, Length: 5, P: 1, Q: 2}, true},
		{walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0, 1}}, true},
		{walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0, 1}, Stepper: walk.StepperZPRS}, false},
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 5, Weighted: true, Stepper: walk.StepperDPRS}, false},
	}
	for _, c := range cases {
		if got := SameWalks(c.a, g); got != c.want {
			t.Errorf("SameWalks(%v) = %v, want %v", c.a, got, c.want)
		}
	}
}

func TestBitRanges(t *testing.T) {
	for _, c := range []struct{ lo, hi int64 }{{0, 0}, {0, 1}, {3, 64}, {0, 64}, {63, 65}, {5, 200}, {64, 128}, {100, 101}} {
		b := make([]uint64, 4)
		b[1] = 0xf0f0 // bits 68-71, 76-79 set before
		want := 0
		for i := c.lo; i < c.hi; i++ {
			if b[i>>6]&(1<<(i&63)) != 0 {
				want++
			}
		}
		if got := countBits(b, c.lo, c.hi); got != want {
			t.Errorf("countBits(%d, %d) = %d, want %d", c.lo, c.hi, got, want)
		}
		setBits(b, c.lo, c.hi)
		for i := int64(0); i < 256; i++ {
			set := b[i>>6]&(1<<(i&63)) != 0
			was := i >= 68 && i < 72 || i >= 76 && i < 80
			if set != (was || i >= c.lo && i < c.hi) {
				t.Fatalf("setBits(%d, %d): bit %d is %v", c.lo, c.hi, i, set)
			}
		}
	}
}

// TestPickMode: split first, then the engine that walked faster while
// they split, then the faster of the two modes, the other again every
// reprobeRuns runs.
func TestPickMode(t *testing.T) {
	un := [3]float64{-1, -1, -1}
	cases := []struct {
		name  string
		rates rates
		mode  [3]float64
		runs  int
		want  mode
	}{
		{"nothing measured", unmeasured, un, 1, modeSplit},
		{"gpu faster in the split", rates{cpu: 1e6, gpu: 4e6}, [3]float64{5e6, -1, -1}, 2, modeGPU},
		{"cpu faster in the split", rates{cpu: 9e6, gpu: 1e6}, [3]float64{8e6, -1, -1}, 2, modeCPU},
		{"gpu alone faster", rates{cpu: 1e6, gpu: 4e6}, [3]float64{5e6, 7e6, -1}, 3, modeGPU},
		{"split faster", rates{cpu: 5e6, gpu: 4e6}, [3]float64{9e6, -1, 5e6}, 3, modeSplit},
		{"reprobe the slower", rates{cpu: 5e6, gpu: 4e6}, [3]float64{9e6, -1, 5e6}, reprobeRuns, modeCPU},
		{"reprobe split", rates{cpu: 1e6, gpu: 4e6}, [3]float64{5e6, 7e6, -1}, 2 * reprobeRuns, modeSplit},
	}
	for _, c := range cases {
		ks := &keyStats{rates: c.rates, mode: c.mode, runs: c.runs}
		if got := pickMode(ks); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestOverlayJobsSplit: a job on a live graph's snapshot is split when both
// engines walk it on the delta (two CPU engines here), with the walks of
// one engine; Node2Vec on the delta, which this GPU stand-in refuses (as
// the GPU engine refuses temporal walks on one), goes whole to the CPU
// engine.
func TestOverlayJobsSplit(t *testing.T) {
	g := testGraph(t)
	l, err := livegraph.New(g)
	if err != nil {
		t.Fatal(err)
	}
	var ups []livegraph.Update
	n := int64(g.NumVertices())
	for i := range int64(3000) {
		src, dst := i*7%n, i*131%n
		ups = append(ups, livegraph.Update{Op: livegraph.Insert, Src: src, Dst: dst, Weight: 2, Has: livegraph.HasWeight})
		if i%5 == 0 {
			ups = append(ups, livegraph.Update{Op: livegraph.Delete, Src: dst, Dst: src})
		}
	}
	if err := l.Apply(0, 0, ups); err != nil {
		t.Fatal(err)
	}
	snap := l.Publish()
	jobs := testJobs(g)[:4]
	for i := range jobs {
		jobs[i].Overlay = snap
	}
	want := collect(t, newCPU(t, g, cpu.WithWorkers(2)), jobs)
	gpu := &picky{Engine: newCPU(t, g, cpu.WithWorkers(1)), algs: map[string]int{}}
	h, err := New(g, newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(100)), gpu)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sameWalks(t, collect(t, h, jobs), want)
	if sh := h.LastShare(); sh.Mode != "split" || sh.GPUWalks == 0 {
		t.Errorf("share %+v: want the delta's DeepWalk and PPR jobs split", sh)
	}
	if n := gpu.algs[jobs[3].Algorithm.String()]; n != 0 {
		t.Errorf("the GPU walked %d node2vec walks on the delta", n)
	}
}

// TestCursorsWithinAWindow: under a reorder window the GPU's range ends at
// the limit, the CPU takes next to it from the front and then from the
// GPU's back end, and neither takes past the limit.
func TestCursorsWithinAWindow(t *testing.T) {
	c := newCursors(1000)
	if g, ok := c.takeGPUWithin(600, 400); !ok || g != (span{0, 400}) {
		t.Fatalf("takeGPUWithin = %v %v, want [0, 400)", g, ok)
	}
	if _, ok := c.takeGPUWithin(100, 400); ok {
		t.Fatal("the GPU took a range starting at the limit")
	}
	var got []span
	for {
		r, stolen, ok := c.takeCPUWithin(150, 500, true)
		if !ok {
			break
		}
		if stolen != (r.hi <= 400) {
			t.Fatalf("range %v stolen=%v", r, stolen)
		}
		got = append(got, r)
	}
	want := []span{{400, 500}, {250, 400}, {100, 250}, {0, 100}}
	if !slices.Equal(got, want) {
		t.Fatalf("CPU ranges %v, want %v", got, want)
	}
	// The limit moved (walks were emitted): the front again.
	if _, ok := c.takeGPUWithin(10, 2000); !ok {
		t.Fatal("the GPU took nothing below a moved limit")
	}
	if r, stolen, ok := c.takeCPUWithin(150, 2000, false); !ok || stolen || r != (span{510, 660}) {
		t.Fatalf("takeCPUWithin = %v %v %v, want [510, 660)", r, stolen, ok)
	}
	// At the limit, walks left: nothing unless stealing is allowed.
	if _, _, ok := c.takeCPUWithin(150, 660, false); ok {
		t.Fatal("the CPU took a range at the limit without being allowed to steal")
	}
	if r, stolen, ok := c.takeCPUWithin(150, 660, true); !ok || !stolen || r != (span{500, 510}) {
		t.Fatalf("takeCPUWithin = %v %v %v, want [500, 510) stolen", r, stolen, ok)
	}
}

// TestReorderWindowBoundsEmits: with WithReorderBytes the engines' walks
// come out at most the window ahead of the first walk not emitted yet
// (counted in the split space, job after job), the GPU in the middle of
// the window's ranges as the CPU takes next to it; the walks are the CPU
// engine's. Without the bound the CPU starts from the far end (the check
// fails: the sink's ErrReorderWindow for a large job, issue 35's walk
// --engine hybrid).
func TestReorderWindowBoundsEmits(t *testing.T) {
	g := testGraph(t)
	starts := make([]uint32, 20000)
	for i := range starts {
		starts[i] = uint32(i*37) % uint32(g.NumVertices())
	}
	alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: true}
	jobs := []walk.Job{{Tag: 1, Algorithm: alg, Seed: 1, Starts: starts}}
	want := collect(t, newCPU(t, g, cpu.WithWorkers(2)), jobs)
	const rowBytes = (20+1)*4 + 12
	for _, c := range []struct {
		name   string
		bytes  int64
		window int64 // walks; 0: no bound, so the check must fail
	}{
		{"window of 3000 walks", 3000 * rowBytes, 3000},
		{"no window", 0, 3000},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []Option{}
			if c.bytes > 0 {
				opts = append(opts, WithReorderBytes(c.bytes))
			}
			h, err := New(g, newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(100)), newCPU(t, g, cpu.WithWorkers(1), cpu.WithChunkSize(300)), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			emitted := make([]bool, len(starts))
			low, ahead := 0, 0
			var mu sync.Mutex
			got := map[[2]uint64][]uint32{}
			err = h.Run(context.Background(), jobs, func(ch walk.Chunk) error {
				mu.Lock()
				defer mu.Unlock()
				for k := range ch.Len() {
					i := int(ch.WalkIDs[k])
					ahead = max(ahead, i-low)
					emitted[i] = true
					got[[2]uint64{uint64(ch.Tag), ch.WalkIDs[k]}] = slices.Clone(ch.Walk(k))
				}
				for low < len(emitted) && emitted[low] {
					low++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sameWalks(t, got, want)
			sh := h.LastShare()
			if c.bytes > 0 {
				if ahead >= int(c.window) {
					t.Fatalf("a walk came out %d walks ahead of the first not emitted, window %d", ahead, c.window)
				}
				if sh.Mode != "split" || sh.GPUWalks == 0 || sh.CPUWalks == 0 {
					t.Fatalf("share %+v: want both engines walking", sh)
				}
				if sh.Duplicates > c.window {
					t.Fatalf("share %+v: the CPU walked %d of the GPU's walks again, more than a window", sh, sh.Duplicates)
				}
			} else if ahead < int(c.window) {
				t.Fatalf("without a window the walks came at most %d ahead: the test shows nothing", ahead)
			}
			t.Logf("at most %d walks ahead; share %+v", ahead, sh)
		})
	}
}
