package gpu

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// TestSplitJobs: the shares cover every walk of every job once, in order,
// with the ids the walks have in their job, and are balanced.
func TestSplitJobs(t *testing.T) {
	mk := func(tag, n int, first uint64) walk.Job {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(tag*1000 + i)
		}
		return walk.Job{Tag: tag, Seed: uint64(tag), Starts: s, FirstWalk: first}
	}
	for _, c := range []struct {
		sizes []int
		n     int
	}{{[]int{10}, 1}, {[]int{10}, 3}, {[]int{7, 0, 5, 9}, 2}, {[]int{1}, 4}, {[]int{1000, 1, 333}, 4}, {nil, 2}} {
		var jobs []walk.Job
		var total int
		for i, n := range c.sizes {
			jobs = append(jobs, mk(i, n, uint64(i*5)))
			total += n
		}
		shares := splitJobs(jobs, c.n)
		if len(shares) != c.n {
			t.Fatalf("%v over %d: %d shares", c.sizes, c.n, len(shares))
		}
		seen := map[[2]uint64]bool{}
		for k, sh := range shares {
			var n int
			for _, p := range sh {
				j := jobs[p.Tag]
				for i, s := range p.Starts {
					id := p.FirstWalk + uint64(i)
					if s != j.Starts[id-j.FirstWalk] || p.Seed != j.Seed {
						t.Fatalf("%v over %d: share %d walk %d of job %d starts at %d", c.sizes, c.n, k, id, p.Tag, s)
					}
					key := [2]uint64{uint64(p.Tag), id}
					if seen[key] {
						t.Fatalf("walk %v twice", key)
					}
					seen[key] = true
				}
				n += len(p.Starts)
			}
			if lo, hi := total/c.n, (total+c.n-1)/c.n; n < lo || n > hi {
				t.Errorf("%v over %d: share %d has %d walks, want %d..%d", c.sizes, c.n, k, n, lo, hi)
			}
		}
		if len(seen) != total {
			t.Fatalf("%v over %d: %d walks in the shares, want %d", c.sizes, c.n, len(seen), total)
		}
	}
}

// TestMultiEqualsOneEngine: walks spread over three engines (CPU engines
// here; the GPU test does the same on devices) equal one engine's, chunks
// arrive whole and stats add up; an emit error stops every engine and is
// returned.
func TestMultiEqualsOneEngine(t *testing.T) {
	g := placementGraph(t)
	one, err := cpu.New(g, cpu.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var engines []walk.Engine
	for range 3 {
		e, err := cpu.New(g, cpu.WithWorkers(1), cpu.WithChunkSize(100))
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	m, err := NewMulti(engines...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	starts := make([]uint32, 3001)
	for i := range starts {
		starts[i] = uint32(i*31) % uint32(g.NumVertices())
	}
	jobs := []walk.Job{
		{Tag: 0, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: true}, Seed: 1, Starts: starts},
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 10, P: 2, Q: 0.5}, Seed: 2, Starts: starts[:77]},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 30, StopProb: 0.3}, Seed: 3, Starts: starts[5:900]},
	}
	run := func(e walk.Engine) map[[2]uint64][]uint32 {
		out := map[[2]uint64][]uint32{}
		err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
			for k := range c.Len() {
				key := [2]uint64{uint64(c.Tag), c.WalkIDs[k]}
				if out[key] != nil {
					t.Fatalf("walk %v twice", key)
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
	want, got := run(one), run(m)
	if len(got) != len(want) {
		t.Fatalf("%d walks over three engines, %d on one", len(got), len(want))
	}
	var steps int64
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("walk %v: %v over three engines, %v on one", k, got[k], w)
		}
		steps += int64(len(w) - 1)
	}
	if st := m.LastRunStats(); st.Walks != int64(len(want)) || st.Steps != steps {
		t.Fatalf("stats %+v, want %d walks and %d steps", st, len(want), steps)
	}
	stop := errors.New("sink full")
	calls := 0
	err = m.Run(context.Background(), jobs, func(walk.Chunk) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("emit error: Run returned %v after %d calls", err, calls)
	}
	// The engines are usable again.
	if again := run(m); len(again) != len(want) {
		t.Fatalf("after the emit error: %d walks", len(again))
	}
}

// cpuDevice is a graphsample.DeviceSampler backed by the CPU, one instance a
// call, for the tests that need no GPU.
type cpuDevice struct {
	*cpu.Engine
	g         *graph.Graph
	instances int
}

var _ graphsample.DeviceSampler = (*cpuDevice)(nil)

func (d *cpuDevice) Name() string { return "gpu" }

func (d *cpuDevice) SamplesOnDevice(p graphsample.SampleParams) bool { return DeviceSamples(p) }

func (d *cpuDevice) SampleRangeOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, graphsample.SampleStats, error) {
	var out [][]graphsample.SampledEdge
	var st graphsample.SampleStats
	for i := first; i < first+count; i++ {
		one, s, err := graphsample.SampleRange(ctx, d.g, p, starts, i, 1, 1)
		if err != nil {
			return nil, st, err
		}
		out, st.Instances, st.Edges = append(out, one...), st.Instances+s.Instances, st.Edges+s.Edges
		d.instances++
	}
	return out, st, nil
}

// A Multi samples on its first engine's device what that device takes,
// and names the CPU for the rest (and for engines without a device).
func TestMultiSamplesOnTheFirstDevice(t *testing.T) {
	ctx := context.Background()
	g := placementGraph(t)
	c0, _ := cpu.New(g)
	c1, _ := cpu.New(g)
	d0 := &cpuDevice{Engine: c0, g: g}
	m, err := NewMulti(d0, c1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	starts := []uint32{1, 2, 3, 4, 5}
	nbr := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{3, 2}, Seed: 5, InstancesPerSeed: 2}
	replace := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{3, 2}, Replace: true, Seed: 5, InstancesPerSeed: 1}
	if graphsample.SampleEngine(m, nbr) != "gpu" || graphsample.SampleEngine(m, replace) != "cpu" {
		t.Fatalf("SampleEngine: neighbor %q, neighbor with replacement %q", graphsample.SampleEngine(m, nbr), graphsample.SampleEngine(m, replace))
	}
	want, _, _ := graphsample.Sample(ctx, g, nbr, starts, 1)
	got, _, err := graphsample.SampleRangeOn(ctx, m, g, nbr, starts, 0, -1, 1)
	if err != nil || !slices.EqualFunc(got, want, slices.Equal) || d0.instances != len(want) {
		t.Fatalf("neighbor on the first device: %v, %d instances there", err, d0.instances)
	}
	cpus, _ := NewMulti(c1)
	if graphsample.SampleEngine(cpus, nbr) != "cpu" {
		t.Error("a Multi of CPU engines samples on a device")
	}
	if _, _, err := cpus.SampleRangeOnDevice(ctx, nbr, starts, 0, 1); err == nil {
		t.Error("a Multi of CPU engines sampled on a device")
	}
}
