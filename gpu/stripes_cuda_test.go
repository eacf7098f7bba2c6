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
// two engines there), and over every device when there are several; each
// reading the stripes alone (device fraction 0.45: no room for more than
// its own piece, about half), with copies of the other pieces' hubs (0.75), and with
// copies of all it can hold (no cap); and with half (on one GPU) or 30%
// (over several) of every array in host memory mapped into the same
// ranges. The graph is R-MAT scale 16 (2 M
// edges: several 2 MiB mapping granules per array, so each device holds a
// piece of each); the second engine finds the tables built, and the last
// Close frees the stripes.
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
	type setup struct {
		name     string
		devices  []int
		fraction float64
		hubs     bool    // expect hub copies
		host     float64 // the stripes' host share
	}
	setups := []setup{{"two pieces on device 0", []int{0, 0}, 0.45, false, 0},
		{"two pieces on device 0, hubs", []int{0, 0}, 0.75, true, 0},
		{"two pieces on device 0, all hubs", []int{0, 0}, 1, true, 0},
		// Half of every array in host memory: each piece on the device
		// about a quarter, read with no hub copies (fraction 0.2) and with
		// them.
		{"two pieces on device 0 and the host", []int{0, 0}, 0.2, false, 0.5},
		{"two pieces on device 0 and the host, hubs", []int{0, 0}, 0.75, true, 0.5}}
	if n > 1 {
		var all []int
		for d := range n {
			all = append(all, d)
		}
		setups = append(setups, setup{"one piece per device", all, 0.9 / float64(n), false, 0},
			setup{"one piece per device, hubs", all, 0.75, true, 0},
			setup{"one piece per device and the host, hubs", all, 0.75, true, 0.3})
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
	for _, su := range setups {
		name := su.name
		s, err := NewStripes(su.devices, su.host)
		if err != nil {
			t.Fatal(err)
		}
		var engines []walk.Engine
		for i, d := range su.devices {
			e, err := openEngine(g, WithDevice(d), WithStripes(s), WithDeviceFraction(su.fraction))
			if err != nil {
				t.Fatalf("%s: engine %d: %v", name, i, err)
			}
			if i > 0 && e.TableBuild() != 0 {
				t.Errorf("%s: engine %d built tables (%v): the first one had", name, i, e.TableBuild())
			}
			if p := e.Placement(); (p != nil) != su.hubs {
				t.Fatalf("%s: engine %d placement %v, want hubs %v", name, i, p, su.hubs)
			} else if p != nil {
				t.Logf("%s: engine %d: %d hub vertices, %.1f%% of the edges local", name, i, p.DeviceVertices, 100*p.DeviceShare())
				if su.fraction < 1 && p.DeviceShare() > su.fraction+0.01 {
					t.Errorf("%s: engine %d holds %.3f of the edges, fraction %v", name, i, p.DeviceShare(), su.fraction)
				}
			}
			engines = append(engines, e)
		}
		per := s.DeviceBytes()
		t.Logf("%s: %s", name, s)
		for _, d := range su.devices {
			if per[d] == 0 {
				t.Fatalf("%s: device %d holds none of the graph: %v", name, d, per)
			}
		}
		if (per[hostPiece] > 0) != (su.host > 0) {
			t.Fatalf("%s: host share %v, the host holds %d bytes", name, su.host, per[hostPiece])
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

// TestStripedEngineOutsideGroup: an engine on a device its stripes do not
// cover is refused, and leaves nothing behind.
func TestStripedEngineOutsideGroup(t *testing.T) {
	s, err := NewStripes([]int{5, 6}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := openEngine(testGraph(t), WithStripes(s)); err == nil {
		_ = e.Close()
		t.Fatal("an engine on device 0 joined stripes over devices 5 and 6")
	}
	if len(s.arrays) != 0 || s.refs != 0 {
		t.Fatalf("a refused engine left %d arrays, %d references", len(s.arrays), s.refs)
	}
}
