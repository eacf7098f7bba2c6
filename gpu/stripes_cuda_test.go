//go:build cuda

package gpu

import (
	"context"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestStripedMatchesOneGPU: engines sharing one partitioned copy of the
// graph (Stripes) give the walks of one engine holding it whole, walk for
// walk, for every sampler: simulated on one GPU (two pieces on device 0,
// two engines there), and over every device when there are several. The
// graph is R-MAT scale 16 (2 M edges: several 2 MiB mapping granules per
// array, so each device holds a piece of each); the second engine finds
// the tables built, and the last Close frees the stripes.
func TestStripedMatchesOneGPU(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 3,
		Undirected: true, Weighted: true, Labels: 5, Name: "rmat-s16"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	setups := map[string][]int{"two pieces on device 0": {0, 0}}
	if n > 1 {
		var all []int
		for d := range n {
			all = append(all, d)
		}
		setups["one piece per device"] = all
	}
	one := newEngine(t, g)
	starts := allStarts(g, 1)
	jobs := func(a walk.Algorithm) []walk.Job {
		return []walk.Job{{Tag: 1, Algorithm: a, Seed: 11, Starts: starts}, {Tag: 2, Algorithm: a, Seed: 12, Starts: starts[:1001]}}
	}
	want := map[string]map[int][][]uint32{}
	for _, c := range placementCases {
		want[c.name] = collect(t, one, jobs(c.alg))
	}
	for name, devices := range setups {
		s, err := NewStripes(devices)
		if err != nil {
			t.Fatal(err)
		}
		var engines []walk.Engine
		for i, d := range devices {
			e, err := openEngine(g, WithDevice(d), WithStripes(s))
			if err != nil {
				t.Fatalf("%s: engine %d: %v", name, i, err)
			}
			if i > 0 && e.TableBuild() != 0 {
				t.Errorf("%s: engine %d built tables (%v): the first one had", name, i, e.TableBuild())
			}
			engines = append(engines, e)
		}
		per := s.DeviceBytes()
		t.Logf("%s: %s", name, s)
		for _, d := range devices {
			if per[d] == 0 {
				t.Fatalf("%s: device %d holds none of the graph: %v", name, d, per)
			}
		}
		m, err := NewMulti(engines...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range placementCases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				got := collect(t, m, jobs(c.alg))
				for tag, ws := range want[c.name] {
					for id, w := range ws {
						if !equal(got[tag][id], w) {
							t.Fatalf("job %d walk %d: %v partitioned, %v on one engine", tag, id, got[tag][id], w)
						}
					}
				}
			})
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		left, closeErr := len(s.arrays), s.closeErr
		s.mu.Unlock()
		if left != 0 || closeErr != nil {
			t.Fatalf("%s: after Close %d arrays left, %v", name, left, closeErr)
		}
		for i, e := range engines {
			if e := e.(*Engine); e.liveDev != 0 || e.liveHost != 0 {
				t.Errorf("%s: engine %d leaks %d device and %d host allocations", name, i, e.liveDev, e.liveHost)
			}
		}
	}
}

// TestStripedRefusesHostPlacement: a partitioned engine is not also put
// under a host placement plan.
func TestStripedRefusesHostPlacement(t *testing.T) {
	s, err := NewStripes([]int{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := openEngine(testGraph(t), WithStripes(s), WithDeviceFraction(0.5)); err == nil {
		_ = e.Close()
		t.Fatal("a partitioned engine accepted a device fraction")
	}
	if len(s.arrays) != 0 || s.refs != 0 {
		t.Fatalf("a refused engine left %d arrays, %d references", len(s.arrays), s.refs)
	}
}
